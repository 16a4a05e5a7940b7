"""HA shows the integration's own icon and logo (brand/, HA 2026.3+)."""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING

from homeassistant.setup import async_setup_component

from custom_components.ha_personal_assistant.const import DOMAIN

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

BRAND = Path(__file__).parent.parent / "custom_components" / DOMAIN / "brand"


async def test_the_frontend_gets_our_icon_and_logo(
    hass: HomeAssistant, hass_client: ClientSessionGenerator
) -> None:
    """HA's brands API serves the PNGs shipped in brand/, light and dark."""
    assert await async_setup_component(hass, "brands", {})
    client = await hass_client()
    for image, file in (
        ("icon.png", "icon.png"),
        ("icon@2x.png", "icon@2x.png"),
        ("logo.png", "logo.png"),
        ("dark_logo.png", "dark_logo.png"),
        # No dark icon of its own: HA falls back to the light one.
        ("dark_icon.png", "icon.png"),
    ):
        response = await client.get(
            f"/api/brands/integration/{DOMAIN}/{image}?placeholder=no"
        )
        assert response.status == HTTPStatus.OK, image
        body = await response.read()
        assert body.startswith(b"\x89PNG"), image
        assert body == (BRAND / file).read_bytes(), image
