"""Watch the model server and model; raise repair issues the user must act on."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import CALLBACK_TYPE, HomeAssistant, callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.event import async_track_time_interval
from homeassistant.util import dt as dt_util

from .const import CONF_MODEL, DOMAIN, LOGGER
from .model_server import (
    AuthFailed,
    Backend,
    Failure,
    ModelBackend,
    ModelNotFound,
    ModelServerError,
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
# The texts of an OpenAI-compatible server's issues (no "ollama pull" there);
# the issue ids are the same.
OPENAI_TEXTS: Final = {
    ISSUE_UNREACHABLE: "openai_unreachable",
    ISSUE_MODEL_MISSING: "openai_model_missing",
    ISSUE_NO_TOOLS: "openai_model_no_tools",
}


class ModelStatus(StrEnum):
    """What the last check found; the model status sensor shows it."""

    OK = "ok"
    UNREACHABLE = "unreachable"
    MODEL_MISSING = "model_missing"
    NO_TOOLS = "no_tools"
    AUTH_FAILED = "auth_failed"


def issue_id(key: str, entry_id: str) -> str:
    """Return the id of one of an entry's model-server issues."""
    return f"{key}_{entry_id}"


class ServerMonitor:
    """Poll the model list (and Ollama's /api/show) through the entry's backend.

    Servers speaking OpenAI's API are asked for /models only: their tool
    support was checked by the config flow, and asking the model anything
    would evict the chat's cached prompt on a one-slot server.
    """

    def __init__(
        self, hass: HomeAssistant, entry: ConfigEntry[Any], backend: ModelBackend
    ) -> None:
        """Watch the server and model of ``entry``."""
        self.hass = hass
        self.entry = entry
        self.backend = backend
        self.model: str = entry.data[CONF_MODEL]
        self.status = ModelStatus.OK
        self.checked_at: datetime | None = None
        self.unreachable_since: datetime | None = None
        # A chat request was refused for its tools (an OpenAI-compatible
        # server restarted without tool calls); until a check finds tools
        # work again.
        self.tools_refused = False
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

    async def async_check(self) -> None:  # noqa: PLR0911 - one return per status
        """Check the server and the model once; update the status and issues."""
        now = dt_util.utcnow()
        self.checked_at = now
        try:
            models = await self.backend.async_list_models()
        except AuthFailed:
            self._refused_key()
            return
        except ModelServerError as err:
            self._unreachable(now, err)
            return
        if self.unreachable_since is not None:
            LOGGER.info("The model server at %s is reachable again", self.backend.where)
        self.unreachable_since = None
        if not any(m.name in {self.model, f"{self.model}:latest"} for m in models):
            self._set(ModelStatus.MODEL_MISSING)
            return
        if self.backend.backend is not Backend.OLLAMA:
            if self.tools_refused:
                # Asking evicts the chat's cached prompt, but no chat works
                # meanwhile: only then is the model asked again.
                with contextlib.suppress(ModelServerError):
                    self.tools_refused = not await self.backend.async_supports_tools(
                        self.model
                    )
            self._set(ModelStatus.NO_TOOLS if self.tools_refused else ModelStatus.OK)
            return
        try:
            capabilities = await self.backend.async_capabilities(self.model)
        except ModelNotFound:
            self._set(ModelStatus.MODEL_MISSING)
            return
        except ModelServerError:
            # The list answered: the model is there; judge tools next time.
            self._set(ModelStatus.OK)
            return
        if capabilities and "tools" not in capabilities:
            self._set(ModelStatus.NO_TOOLS)
            return
        self._set(ModelStatus.OK)

    @callback
    def async_failed(self, failure: Failure) -> None:
        """Hear what a failed chat call meant: a refused key or refused tools."""
        if failure is Failure.AUTH:
            self._refused_key()
        elif failure is Failure.NO_TOOLS and self.backend.backend is not Backend.OLLAMA:
            self.tools_refused = True
            self._set(ModelStatus.NO_TOOLS)

    def _refused_key(self) -> None:
        """Ask for a new key: HA shows the reauthentication flow.

        The entry reloads with the new key, so this happens at most once per
        loaded entry.
        """
        if self.status is not ModelStatus.AUTH_FAILED:
            LOGGER.warning("%s refused the API key", self.backend.where)
            self.entry.async_start_reauth(self.hass)
        self._set(ModelStatus.AUTH_FAILED)

    def _unreachable(self, now: datetime, err: ModelServerError) -> None:
        if self.unreachable_since is None:
            self.unreachable_since = now
            LOGGER.warning(
                "The model server at %s is unreachable: %s", self.backend.where, err
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
        translation_key = key
        if self.backend.backend is Backend.OPENAI_COMPATIBLE:
            translation_key = OPENAI_TEXTS.get(key, key)
        ir.async_create_issue(
            self.hass,
            DOMAIN,
            issue_id(key, self.entry.entry_id),
            is_fixable=False,
            severity=ir.IssueSeverity.ERROR,
            translation_key=translation_key,
            translation_placeholders={
                "url": self.backend.where,
                "model": self.model,
                "title": self.entry.title,
            },
        )

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()

    @callback
    def async_remove_issues(self) -> None:
        """Drop the entry's model-server issues (the entry is unloaded or removed)."""
        for key in ISSUES:
            ir.async_delete_issue(self.hass, DOMAIN, issue_id(key, self.entry.entry_id))
