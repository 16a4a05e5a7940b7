"""The fixed texts people read in chat, in their language, from texts/<language>.json.

Every text the integration writes itself into a chat (confirmations, command
replies, notices, the errors a turn reports) lives in ``texts/<language>.json``,
one flat file per language: key to text, ``{placeholders}`` in braces. Each
language is read once, in Home Assistant's executor, and kept; English fills
in key by key, and a translation whose placeholders differ from the English
ones is dropped for the English text (as HA's own translation cache does).
The errors Home Assistant shows (raised with a translation key) stay under
``exceptions`` in strings.json and translations/. Texts the model reads (the
system prompt, tool descriptions and results) stay English on purpose.

The language is chosen per person: Telegram's ``language_code`` of the sender,
else Home Assistant's language; Assist uses the conversation's language.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from homeassistant.util.hass_dict import HassKey

from .const import DOMAIN, LOGGER

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant

ENGLISH: Final = "en"
# The languages translations/ and texts/ ship, as HA names them.
LANGUAGES: Final = (
    "de",
    "en",
    "es",
    "fr",
    "it",
    "nl",
    "pl",
    "pt",
    "ru",
    "uk",
    "zh-Hans",
)
TEXTS_DIR: Final = Path(__file__).parent / "texts"
# Each language's texts, English filled in, once read (per Home Assistant).
_LOADED: HassKey[dict[str, Mapping[str, str]]] = HassKey(f"{DOMAIN}_texts")
_BY_LOWER: Final = {language.casefold(): language for language in LANGUAGES}


def match_language(code: object) -> str | None:
    """Return the shipped language for a language tag, else None.

    Telegram sends IETF tags such as ``de``, ``pt-br`` or ``zh-hans``; HA's
    own are ``pt-BR``, ``zh-Hans`` or ``en-GB``. A regional variant takes its
    language (``pt-BR`` is ``pt``), and every Chinese tag takes the simplified
    script, the only Chinese shipped.
    """
    if not isinstance(code, str):
        return None
    tag = code.strip().replace("_", "-").casefold()
    if not tag:
        return None
    if tag in _BY_LOWER:
        return _BY_LOWER[tag]
    primary = tag.partition("-")[0]
    if primary == "zh":
        return "zh-Hans"
    return _BY_LOWER.get(primary)


def pick_language(*codes: object) -> str:
    """Return the first of ``codes`` that is shipped, else English."""
    for code in codes:
        if (language := match_language(code)) is not None:
            return language
    return ENGLISH


@dataclass(frozen=True, slots=True)
class Texts:
    """The integration's fixed texts in one language."""

    language: str = ENGLISH
    strings: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, key: str, /, **placeholders: object) -> str:
        """Return the text ``key`` with its ``{placeholders}`` filled in.

        A key not loaded (only when nothing was loaded, as in a unit test
        without Home Assistant) comes back as the key itself.
        """
        template = self.strings.get(key)
        if template is None:
            return key
        return template.format(**{name: str(v) for name, v in placeholders.items()})


def _placeholders(text: str) -> set[str] | None:
    """Return the ``{names}`` in ``text``, or None when it does not parse."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}
    except ValueError:
        return None


def _read(folder: Path, language: str) -> dict[str, str]:
    data = json.loads((folder / f"{language}.json").read_text(encoding="utf-8"))
    return {str(key): str(text) for key, text in data.items()}


def load_texts(folder: Path, language: str) -> dict[str, str]:
    """Return a language's texts with English filling in; blocking (executor).

    A missing key takes the English text; so does a translation whose
    placeholders differ from the English ones (it would fail to format), with
    an error logged, as HA's translation cache does for its own files.
    """
    english = _read(folder, ENGLISH)
    if language == ENGLISH:
        return english
    texts = dict(english)
    for key, text in _read(folder, language).items():
        if key not in english:
            continue
        wanted = _placeholders(english[key])
        if (found := _placeholders(text)) != wanted:
            LOGGER.error(
                "Validation of text placeholders for localized (%s) string %s "
                "failed: (%s != %s)",
                language,
                key,
                found,
                wanted,
            )
            continue
        texts[key] = text
    return texts


async def async_texts(hass: HomeAssistant, language: str | None = None) -> Texts:
    """Return the texts in ``language`` (HA's own when None).

    Each language's file is read once, in HA's executor (as HA reads its
    translations); later calls are dictionary lookups.
    """
    chosen = pick_language(language, hass.config.language)
    loaded = hass.data.setdefault(_LOADED, {})
    if (strings := loaded.get(chosen)) is None:
        strings = await hass.async_add_executor_job(load_texts, TEXTS_DIR, chosen)
        loaded[chosen] = strings
    return Texts(chosen, strings)
