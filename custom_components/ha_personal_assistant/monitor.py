"""The one health tracker of the model server: checks, chat outcomes, repair issues."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, override

from homeassistant.core import CALLBACK_TYPE, HomeAssistant, callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.update_coordinator import (
    DataUpdateCoordinator,
    UpdateFailed,
)
from homeassistant.util import dt as dt_util

from .const import CONF_MODEL, DOMAIN, LOGGER
from .model_server import (
    AuthFailed,
    Backend,
    ModelBackend,
    ModelNotFound,
    ModelServerError,
    ServerModel,
    ToolsRefused,
)
from .naming import assistant_name

if TYPE_CHECKING:
    from homeassistant.config_entries import ConfigEntry

CHECK_INTERVAL: Final = timedelta(minutes=1)
# A restart of Ollama or a reboot of its box takes minutes; only an outage
# longer than this asks the user to act.
UNREACHABLE_AFTER: Final = timedelta(minutes=10)
ISSUE_UNREACHABLE: Final = "server_unreachable"
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


@callback
def _keep_polling() -> None:
    """Listen to nothing: the monitor's own listener keeps the checks going."""


def issue_id(key: str, entry_id: str) -> str:
    """Return the id of one of an entry's model-server issues."""
    return f"{key}_{entry_id}"


class ServerMonitor(DataUpdateCoordinator[ModelStatus]):
    """Poll the model list (and Ollama's /api/show) through the entry's backend.

    HA's DataUpdateCoordinator runs the checks every minute; an unreachable
    server fails the update (UpdateFailed), and the model status sensor is
    its CoordinatorEntity. Servers speaking OpenAI's API are asked for
    /models only: their tool support was checked by the config flow, and
    asking the model anything would evict the chat's cached prompt on a
    one-slot server.

    The assistant tells it how each chat call went (:meth:`succeeded`,
    :meth:`failed`): it logs once when calls start failing and once when
    they work again, and a refused key or refused tools act at once.
    """

    config_entry: ConfigEntry[Any]

    def __init__(
        self, hass: HomeAssistant, entry: ConfigEntry[Any], backend: ModelBackend
    ) -> None:
        """Watch the server and model of ``entry``."""
        super().__init__(
            hass,
            LOGGER,
            config_entry=entry,
            name="ha_personal_assistant model server",
            update_interval=CHECK_INTERVAL,
        )
        self.entry = entry
        self.backend = backend
        self.model: str = entry.data[CONF_MODEL]
        # The coordinator keeps the last good data when an update fails;
        # this is what the last check (or failed chat call) found.
        self.status = ModelStatus.OK
        self.checked_at: datetime | None = None
        self.unreachable_since: datetime | None = None
        # A chat request was refused for its tools (an OpenAI-compatible
        # server restarted without tool calls); until a check finds tools
        # work again.
        self.tools_refused = False
        # What the chat calls found: the last one worked (setup probed the
        # server), else why the last one failed.
        self.available = True
        self.last_error: str | None = None

    @callback
    def async_start(self) -> CALLBACK_TYPE:
        """Check now and then every minute; return the function that stops it.

        The repairs need the checks whether or not the sensor is enabled:
        a listener of our own keeps the coordinator polling.
        """
        self.entry.async_create_task(
            self.hass, self.async_refresh(), "ha_personal_assistant model check"
        )
        return self.async_add_listener(_keep_polling)

    async def async_check(self) -> None:
        """Check the server and the model once, now."""
        await self.async_refresh()

    @override
    async def _async_update_data(self) -> ModelStatus:
        """Check the server and model; raise UpdateFailed when unreachable."""
        now = dt_util.utcnow()
        self.checked_at = now
        try:
            models = await self.backend.async_list_models()
        except AuthFailed:
            self._refused_key()
            return self.status
        except ModelServerError as err:
            self._unreachable(now)
            raise UpdateFailed(str(err)) from err
        self.unreachable_since = None
        self._set(await self._async_model_status(models))
        return self.status

    async def _async_model_status(self, models: list[ServerModel]) -> ModelStatus:
        """Return what the listed models and the model's capabilities say."""
        if not any(m.name in {self.model, f"{self.model}:latest"} for m in models):
            return ModelStatus.MODEL_MISSING
        if self.backend.backend is not Backend.OLLAMA:
            if self.tools_refused:
                # Asking evicts the chat's cached prompt, but no chat works
                # meanwhile: only then is the model asked again.
                with contextlib.suppress(ModelServerError):
                    self.tools_refused = not await self.backend.async_supports_tools(
                        self.model
                    )
            return ModelStatus.NO_TOOLS if self.tools_refused else ModelStatus.OK
        try:
            capabilities = await self.backend.async_capabilities(self.model)
        except ModelNotFound:
            return ModelStatus.MODEL_MISSING
        except ModelServerError:
            # The list answered: the model is there; judge tools next time.
            return ModelStatus.OK
        if capabilities and "tools" not in capabilities:
            return ModelStatus.NO_TOOLS
        return ModelStatus.OK

    @callback
    def succeeded(self) -> None:
        """Hear that a chat call worked; log it if calls were failing."""
        if not self.available:
            self.available = True
            LOGGER.info("The model server at %s is available again", self.backend.where)

    @callback
    def failed(self, reason: str, error: ModelServerError | None = None) -> None:
        """Hear that a chat call failed, and why; act on a refused key or tools."""
        self.last_error = reason
        if self.available:
            self.available = False
            LOGGER.warning(
                "The model server at %s is unavailable: %s", self.backend.where, reason
            )
        if isinstance(error, AuthFailed):
            self._refused_key()
        elif (
            isinstance(error, ToolsRefused)
            and self.backend.backend is not Backend.OLLAMA
        ):
            self.tools_refused = True
            self._set(ModelStatus.NO_TOOLS)
        else:
            return
        # Between two checks: the sensor shows it at once.
        self.async_update_listeners()

    def _refused_key(self) -> None:
        """Ask for a new key: HA shows the reauthentication flow.

        The entry reloads with the new key, so this happens at most once per
        loaded entry.
        """
        if self.status is not ModelStatus.AUTH_FAILED:
            LOGGER.warning("%s refused the API key", self.backend.where)
            self.entry.async_start_reauth(self.hass)
        self._set(ModelStatus.AUTH_FAILED)

    def _unreachable(self, now: datetime) -> None:
        """Mark the server unreachable; ask the user to act after 10 minutes.

        The coordinator logs the failure once, and its recovery.
        """
        if self.unreachable_since is None:
            self.unreachable_since = now
        # The last known model issues stay until the server answers again.
        self.status = ModelStatus.UNREACHABLE
        if now - self.unreachable_since >= UNREACHABLE_AFTER:
            self._create(ISSUE_UNREACHABLE)

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
                "name": assistant_name(self.hass, self.entry.entry_id),
            },
        )

    @callback
    def async_remove_issues(self) -> None:
        """Drop the entry's model-server issues (the entry is unloaded or removed)."""
        for key in ISSUES:
            ir.async_delete_issue(self.hass, DOMAIN, issue_id(key, self.entry.entry_id))
