"""HA's intents, dry-run: the exact service calls a recognized command makes.

HA's intent handlers resolve their targets and call services in one go. The
fast path needs the calls first, to judge them: the handler runs against a
Home Assistant whose service registry only writes the calls down. Matching,
the handler's own mapping (HassTurnOn on a lock is ``lock.lock``, on a cover
``cover.open_cover``) and its service data are HA's; nothing is executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from homeassistant.const import ATTR_ENTITY_ID
from homeassistant.helpers import intent

from ..const import LOGGER

if TYPE_CHECKING:
    from homeassistant.core import Context, HomeAssistant, ServiceRegistry

# Intents that only read exposed entities (or the clock): HA runs them itself.
READ_ONLY_INTENTS: Final = frozenset(
    {
        "HassGetState",
        "HassGetCurrentDate",
        "HassGetCurrentTime",
        "HassGetWeather",
        "HassClimateGetTemperature",
        # A fixed answer to a fixed question ("what can I say?").
        "HassRespond",
    }
)
# Intents whose handlers act only through service calls (read in HA 2026.10),
# so the dry run sees everything they would do. Others (lists, timers,
# broadcasts, media search, pause/resume with HA's memory of what was
# paused) go to the model.
ACTING_INTENTS: Final = frozenset(
    {
        "HassTurnOn",
        "HassTurnOff",
        "HassToggle",
        "HassSetPosition",
        "HassStopMoving",
        "HassLightSet",
        "HassFanSetSpeed",
        "HassClimateSetTemperature",
        "HassHumidifierSetpoint",
        "HassHumidifierMode",
        "HassVacuumStart",
        "HassVacuumReturnToBase",
        "HassLawnMowerStartMowing",
        "HassLawnMowerDock",
        "HassMediaNext",
        "HassMediaPrevious",
        "HassSetVolume",
        "HassMediaPlayerMute",
        "HassMediaPlayerUnmute",
    }
)


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One service call a handler would make: the targets sit in ``data``."""

    domain: str
    service: str
    data: dict[str, Any]


class _RecordingServices:
    """A service registry that writes calls down instead of making them."""

    def __init__(self, services: ServiceRegistry) -> None:
        self._services = services
        self.calls: list[PlannedCall] = []

    def has_service(self, domain: str, service: str) -> bool:
        return self._services.has_service(domain, service)

    async def async_call(  # noqa: PLR0913, PLR0917 - HA's signature
        self,
        domain: str,
        service: str,
        service_data: dict[str, Any] | None = None,
        blocking: bool = False,  # noqa: ARG002, FBT001, FBT002 - HA's signature
        context: Context | None = None,  # noqa: ARG002 - HA's signature
        target: dict[str, Any] | None = None,
        return_response: bool = False,  # noqa: ARG002, FBT001, FBT002 - HA's signature
    ) -> None:
        data = dict(service_data or {})
        for key, value in (target or {}).items():
            data.setdefault(key, value)
        self.calls.append(PlannedCall(domain, service, data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._services, name)


class _DryRunHass:
    """Home Assistant as the handler sees it: everything real but the services."""

    def __init__(self, hass: HomeAssistant, services: _RecordingServices) -> None:
        self._hass = hass
        self.services = services

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hass, name)


async def async_plan(
    hass: HomeAssistant, intent_obj: intent.Intent
) -> tuple[list[PlannedCall], intent.IntentResponse] | None:
    """Run the intent's handler without effect; return its calls and response.

    None when the intent is not one whose calls can be known this way, or
    HA could not match its targets (the model then answers).
    """
    if intent_obj.intent_type not in ACTING_INTENTS:
        return None
    handler = hass.data.get(intent.DATA_KEY, {}).get(intent_obj.intent_type)
    if handler is None:
        return None
    services = _RecordingServices(hass.services)
    intent_obj.hass = _DryRunHass(hass, services)  # type: ignore[assignment]
    try:
        response = await handler.async_handle(intent_obj)
    except intent.IntentError as err:
        LOGGER.debug("Fast path: %s not planned: %r", intent_obj.intent_type, err)
        return None
    finally:
        intent_obj.hass = hass
    calls = [call for call in services.calls if call.data.get(ATTR_ENTITY_ID)]
    if not calls or len(calls) != len(services.calls):
        LOGGER.debug("Fast path: %s made calls without targets", intent_obj.intent_type)
        # A call without an entity target cannot be judged on its targets.
        return None
    return calls, response
