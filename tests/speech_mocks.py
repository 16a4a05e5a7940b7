"""A speech-to-text and a text-to-speech engine for tests, as HA core builds them.

Real ``stt`` and ``tts`` entities of a mock integration, set up through a
config entry like any engine: the assistant finds them through HA's own
``stt`` and ``tts`` components, unpatched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import pytest
from homeassistant.components import stt, tts
from homeassistant.config_entries import ConfigEntry, ConfigFlow
from homeassistant.const import Platform
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
    MockModule,
    MockPlatform,
    mock_config_flow,
    mock_integration,
    mock_platform,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, Iterator, Mapping

    from homeassistant.core import HomeAssistant
    from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

SPEECH_DOMAIN: Final = "test_speech"
STT_ENTITY: Final = "stt.test_listener"
TTS_ENTITY: Final = "tts.test_speaker"
SPOKEN: Final = b"ID3 fake mp3 audio"


class MockSTT(stt.SpeechToTextEntity):
    """Hears what the test says it hears; records the audio and metadata."""

    _attr_name = "Test listener"
    _attr_unique_id = "test_listener"

    def __init__(self) -> None:
        """Hear nothing yet."""
        self.text: str | None = "turn on the bed light"
        self.fail = False
        self.hang = False
        # Raised instead of hearing anything (an engine that crashes).
        self.error: Exception | None = None
        self.languages = ["en-US", "de-DE"]
        self.formats = [stt.AudioFormats.OGG, stt.AudioFormats.WAV]
        self.received: list[tuple[stt.SpeechMetadata, bytes]] = []

    @property
    def supported_languages(self) -> list[str]:
        """English and German unless a test changes them."""
        return self.languages

    @property
    def supported_formats(self) -> list[stt.AudioFormats]:
        """OGG (Telegram's voice notes) unless a test takes it away."""
        return self.formats

    @property
    def supported_codecs(self) -> list[stt.AudioCodecs]:
        """Opus and PCM."""
        return [stt.AudioCodecs.OPUS, stt.AudioCodecs.PCM]

    @property
    def supported_bit_rates(self) -> list[stt.AudioBitRates]:
        """16 bit."""
        return [stt.AudioBitRates.BITRATE_16]

    @property
    def supported_sample_rates(self) -> list[stt.AudioSampleRates]:
        """16 and 48 kHz."""
        return [
            stt.AudioSampleRates.SAMPLERATE_16000,
            stt.AudioSampleRates.SAMPLERATE_48000,
        ]

    @property
    def supported_channels(self) -> list[stt.AudioChannels]:
        """Mono."""
        return [stt.AudioChannels.CHANNEL_MONO]

    async def async_process_audio_stream(
        self, metadata: stt.SpeechMetadata, stream: AsyncIterable[bytes]
    ) -> stt.SpeechResult:
        """Return the scripted text."""
        audio = b"".join([chunk async for chunk in stream])
        self.received.append((metadata, audio))
        if self.hang:
            import asyncio

            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error
        if self.fail:
            return stt.SpeechResult(None, stt.SpeechResultState.ERROR)
        return stt.SpeechResult(self.text, stt.SpeechResultState.SUCCESS)


class MockTTS(tts.TextToSpeechEntity):
    """Speaks every text as the same few bytes of 'MP3'; records the texts."""

    _attr_name = "Test speaker"
    _attr_unique_id = "test_speaker"

    def __init__(self) -> None:
        """Say nothing yet."""
        self.spoken: list[str] = []
        # The language and options each text was spoken with.
        self.settings: list[tuple[str, dict[str, Any]]] = []
        self.fail = False
        self.audio = SPOKEN

    @property
    def supported_languages(self) -> list[str]:
        """English and German."""
        return ["en", "de"]

    @property
    def default_language(self) -> str:
        """English."""
        return "en"

    @property
    def supported_options(self) -> list[str]:
        """A voice, as Assist pipelines set one."""
        return [tts.ATTR_VOICE]

    def get_tts_audio(
        self, message: str, language: str, options: Mapping[str, Any]
    ) -> tts.TtsAudioType:
        """Return the 'audio' (an entity may do this blocking, in HA's executor)."""
        self.spoken.append(message)
        self.settings.append((language, dict(options)))
        if self.fail:
            return None, None
        return "mp3", self.audio


class _SpeechFlow(ConfigFlow):
    """The test engines' config flow; never run."""


@pytest.fixture
def speech_flow() -> Iterator[None]:
    """Let the test engines' config entry load."""
    with mock_config_flow(SPEECH_DOMAIN, _SpeechFlow):
        yield


async def async_setup_speech(
    hass: HomeAssistant, *, with_tts: bool = True
) -> tuple[MockSTT, MockTTS]:
    """Set up HA's stt and tts with one test engine each."""
    listener, speaker = MockSTT(), MockTTS()

    async def _setup_entry(hass: HomeAssistant, entry: ConfigEntry) -> bool:
        platforms = [Platform.STT, *([Platform.TTS] if with_tts else [])]
        await hass.config_entries.async_forward_entry_setups(entry, platforms)
        return True

    async def _stt_entry(
        _hass: HomeAssistant,
        _entry: ConfigEntry,
        add: AddConfigEntryEntitiesCallback,
    ) -> None:
        add([listener])

    async def _tts_entry(
        _hass: HomeAssistant,
        _entry: ConfigEntry,
        add: AddConfigEntryEntitiesCallback,
    ) -> None:
        add([speaker])

    mock_integration(hass, MockModule(SPEECH_DOMAIN, async_setup_entry=_setup_entry))
    # Config entries need a config flow module, even one that is never used.
    mock_platform(hass, f"{SPEECH_DOMAIN}.config_flow")
    mock_platform(
        hass, f"{SPEECH_DOMAIN}.stt", MockPlatform(async_setup_entry=_stt_entry)
    )
    mock_platform(
        hass, f"{SPEECH_DOMAIN}.tts", MockPlatform(async_setup_entry=_tts_entry)
    )
    assert await async_setup_component(hass, "stt", {})
    if with_tts:
        assert await async_setup_component(hass, "tts", {})
    entry = MockConfigEntry(domain=SPEECH_DOMAIN)
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return listener, speaker
