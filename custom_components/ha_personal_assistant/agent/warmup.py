"""Keep the fixed prompt prefix in the model server's cache (option warm_cache).

The system prompt (with the catalogue of entities) and the tool schemas are
the first bytes of every request. A server that lost them (it started, a
summary on its one slot replaced them, the catalogue changed) makes the next
user evaluate all of them before the first word: minutes on a Raspberry Pi.
So after those events the prefix is sent once with an output cap of one
token, through the same bound model settings as the chat (the same num_ctx:
another value makes Ollama reload the model), when the chats are quiet: the
model_queue runs it like any background call, never during a turn. Requests
within :data:`DEBOUNCE_SECONDS` of each other become one warm-up. Until it is
due it is a timer, not a task: nothing waits in the background meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.homeassistant.exposed_entities import (
    async_listen_entity_updates,
)
from homeassistant.core import CALLBACK_TYPE, Event, HassJob, HomeAssistant, callback
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.event import async_call_later
from langchain_core.messages import HumanMessage, SystemMessage

from ..const import LOGGER
from ..monitor import ModelStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from datetime import datetime

    from homeassistant.config_entries import ConfigEntry
    from langchain_core.messages import AIMessage, AnyMessage
    from langchain_core.runnables import Runnable

    from ..assistant import Assistant
    from ..monitor import ServerMonitor

    type Spawn = Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]]

# Warm-ups asked for within this many seconds of each other are one.
DEBOUNCE_SECONDS: Final = 5.0
# The name the model queue knows the warm-up by (it is not itself a reason to warm).
WARMUP_NAME: Final = "prefix warm-up"
# The user turn after the prefix: any short text; only the prefix is kept.
WARMUP_MESSAGE: Final = "."


def warmup_messages(system_prompt: str) -> list[AnyMessage]:
    """Return the warm-up request: the turns' own system prompt, and a dot."""
    return [SystemMessage(content=system_prompt), HumanMessage(content=WARMUP_MESSAGE)]


class PrefixWarmer:
    """Sends the fixed prefix with num_predict 1 after the events that lose it."""

    def __init__(
        self,
        hass: HomeAssistant,
        assistant: Assistant,
        model: Runnable[list[AnyMessage], AIMessage],
        *,
        spawn: Spawn,
        debounce: float = DEBOUNCE_SECONDS,
    ) -> None:
        """``model``: the chat model's settings and tools, an output cap of 1.

        ``spawn`` starts the waiting task (the entry's unload ends it).
        """
        self.hass = hass
        self.assistant = assistant
        self.model = model
        self.spawn = spawn
        self.debounce = debounce
        self._task: asyncio.Task[None] | None = None
        self._pending = False
        self._cancel_timer: CALLBACK_TYPE | None = None
        # For tests and diagnostics: warm-ups sent.
        self.sent = 0

    @callback
    def request(self, reason: str) -> None:
        """Warm the prefix soon (debounced), when the chats are quiet."""
        LOGGER.debug("Prefix warm-up requested: %s", reason)
        self._pending = True
        self._schedule(self.debounce)

    @callback
    def _schedule(self, delay: float) -> None:
        """(Re)start the one timer; a timer, not a waiting task, until it is due."""
        if self._cancel_timer is not None:
            self._cancel_timer()
        self._cancel_timer = async_call_later(
            self.hass,
            delay,
            HassJob(self._async_due, WARMUP_NAME, cancel_on_shutdown=True),
        )

    @callback
    def _async_due(self, _now: datetime) -> None:
        self._cancel_timer = None
        if self._task is not None and not self._task.done():
            # The running warm-up schedules the next when it ends.
            return
        model_queue = self.assistant.model_queue
        if model_queue.busy or (left := model_queue.quiet_left()) > 0:
            # A turn is in flight or just ended: not before the quiet period.
            self._schedule(max(self.debounce, left if not model_queue.busy else 1.0))
            return
        self._pending = False
        self._task = self.spawn(self._async_run(), WARMUP_NAME)

    async def _async_run(self) -> None:
        await self.assistant.model_queue.async_run(self._async_warm, WARMUP_NAME)
        if self._pending:
            self._schedule(self.debounce)

    @callback
    def async_stop(self) -> None:
        """Forget what is pending (the entry unloads; its tasks end with it)."""
        self._pending = False
        if self._cancel_timer is not None:
            self._cancel_timer()
            self._cancel_timer = None

    async def _async_warm(self) -> None:
        """Send the prefix once; a failure is only logged (the turn will tell)."""
        await self.assistant.async_refresh_catalogue()
        messages = warmup_messages(self.assistant.system_prompt)
        try:
            async with asyncio.timeout(self.assistant.request_timeout):
                await self.model.ainvoke(messages)
        except Exception as err:  # noqa: BLE001 - a warm-up is never worth an error
            LOGGER.debug("The prefix warm-up failed: %s", err)
            return
        self.sent += 1

    @callback
    def async_after_background(self, name: str) -> None:
        """Warm again after a background call (not after a warm-up)."""
        if name != WARMUP_NAME:
            self.request(f"after {name}")


@callback
def async_setup_warmer(
    hass: HomeAssistant,
    entry: ConfigEntry[Any],
    assistant: Assistant,
    model: Runnable[list[AnyMessage], AIMessage],
    spawn: Spawn,
) -> PrefixWarmer:
    """Warm now, and after catalogue changes and background calls; until unload."""
    warmer = PrefixWarmer(hass, assistant, model, spawn=spawn)
    entry.async_on_unload(warmer.async_stop)
    after_call = assistant.model_queue.after_call
    after_call.append(warmer.async_after_background)
    entry.async_on_unload(lambda: after_call.remove(warmer.async_after_background))

    @callback
    def _catalogue_changed(_event: Event[Any] | None = None) -> None:
        # Exposure, names and areas make the catalogue in the system prompt.
        warmer.request("the catalogue may have changed")

    entry.async_on_unload(
        async_listen_entity_updates(hass, "conversation", _catalogue_changed)
    )
    for event in (er.EVENT_ENTITY_REGISTRY_UPDATED, ar.EVENT_AREA_REGISTRY_UPDATED):
        entry.async_on_unload(hass.bus.async_listen(event, _catalogue_changed))
    warmer.request("setup")
    return warmer


@callback
def async_track_recovery(
    warmer: PrefixWarmer | None, monitor: ServerMonitor
) -> CALLBACK_TYPE:
    """Warm when the server monitor sees the model server come back."""
    if warmer is None:
        return lambda: None

    def is_up() -> bool:
        return monitor.last_update_success and monitor.status is ModelStatus.OK

    state = {"up": is_up()}

    @callback
    def _changed() -> None:
        up = is_up()
        if up and not state["up"]:
            warmer.request("the model server is back")
        state["up"] = up

    return monitor.async_add_listener(_changed)
