"""Watch the Ollama server and model; raise repair issues the user must act on."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import CALLBACK_TYPE, HomeAssistant, callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.aiohttp_client import async_get_clientsession
from homeassistant.helpers.event import async_track_time_interval
from homeassistant.util import dt as dt_util

from .const import CONF_MODEL, CONF_OLLAMA_URL, DOMAIN, LOGGER
from .ollama_api import (
    OllamaError,
    OllamaModelNotFound,
    async_list_models,
    async_show_model,
    url_without_credentials,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from homeassistant.config_entries import ConfigEntry

CHECK_INTERVAL: Final = timedelta(minutes=1)
# A restart of Ollama or a reboot of its box takes minutes; only an outage
# longer than this asks the user to act.
UNREACHABLE_AFTER: Final = timedelta(minutes=10)
ISSUE_UNREACHABLE: Final = "ollama_unreachable"
ISSUE_MODEL_MISSING: Final = "model_missing"
ISSUE_NO_TOOLS: Final = "model_no_tools"
ISSUES: Final = (ISSUE_UNREACHABLE, ISSUE_MODEL_MISSING, ISSUE_NO_TOOLS)


class ModelStatus(StrEnum):
    """What the last check found; the model status sensor shows it."""

    OK = "ok"
    UNREACHABLE = "unreachable"
    MODEL_MISSING = "model_missing"
    NO_TOOLS = "no_tools"


def issue_id(key: str, entry_id: str) -> str:
    """Return the id of one of an entry's Ollama issues."""
    return f"{key}_{entry_id}"


class OllamaMonitor:
    """Poll /api/tags and /api/show with HA's shared web session."""

    def __init__(self, hass: HomeAssistant, entry: ConfigEntry[Any]) -> None:
        """Watch the server and model of ``entry``."""
        self.hass = hass
        self.entry = entry
        self.url: str = entry.data[CONF_OLLAMA_URL]
        self.model: str = entry.data[CONF_MODEL]
        self.status = ModelStatus.OK
        self.checked_at: datetime | None = None
        self.unreachable_since: datetime | None = None
        self._listeners: list[Callable[[], None]] = []

    @callback
    def async_start(self) -> CALLBACK_TYPE:
        """Check now and then every minute; return the function that stops it."""
        self._async_tick(dt_util.utcnow())
        return async_track_time_interval(
            self.hass,
            self._async_tick,
            CHECK_INTERVAL,
            name="ha_personal_assistant ollama check",
            cancel_on_shutdown=True,
        )

    @callback
    def _async_tick(self, _now: datetime) -> None:
        # A task of the entry: cancelled when it unloads.
        self.entry.async_create_task(
            self.hass, self.async_check(), "ha_personal_assistant ollama check"
        )

    @callback
    def async_listen(self, listener: Callable[[], None]) -> CALLBACK_TYPE:
        """Call ``listener`` after every check; return the function that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def async_check(self) -> None:
        """Check the server and the model once; update the status and issues."""
        session = async_get_clientsession(self.hass)
        now = dt_util.utcnow()
        self.checked_at = now
        try:
            models = await async_list_models(session, self.url)
        except OllamaError as err:
            self._unreachable(now, err)
            return
        if self.unreachable_since is not None:
            LOGGER.info(
                "Ollama at %s is reachable again", url_without_credentials(self.url)
            )
        self.unreachable_since = None
        if not any(m.name in {self.model, f"{self.model}:latest"} for m in models):
            self._set(ModelStatus.MODEL_MISSING)
            return
        try:
            info = await async_show_model(session, self.url, self.model)
        except OllamaModelNotFound:
            self._set(ModelStatus.MODEL_MISSING)
            return
        except OllamaError:
            # The list answered: the model is there; judge tools next time.
            self._set(ModelStatus.OK)
            return
        if info.capabilities and "tools" not in info.capabilities:
            self._set(ModelStatus.NO_TOOLS)
            return
        self._set(ModelStatus.OK)

    def _unreachable(self, now: datetime, err: OllamaError) -> None:
        if self.unreachable_since is None:
            self.unreachable_since = now
            LOGGER.warning(
                "Ollama at %s is unreachable: %s",
                url_without_credentials(self.url),
                err,
            )
        # The last known model issues stay until Ollama answers again.
        self.status = ModelStatus.UNREACHABLE
        if now - self.unreachable_since >= UNREACHABLE_AFTER:
            self._create(ISSUE_UNREACHABLE)
        self._notify()

    def _set(self, status: ModelStatus) -> None:
        self.status = status
        wanted = {
            ModelStatus.MODEL_MISSING: ISSUE_MODEL_MISSING,
            ModelStatus.NO_TOOLS: ISSUE_NO_TOOLS,
        }.get(status)
        for key in ISSUES:
            if key == wanted:
                self._create(key)
            else:
                ir.async_delete_issue(
                    self.hass, DOMAIN, issue_id(key, self.entry.entry_id)
                )
        self._notify()

    def _create(self, key: str) -> None:
        ir.async_create_issue(
            self.hass,
            DOMAIN,
            issue_id(key, self.entry.entry_id),
            is_fixable=False,
            severity=ir.IssueSeverity.ERROR,
            translation_key=key,
            translation_placeholders={
                "url": url_without_credentials(self.url),
                "model": self.model,
                "title": self.entry.title,
            },
        )

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()

    @callback
    def async_remove_issues(self) -> None:
        """Drop the entry's Ollama issues (the entry is unloaded or removed)."""
        for key in ISSUES:
            ir.async_delete_issue(self.hass, DOMAIN, issue_id(key, self.entry.entry_id))
