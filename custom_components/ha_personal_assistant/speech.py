"""Speech through Home Assistant's own STT and TTS: the user's Assist setup, reused.

The engine is the one of the preferred Assist pipeline (the option
``stt_engine`` picks another STT engine), else HA's default one. Voice
notes from Telegram are OGG/Opus; they are streamed to the engine as they
are when it takes that, and an engine that does not is named in the reply.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components import stt, tts
from homeassistant.exceptions import HomeAssistantError

from .const import LOGGER
from .media import MediaError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from homeassistant.core import HomeAssistant

STT_TIMEOUT: Final = 60.0  # seconds for one voice note
TTS_TIMEOUT: Final = 60.0  # seconds for one spoken reply
AUDIO_CHUNK: Final = 4096
# The longest reply that is also spoken; a longer one is read, not heard.
MAX_SPOKEN_CHARS: Final = 1000
# What Telegram's sendVoice plays as a voice note.
VOICE_FORMATS: Final = frozenset({"ogg", "oga", "opus", "mp3", "m4a"})
PIPELINE_DOMAIN: Final = "assist_pipeline"
TTS_DOMAIN: Final = "tts"


@dataclass(frozen=True, slots=True)
class Engines:
    """The speech engines in use, and the languages Assist set for them."""

    stt: str | None
    stt_language: str | None
    tts: str | None
    tts_language: str | None
    tts_voice: str | None


def _pipeline(hass: HomeAssistant) -> Any:
    """Return the preferred Assist pipeline, or None without Assist."""
    if PIPELINE_DOMAIN not in hass.config.components:
        return None
    from homeassistant.components.assist_pipeline.pipeline import (  # noqa: PLC0415 - loaded only with Assist
        async_get_pipeline,
    )

    try:
        return async_get_pipeline(hass)
    except (HomeAssistantError, KeyError) as err:
        LOGGER.debug("No preferred Assist pipeline: %s", err)
        return None


def resolve_engines(hass: HomeAssistant, stt_option: str | None) -> Engines:
    """Return the engines a voice note is heard and answered with."""
    pipeline = _pipeline(hass)
    stt_engine = stt_option or getattr(pipeline, "stt_engine", None)
    stt_language = None
    if not stt_option and pipeline is not None:
        stt_language = pipeline.stt_language
    if not stt_engine and stt.DOMAIN in hass.config.components:
        stt_engine = stt.async_default_engine(hass)
    tts_engine = getattr(pipeline, "tts_engine", None)
    tts_language = getattr(pipeline, "tts_language", None)
    tts_voice = getattr(pipeline, "tts_voice", None)
    if not tts_engine and TTS_DOMAIN in hass.config.components:
        tts_engine = tts.async_default_engine(hass)
        tts_language = tts_voice = None
    return Engines(stt_engine, stt_language, tts_engine, tts_language, tts_voice)


def pick_speech_language(supported: list[str], *wanted: str | None) -> str | None:
    """Return the supported language closest to the first wanted one that fits."""
    for code in wanted:
        if not code:
            continue
        for language in supported:
            if language.casefold() == code.casefold():
                return language
        base = code.replace("_", "-").split("-")[0].casefold()
        for language in supported:
            if language.replace("_", "-").split("-")[0].casefold() == base:
                return language
    return supported[0] if supported else None


async def _chunks(audio: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(audio), AUDIO_CHUNK):
        yield audio[start : start + AUDIO_CHUNK]


async def async_transcribe(
    hass: HomeAssistant,
    engines: Engines,
    audio: bytes,
    language: str,
) -> str:
    """Return what a Telegram voice note (OGG/Opus) says; raise MediaError."""
    engine_id = engines.stt
    if not engine_id or stt.DOMAIN not in hass.config.components:
        raise MediaError(key="stt_missing")
    engine = stt.async_get_speech_to_text_engine(hass, engine_id)
    if engine is None:
        raise MediaError(key="stt_not_found", engine=engine_id)
    chosen = pick_speech_language(
        list(engine.supported_languages),
        engines.stt_language,
        language,
        hass.config.language,
    )
    if chosen is None:
        raise MediaError(key="stt_failed", engine=engine_id)
    metadata = stt.SpeechMetadata(
        language=chosen,
        format=stt.AudioFormats.OGG,
        codec=stt.AudioCodecs.OPUS,
        bit_rate=stt.AudioBitRates.BITRATE_16,
        sample_rate=stt.AudioSampleRates.SAMPLERATE_48000,
        channel=stt.AudioChannels.CHANNEL_MONO,
    )
    if not engine.check_metadata(metadata):
        raise MediaError(key="stt_format", engine=engine_id)
    try:
        async with asyncio.timeout(STT_TIMEOUT):
            if isinstance(engine, stt.SpeechToTextEntity):
                result = await engine.internal_async_process_audio_stream(
                    metadata, _chunks(audio)
                )
            else:
                result = await engine.async_process_audio_stream(
                    metadata, _chunks(audio)
                )
    except TimeoutError as err:
        raise MediaError(key="stt_timeout", engine=engine_id) from err
    except Exception as err:
        LOGGER.debug("Speech-to-text with %s failed: %s", engine_id, err)
        raise MediaError(key="stt_failed", engine=engine_id) from err
    if result.result != stt.SpeechResultState.SUCCESS:
        raise MediaError(key="stt_failed", engine=engine_id)
    text = " ".join((result.text or "").split())
    if not text:
        raise MediaError(key="stt_empty")
    return text


async def async_speak(
    hass: HomeAssistant, engines: Engines, text: str, language: str
) -> tuple[str, bytes]:
    """Return a reply spoken by the TTS engine: its file extension and audio.

    Raises MediaError when there is no engine or it fails.
    """
    engine_id = engines.tts
    if not engine_id or TTS_DOMAIN not in hass.config.components:
        raise MediaError(key="tts_missing")
    options: dict[str, Any] = {}
    if engines.tts_voice:
        options["voice"] = engines.tts_voice
    try:
        stream = tts.async_create_stream(
            hass,
            engine_id,
            language=engines.tts_language or language,
            options=options or None,
        )
    except HomeAssistantError:
        # The voice or language Assist set does not fit: the engine's own.
        try:
            stream = tts.async_create_stream(hass, engine_id)
        except HomeAssistantError as err:
            LOGGER.debug("Text-to-speech with %s is not available: %s", engine_id, err)
            raise MediaError(key="tts_failed", engine=engine_id) from err
    stream.async_set_message(text[:MAX_SPOKEN_CHARS])
    try:
        async with asyncio.timeout(TTS_TIMEOUT):
            audio = b"".join([chunk async for chunk in stream.async_stream_result()])
    except Exception as err:
        LOGGER.debug("Text-to-speech with %s failed: %s", engine_id, err)
        raise MediaError(key="tts_failed", engine=engine_id) from err
    if not audio:
        raise MediaError(key="tts_failed", engine=engine_id)
    return stream.extension, audio
