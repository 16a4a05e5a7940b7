"""Voice notes, photos and files sent to the bot on Telegram.

Every test posts real Update JSON to telegram_bot's webhook; getFile and the
file download are answered by the fake Bot API, speech by test STT and TTS
engines set up through HA's own stt and tts components, and the model by
the fake Ollama server.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from custom_components.ha_personal_assistant.const import (
    CONF_STT_ENGINE,
    CONF_VISION_MODEL,
    CONF_VOICE_REPLIES,
)

from .common import async_setup_assistant, async_setup_house, fixed_text
from .speech_mocks import SPOKEN, STT_ENTITY, async_setup_speech, speech_flow
from .telegram_harness import ALICE_ID, media_update

__all__ = ["speech_flow"]

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .speech_mocks import MockSTT, MockTTS
    from .telegram_harness import TelegramHarness

OGG = b"OggS\x00\x02fake opus voice note"
VISION = "llava-tools:7b"
BED_LIGHT_ON = {
    "domain": "light",
    "service": "turn_on",
    "entity_id": "light.bed_light",
}
UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}


@pytest.fixture
async def speech(
    hass: HomeAssistant, telegram: TelegramHarness, speech_flow: None
) -> tuple[MockSTT, MockTTS]:
    """The demo house and a test STT and TTS engine."""
    await async_setup_house(hass)
    return await async_setup_speech(hass)


def transfer_files(hass: HomeAssistant) -> list[str]:
    """Return what is left in the integration's transfer folder."""
    folder = Path(hass.config.path("ha_personal_assistant", "transfer"))
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def buttons(message: dict[str, Any]) -> list[str]:
    """Return the callback data of a message's inline buttons."""
    markup = message.get("reply_markup") or {}
    return [
        button["callback_data"]
        for row in markup.get("inline_keyboard", [])
        for button in row
    ]


async def test_a_voice_note_turns_on_a_light(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Heard by the STT engine, answered like typed text, transcript quoted first."""
    listener, speaker = speech
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    assert hass.states.get("light.bed_light").state == "off"
    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("The bed light is on.")
    assert await telegram.post_update(media_update(telegram, "voice", OGG)) == 200
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert hass.states.get("light.bed_light").state == "on"
    heard = fixed_text("voice_heard", text="turn on the bed light")
    assert sent[-1]["text"].split("\n")[0] == heard
    assert sent[-1]["text"].endswith("The bed light is on.")
    # The audio went to the engine as Telegram sent it, OGG/Opus, in English.
    ((metadata, audio),) = listener.received
    assert audio == OGG
    assert metadata.format == "ogg"
    assert metadata.codec == "opus"
    assert metadata.language == "en-US"
    # The model read the transcript as the user's words.
    assert fake_ollama.chat_requests[0]["messages"][-1]["content"].startswith(
        "turn on the bed light"
    )
    # No voice reply unless asked for, and no file left behind.
    assert not telegram.calls("sendVoice")
    assert not speaker.spoken
    assert transfer_files(hass) == []


async def test_a_voice_note_asking_to_unlock_still_needs_the_button(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Voice is the user's own words, and restricted actions wait for Confirm."""
    listener, _ = speech
    listener.text = "unlock the front door"
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "locked"
    request = sent[-1]
    data = buttons(request)
    assert data[0].startswith("/confirm_")
    # Not because of outside text: the transcript is the user's own.
    assert "outside" not in request["text"].casefold()
    await telegram.press_button(data[0])
    await telegram.wait_for_calls("answerCallbackQuery")
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "unlocked"


async def test_a_voice_reply_is_sent_when_voice_replies_is_on(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The answer comes as text and as a voice note made by HA's TTS."""
    _, speaker = speech
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    fake_ollama.reply("All lights are off.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    (voice,) = await telegram.wait_for_calls("sendVoice")
    assert voice["chat_id"] == ALICE_ID
    (upload,) = [c.files for c in telegram.api.calls if c.method == "sendVoice"]
    assert upload["voice"]["content"] == SPOKEN
    # The answer is spoken, not the quoted transcript.
    assert speaker.spoken == ["All lights are off."]
    await hass.async_block_till_done()
    assert transfer_files(hass) == []


async def test_a_typed_message_gets_no_voice_reply(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """voice_replies answers voice notes only."""
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    fake_ollama.reply("Hello.")
    await telegram.send_text("Hi")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await asyncio.sleep(0.1)
    assert not telegram.calls("sendVoice")
