"""The fixed texts people read, in their language, from the translation files.

Every text the integration writes itself (confirmations, command replies,
errors, notices) lives under ``exceptions`` in strings.json and in each
``translations/<language>.json``: HA's translation cache loads and keeps them,
falls back to English key by key, and drops a translation whose placeholders
differ from the English ones. Texts the model reads (the system prompt, tool
descriptions and results) stay English on purpose.

The language is chosen per person: Telegram's ``language_code`` of the sender,
else Home Assistant's language; Assist uses the conversation's language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from homeassistant.helpers.translation import async_get_translations

from .const import DOMAIN

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant

ENGLISH: Final = "en"
# The languages translations/ ships, as HA names them.
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
CATEGORY: Final = "exceptions"
_PREFIX: Final = f"component.{DOMAIN}.{CATEGORY}."
_SUFFIX: Final = ".message"
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

        A key HA did not load (only when nothing was loaded, as in a unit
        test without Home Assistant) comes back as the key itself.
        """
        template = self.strings.get(f"{_PREFIX}{key}{_SUFFIX}")
        if template is None:
            return key
        return template.format(**{name: str(v) for name, v in placeholders.items()})


async def async_texts(hass: HomeAssistant, language: str | None = None) -> Texts:
    """Return the texts in ``language`` (HA's own when None).

    HA's translation cache reads each file once, in its executor; later calls
    are dictionary lookups.
    """
    chosen = pick_language(language, hass.config.language)
    strings = await async_get_translations(hass, chosen, CATEGORY, [DOMAIN])
    return Texts(chosen, strings)
