"""ai_task.generate_data on the assistant's model server: JSON, images, files."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.exceptions import HomeAssistantError

from custom_components.ha_personal_assistant.const import (
    CONF_NUM_PREDICT,
    CONF_VISION_MODEL,
)

from .common import async_setup_assistant

if TYPE_CHECKING:
    from pathlib import Path

    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama

ENTITY = "ai_task.personal_assistant"
VISION = "llava-tools:7b"
JPEG = b"\xff\xd8\xff\xe0fake jpeg of two people at the door\xff\xd9"
STRUCTURE = {
    "people": {"selector": {"number": {}}, "required": True},
    "summary": {"selector": {"text": {}}, "required": True},
}
CAP = 300


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


@pytest.fixture
async def media(hass: HomeAssistant, core: None, tmp_path: Path) -> Path:
    """A local media folder with a photo, a note and an archive."""
    folder = tmp_path / "media"

    def write() -> None:
        folder.mkdir()
        (folder / "door.jpg").write_bytes(JPEG)
        (folder / "note.txt").write_text("The parcel goes to the neighbour.", "utf-8")
        (folder / "backup.zip").write_bytes(b"PK\x03\x04 not for a model")

    await hass.async_add_executor_job(write)
    hass.config.media_dirs = {"local": str(folder)}
    return folder


async def _setup(
    hass: HomeAssistant, fake_ollama: FakeOllama, *, vision: bool = True
) -> MockConfigEntry:
    options: dict[str, Any] = {CONF_NUM_PREDICT: CAP}
    if vision:
        fake_ollama.add_model(VISION, ["completion", "vision"])
        options[CONF_VISION_MODEL] = VISION
    return await async_setup_assistant(hass, fake_ollama, **options)


def _attachment(name: str, mime: str) -> dict[str, str]:
    return {
        "media_content_id": f"media-source://media_source/local/{name}",
        "media_content_type": mime,
    }


async def _generate(hass: HomeAssistant, **data: Any) -> dict[str, Any]:
    response = await hass.services.async_call(
        "ai_task",
        "generate_data",
        {"task_name": "door", "entity_id": ENTITY, **data},
        blocking=True,
        return_response=True,
    )
    assert isinstance(response, dict)
    return response


def _cap(request: dict[str, Any]) -> int:
    return int(
        (request.get("options") or {}).get("num_predict") or request["max_tokens"]
    )


async def test_generate_data_with_a_structure_and_an_image_returns_checked_json(
    hass: HomeAssistant, fake_ollama: FakeOllama, media: Path
) -> None:
    """The photo reaches the vision model; the JSON it writes comes back."""
    await _setup(hass, fake_ollama)
    fake_ollama.reply(json.dumps({"people": 2, "summary": "Two people at the door"}))
    response = await _generate(
        hass,
        instructions="Who is at the door?",
        structure=STRUCTURE,
        attachments=[_attachment("door.jpg", "image/jpeg")],
    )
    assert response["data"] == {"people": 2, "summary": "Two people at the door"}
    (request,) = fake_ollama.chat_requests
    assert request["model"] == VISION
    assert fake_ollama.images_received(request) == [base64.b64encode(JPEG).decode()]
    schema = fake_ollama.response_schema(request)
    assert schema is not None
    assert set(schema["properties"]) == {"people", "summary"}
    # No tools, and the answer is capped like every model call.
    assert not request.get("tools")
    assert _cap(request) == CAP


async def test_a_text_file_is_read_and_reaches_the_chat_model_as_data(
    hass: HomeAssistant, fake_ollama: FakeOllama, media: Path
) -> None:
    """A text file's words go to the chat model, fenced; plain text comes back."""
    await _setup(hass, fake_ollama, vision=False)
    fake_ollama.reply("Neighbour")
    response = await _generate(
        hass,
        instructions="Where does the parcel go? One word.",
        attachments=[_attachment("note.txt", "text/plain")],
    )
    assert response["data"] == "Neighbour"
    (request,) = fake_ollama.chat_requests
    user = json.dumps(request["messages"][-1])
    assert "Untrusted data from the attached file note.txt" in user
    assert "parcel" in user
    assert fake_ollama.images_received(request) == []


async def test_an_answer_that_does_not_fit_is_asked_again_once_then_refused(
    hass: HomeAssistant, fake_ollama: FakeOllama, media: Path
) -> None:
    """One retry, told what was wrong; a second miss is a clear error."""
    await _setup(hass, fake_ollama, vision=False)
    fake_ollama.reply("Two people, I think.")
    fake_ollama.reply(json.dumps({"people": 2, "summary": "Two people"}))
    response = await _generate(hass, instructions="Count", structure=STRUCTURE)
    assert response["data"] == {"people": 2, "summary": "Two people"}
    assert len(fake_ollama.chat_requests) == 2
    assert "did not match the schema" in json.dumps(fake_ollama.chat_requests[1])

    fake_ollama.reply(json.dumps({"people": "many"}))
    fake_ollama.reply(json.dumps({"summary": "nobody"}))
    with pytest.raises(HomeAssistantError) as err:
        await _generate(hass, instructions="Count", structure=STRUCTURE)
    assert str(err.value).startswith(
        "The model's answer did not fit the requested structure, also after a "
        "second try"
    )
    assert len(fake_ollama.chat_requests) == 4


async def test_an_image_without_a_vision_model_or_an_archive_is_refused_clearly(
    hass: HomeAssistant, fake_ollama: FakeOllama, media: Path
) -> None:
    """Said in words, and nothing is sent to the model server."""
    await _setup(hass, fake_ollama, vision=False)
    with pytest.raises(HomeAssistantError) as err:
        await _generate(
            hass,
            instructions="Who is there?",
            attachments=[_attachment("door.jpg", "image/jpeg")],
        )
    assert str(err.value).startswith(
        "An image was attached, but no vision model is set"
    )
    with pytest.raises(HomeAssistantError) as err:
        await _generate(
            hass,
            instructions="What is in it?",
            attachments=[_attachment("backup.zip", "application/zip")],
        )
    assert str(err.value).startswith("backup.zip cannot be used in an AI task")
    assert fake_ollama.chat_requests == []
