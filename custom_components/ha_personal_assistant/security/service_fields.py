"""Which data keys of a service call Home Assistant's service description knows.

A Confirm message shows a call's data, but the model wrote the keys as well as
the values: a key such as ``"code"`` followed by blank lines and a "display
note" would put the model's prose in front of the person who decides. So a
key is shown only when
the service's own description (its ``services.yaml``, through
``async_get_all_descriptions``) lists it as a field; every other key is
counted ("2 other fields") and none of its text is shown. A service without a
description shows no keys at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from homeassistant.helpers.service import async_get_all_descriptions

from ..const import LOGGER

if TYPE_CHECKING:
    from collections.abc import Iterable

    from homeassistant.core import HomeAssistant

    from ..policy.verdict import ResolvedCall

type KnownFields = Mapping[tuple[str, str], frozenset[str]]


def field_names(description: object) -> frozenset[str]:
    """Return the field names of one service description (sections flattened)."""
    if not isinstance(description, Mapping):
        return frozenset()
    names: set[str] = set()
    pending: list[Any] = [description.get("fields")]
    while pending:
        fields = pending.pop()
        if not isinstance(fields, Mapping):
            continue
        for name, spec in fields.items():
            if isinstance(spec, Mapping) and "fields" in spec:
                # A section ("advanced_fields"): its fields are the call's.
                pending.append(spec["fields"])
            elif isinstance(name, str):
                names.add(name)
    return frozenset(names)


async def async_warm(hass: HomeAssistant) -> None:
    """Read the service descriptions once, out of the first Confirm's way."""
    try:
        await async_get_all_descriptions(hass)
    except Exception as err:  # noqa: BLE001 - the first Confirm reads them then
        LOGGER.debug("No service descriptions yet: %s", err)


async def async_known_fields(
    hass: HomeAssistant, calls: Iterable[ResolvedCall]
) -> KnownFields:
    """Return the fields Home Assistant documents for each call's service."""
    try:
        descriptions = await async_get_all_descriptions(hass)
    except Exception as err:  # noqa: BLE001 - then no key is shown
        LOGGER.debug("No service descriptions: %s", err)
        descriptions = {}
    known: dict[tuple[str, str], frozenset[str]] = {}
    for call in calls:
        services = descriptions.get(call.domain)
        description = (
            services.get(call.service) if isinstance(services, Mapping) else None
        )
        known[call.domain, call.service] = field_names(description)
    return known
