"""scripts/develop answers the real config flow by the fields each step shows.

scripts/develop_check runs the whole demo in CI; these tests catch a config
flow change that the script cannot answer in seconds, through HA's own HTTP
flow API as the script uses it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest.mock import patch

import pytest
from homeassistant.setup import async_setup_component

from custom_components.ha_personal_assistant.const import DOMAIN

from .common import MODEL

if TYPE_CHECKING:
    from collections.abc import Generator
    from types import ModuleType

    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

    from .fake_ollama import FakeOllama

SCRIPT = Path(__file__).parent.parent / "scripts" / "develop_house.py"


@pytest.fixture(scope="module")
def develop_house() -> ModuleType:
    """Load scripts/develop_house.py as a module (it is no package)."""
    spec = importlib.util.spec_from_file_location("develop_house", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["develop_house"] = module
    spec.loader.exec_module(module)
    return module


def _develop(develop_house: ModuleType, tmp_path: Path, url: str) -> Any:
    develop = develop_house.Develop(tmp_path, 8123, [])
    develop.models.url = url
    develop.models.model = MODEL
    return develop


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_the_develop_script_completes_the_real_config_flow(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    fake_ollama: FakeOllama,
    develop_house: ModuleType,
    tmp_path: Path,
) -> None:
    """Each step is answered by its form's fields, up to the created entry."""
    assert await async_setup_component(hass, "config", {})
    # With its dependencies (their HTTP views) before the client freezes them.
    assert await async_setup_component(hass, DOMAIN, {})
    client = await hass_client()
    develop = _develop(develop_house, tmp_path, fake_ollama.url)

    answers = []
    answer = await client.post(
        "/api/config/config_entries/flow", json={"handler": DOMAIN}
    )
    flow = await answer.json()
    while flow["type"] == "form":
        assert not flow.get("errors"), flow
        reply = develop.answer_step(flow)
        answers.append((flow["step_id"], reply))
        answer = await client.post(
            f"/api/config/config_entries/flow/{flow['flow_id']}", json=reply
        )
        flow = await answer.json()

    assert answers == [
        ("user", {"backend": "ollama"}),
        ("ollama", {"ollama_url": fake_ollama.url}),
        ("model", {"model": MODEL}),
    ]
    assert flow["type"] == "create_entry"
    (entry,) = hass.config_entries.async_entries(DOMAIN)
    assert entry.data == {"ollama_url": fake_ollama.url, "model": MODEL}


def test_a_required_field_the_script_does_not_know_stops_it(
    develop_house: ModuleType, tmp_path: Path
) -> None:
    """A new step's required field is named in the error, not silently skipped."""
    develop = _develop(develop_house, tmp_path, "http://127.0.0.1:11435")
    flow = {
        "step_id": "pin",
        "data_schema": [
            {"name": "ollama_url", "required": True},
            {"name": "note", "required": False},
            {"name": "pin", "required": True},
        ],
    }
    with pytest.raises(RuntimeError, match=r"step 'pin' asks for 'pin'"):
        develop.answer_step(flow)


def test_a_choice_the_form_does_not_offer_stops_the_script(
    develop_house: ModuleType, tmp_path: Path
) -> None:
    """An answer outside a select's options is refused before it is sent."""
    develop = _develop(develop_house, tmp_path, "http://127.0.0.1:11435")
    flow = {
        "step_id": "user",
        "data_schema": [
            {
                "name": "backend",
                "required": True,
                "default": "openai_compatible",
                "selector": {"select": {"options": ["openai_compatible"]}},
            }
        ],
    }
    with pytest.raises(RuntimeError, match=r"'ollama' is not among the choices"):
        develop.answer_step(flow)


@pytest.fixture
def mock_unload_entry() -> Generator[None]:
    """Let the options flow's reload unload an entry mock_setup_entry never started."""
    with patch(
        "custom_components.ha_personal_assistant.async_unload_entry",
        return_value=True,
    ):
        yield


async def _created_entry(develop: Any, client: Any) -> str:
    """Run the config flow as the script does; return the entry id."""
    answer = await client.post(
        "/api/config/config_entries/flow", json={"handler": DOMAIN}
    )
    flow = await answer.json()
    while flow["type"] == "form":
        answer = await client.post(
            f"/api/config/config_entries/flow/{flow['flow_id']}",
            json=develop.answer_step(flow),
        )
        flow = await answer.json()
    return str(flow["result"]["entry_id"])


@pytest.mark.usefixtures("core", "mock_setup_entry", "mock_unload_entry")
async def test_the_embedded_model_gets_the_shortest_replies_through_the_options_flow(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    fake_ollama: FakeOllama,
    develop_house: ModuleType,
    tmp_path: Path,
) -> None:
    """num_predict is set by HA's real options form; the other options stay."""
    assert await async_setup_component(hass, "config", {})
    assert await async_setup_component(hass, DOMAIN, {})
    client = await hass_client()
    develop = _develop(develop_house, tmp_path, fake_ollama.url)
    entry_id = await _created_entry(develop, client)
    entry = hass.config_entries.async_get_entry(entry_id)
    assert entry is not None
    before = dict(entry.options)

    await develop.reply_length(develop_house.HassApi(client, ""), entry_id)

    assert entry.options["num_predict"] == develop_house.DEVELOP_NUM_PREDICT
    assert entry.options["fast_path"] is True
    assert {k: entry.options[k] for k in before if k != "num_predict"} == {
        k: v for k, v in before.items() if k != "num_predict"
    }


@pytest.mark.usefixtures("core", "mock_setup_entry", "mock_unload_entry")
async def test_a_real_ollama_gets_the_default_reply_length_back(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    fake_ollama: FakeOllama,
    develop_house: ModuleType,
    tmp_path: Path,
) -> None:
    """With OLLAMA_URL the script's short length is undone, once."""
    assert await async_setup_component(hass, "config", {})
    assert await async_setup_component(hass, DOMAIN, {})
    client = await hass_client()
    develop = _develop(develop_house, tmp_path, fake_ollama.url)
    entry_id = await _created_entry(develop, client)
    api = develop_house.HassApi(client, "")
    await develop.reply_length(api, entry_id)

    develop.ollama_url = fake_ollama.url
    await develop.reply_length(api, entry_id)

    entry = hass.config_entries.async_get_entry(entry_id)
    assert entry is not None
    assert entry.options["num_predict"] == develop_house.DEFAULT_NUM_PREDICT
