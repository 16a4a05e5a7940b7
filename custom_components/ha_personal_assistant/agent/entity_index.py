"""Which exposed entities a message is about: keyword ranking, kept between turns.

The domain words (``light``: lamp, Licht, свет ...) are data, one file per
language in ``domain_words/`` (with a ``version``). They are read once, when
the module is imported: Home Assistant imports a custom integration in its
import executor, and runtime.py in the integration's own, never on the event
loop. The result is frozen.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr
from homeassistant.helpers.translation import async_get_translations

from ..const import LOGGER
from ..security.names import model_name
from ..security.trust import context_state
from ..tools.ha import exposed_states

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from homeassistant.core import HomeAssistant, State

# Entities the model should always know about: who is home.
ALWAYS_ON_DOMAINS: Final = frozenset({"person", "device_tracker"})
PRESENCE_CLASSES: Final = frozenset({"presence", "occupancy"})
# How much each kind of match counts when ranking entities for a message.
NAME_SCORE: Final = 4
AREA_SCORE: Final = 3
FLOOR_SCORE: Final = 2
DOMAIN_SCORE: Final = 1
# A word matches another when it is a prefix of it after dropping at most this
# many letters of inflection (Küche / Küchenlicht, кухне / кухня, lights / light).
INFLECTION: Final = 2
MIN_STEM: Final = 4
MIN_WORD: Final = 2

_WORD_RE: Final = re.compile(r"[^\W_]+")
_CJK_RE: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")

DOMAIN_WORDS_DIR: Final = Path(__file__).parent / "domain_words"
DOMAIN_WORDS_VERSION: Final = 1


def load_domain_words(
    directory: Path = DOMAIN_WORDS_DIR,
) -> Mapping[str, frozenset[str]]:
    """Return every language's words for each domain, merged; blocking (file I/O).

    A message may mix languages, and a name in one language may use a word of
    another: the words of every file count for every message.
    """
    merged: dict[str, set[str]] = {}
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != DOMAIN_WORDS_VERSION:
            found = data.get("version")
            msg = f"{path.name}: version {found}, expected {DOMAIN_WORDS_VERSION}"
            raise ValueError(msg)
        for domain, words in data["domains"].items():
            merged.setdefault(domain, set()).update(w.casefold() for w in words)
    return MappingProxyType({d: frozenset(w) for d, w in merged.items()})


# Domain words in the languages HA's users write most; HA's own translation of
# the domain's name in the configured language is added at run time.
DOMAIN_WORDS: Final = load_domain_words()


@dataclass(slots=True)
class EntityLine:
    """One entity as a context line, with how relevant it is to the message."""

    entity_id: str
    text: str
    score: int
    always: bool
    tokens: int = 0
    # The line when the catalogue in the system prompt already names the
    # entity and its area: only its id and state.
    short: str = ""


def shown_state(state: State) -> str:
    """Return an entity's state as a context line shows it (a placeholder for text)."""
    return one_line(context_state(state))


def one_line(text: str) -> str:
    """Return ``text`` on one line: a name or state never adds lines of its own."""
    return " ".join(text.split())


def _words(text: str) -> list[str]:
    return [word for word in _WORD_RE.findall(text.casefold()) if len(word) >= MIN_WORD]


def _stem(word: str) -> str:
    if len(word) <= MIN_STEM:
        return word
    return word[: max(MIN_STEM, len(word) - INFLECTION)]


def _matches(message_words: Sequence[str], message: str, keyword: str) -> bool:
    """Tell whether a keyword (a name word, an area, a domain word) is meant."""
    if _CJK_RE.search(keyword):
        return keyword in message
    for word in message_words:
        if word == keyword:
            return True
        if len(word) >= MIN_STEM and len(keyword) >= MIN_STEM:
            shorter, longer = sorted((word, keyword), key=len)
            if longer.startswith(_stem(shorter)):
                return True
    return False


class KeywordIndex:
    """Finds the keywords of a message quickly, even with thousands of entities."""

    def __init__(self) -> None:
        """Start empty."""
        self._by_prefix: dict[str, set[str]] = {}
        self._cjk: set[str] = set()

    def add(self, keyword: str) -> None:
        """Index one keyword."""
        if _CJK_RE.search(keyword):
            self._cjk.add(keyword)
        else:
            self._by_prefix.setdefault(keyword[:MIN_STEM], set()).add(keyword)

    def found(self, message: str) -> set[str]:
        """Return the indexed keywords the message means."""
        words = _words(message)
        folded = message.casefold()
        hits = {keyword for keyword in self._cjk if keyword in folded}
        for word in words:
            candidates = self._by_prefix.get(word[:MIN_STEM], ())
            hits.update(k for k in candidates if _matches([word], folded, k))
        return hits


def _domain_words(extra: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    words: dict[str, set[str]] = {
        domain: set(names) for domain, names in DOMAIN_WORDS.items()
    }
    for domain, translated in extra.items():
        for name in translated:
            words.setdefault(domain, set()).update(_words(name))
    return words


def _name_keywords(names: Iterable[str], score: int, keywords: dict[str, int]) -> None:
    for name in names:
        for word in _words(name):
            keywords.setdefault(word, score)
        if _CJK_RE.search(name):
            # Chinese and Japanese have no spaces: the whole name is the keyword.
            keywords.setdefault(name.casefold(), score)


def _strings(values: Iterable[object]) -> list[str]:
    return [value for value in values if isinstance(value, str) and value]


# What an entity's keywords depend on: its name (and the name the model may
# read: a device-chosen one is replaced, security/names.py) and registry entries.
type _Signature = tuple[
    tuple[str, str],
    er.RegistryEntry | None,
    ar.AreaEntry | None,
    fr.FloorEntry | None,
]


def _entity_keywords(
    hass: HomeAssistant, state: State, domain_words: Mapping[str, set[str]]
) -> tuple[_Signature, dict[str, int], str | None]:
    """Return what the entity's words depend on, the words with weights, its area."""
    keywords: dict[str, int] = {}
    signature = _signature(hass, state)
    _, entry, area, floor = signature
    names = [state.name, state.object_id.replace("_", " ")]
    if entry is not None:
        names.extend(_strings(entry.aliases))
    _name_keywords(names, NAME_SCORE, keywords)
    if area is not None:
        _name_keywords([area.name, *_strings(area.aliases)], AREA_SCORE, keywords)
    if floor is not None:
        _name_keywords([floor.name, *_strings(floor.aliases)], FLOOR_SCORE, keywords)
    for word in domain_words.get(state.domain, ()):
        keywords.setdefault(word, DOMAIN_SCORE)
    return signature, keywords, area.name if area is not None else None


def _signature(hass: HomeAssistant, state: State) -> _Signature:
    """Return what an entity's keywords depend on, cheaply (registry lookups)."""
    entry = er.async_get(hass).async_get(state.entity_id)
    area_id = None
    if entry is not None:
        area_id = entry.area_id
        if area_id is None and entry.device_id is not None:
            device = dr.async_get(hass).async_get(entry.device_id)
            area_id = device.area_id if device is not None else None
    area = ar.async_get(hass).async_get_area(area_id) if area_id else None
    floor = (
        fr.async_get(hass).async_get_floor(area.floor_id)
        if area is not None and area.floor_id
        else None
    )
    return ((state.name, model_name(hass, state)), entry, area, floor)


def _same(one: _Signature, other: _Signature) -> bool:
    # Registry entries are immutable: an update replaces the object.
    return one[0] == other[0] and all(
        a is b for a, b in zip(one[1:], other[1:], strict=True)
    )


class EntityIndex:
    """The words that point at each exposed entity, rebuilt only when they change.

    Names, aliases, areas and floors change rarely; rebuilding the words of
    thousands of entities on every message would cost more than the rest of
    the turn together.
    """

    def __init__(self) -> None:
        """Start empty."""
        self._entities: dict[str, tuple[_Signature, dict[str, int], str | None]] = {}
        self._keywords = KeywordIndex()
        self._by_keyword: dict[str, list[tuple[str, int]]] = {}
        self._domain_names: Mapping[str, Iterable[str]] | None = None
        # Each entity's line, kept while its state object (and area) is the same.
        self._lines: dict[str, tuple[State, str, bool, str]] = {}
        self._catalogue: list[str] | None = None
        self._generation = 0
        # HA's names of the domains, per language (read once each).
        self._translated: dict[str, dict[str, list[str]]] = {}

    async def async_rank(self, hass: HomeAssistant, message: str) -> list[EntityLine]:
        """Rank the exposed entities, with HA's domain names in its language."""
        return self.rank(
            hass, message, domain_names=await self._async_domain_names(hass)
        )

    async def _async_domain_names(self, hass: HomeAssistant) -> dict[str, list[str]]:
        """Return HA's names of the domains in the configured language."""
        language = hass.config.language
        if language not in self._translated:
            names: dict[str, list[str]] = {}
            try:
                translated = await async_get_translations(
                    hass, language, "entity_component"
                )
            except Exception as err:  # noqa: BLE001 - the built-in words still work
                LOGGER.debug("No domain names in %s: %s", language, err)
                translated = {}
            for key, value in translated.items():
                # component.<domain>.entity_component._.name
                parts = key.split(".")
                if len(parts) == 5 and parts[2:] == ["entity_component", "_", "name"]:  # noqa: PLR2004
                    names.setdefault(parts[1], []).append(value)
            self._translated[language] = names
        return self._translated[language]

    def _refresh(
        self,
        hass: HomeAssistant,
        states: Sequence[State],
        domain_names: Mapping[str, Iterable[str]],
    ) -> None:
        rebuild_all = domain_names != self._domain_names
        changed = rebuild_all
        seen: set[str] = set()
        domain_words = _domain_words(domain_names) if rebuild_all else None
        for state in states:
            seen.add(state.entity_id)
            known = self._entities.get(state.entity_id)
            if (
                not rebuild_all
                and known is not None
                and _same(known[0], _signature(hass, state))
            ):
                continue
            if domain_words is None:
                domain_words = _domain_words(domain_names)
            self._entities[state.entity_id] = _entity_keywords(
                hass, state, domain_words
            )
            changed = True
        if len(seen) != len(self._entities):
            for entity_id in set(self._entities) - seen:
                del self._entities[entity_id]
            changed = True
        if changed:
            self._lines.clear()
            self._catalogue = None
            self._domain_names = domain_names
            self._keywords = KeywordIndex()
            self._by_keyword = {}
            for entity_id, (_sig, keywords, _area) in self._entities.items():
                for keyword, score in keywords.items():
                    self._keywords.add(keyword)
                    self._by_keyword.setdefault(keyword, []).append((entity_id, score))

    def rank(
        self,
        hass: HomeAssistant,
        message: str,
        *,
        domain_names: Mapping[str, Iterable[str]] | None = None,
        states: Sequence[State] | None = None,
    ) -> list[EntityLine]:
        """Return a line per exposed entity, the always-on and relevant ones first."""
        visible = exposed_states(hass) if states is None else states
        self._refresh(hass, visible, domain_names or {})
        kinds: dict[str, set[int]] = {}
        # Each word of the entity's own name the message uses counts: "front
        # door" ranks the front door above the back door.
        name_words: dict[str, int] = {}
        for keyword in self._keywords.found(message):
            for entity_id, score in self._by_keyword.get(keyword, ()):
                kinds.setdefault(entity_id, set()).add(score)
                if score == NAME_SCORE:
                    name_words[entity_id] = name_words.get(entity_id, 0) + 1
        always: list[EntityLine] = []
        relevant: list[EntityLine] = []
        rest: list[EntityLine] = []
        lines = self._lines
        for state in visible:
            cached = lines.get(state.entity_id)
            if cached is None or cached[0] is not state:
                cached = (state, *self._line(state))
                lines[state.entity_id] = cached
            _state, text, is_always, short = cached
            # Each kind of match counts once ("kitchen light" beats "light"),
            # and each further word of the name once more.
            score = sum(kinds[state.entity_id]) if state.entity_id in kinds else 0
            if (extra := name_words.get(state.entity_id, 0) - 1) > 0:
                score += NAME_SCORE * extra
            line = EntityLine(state.entity_id, text, score, is_always, short=short)
            if is_always:
                always.append(line)
            elif score:
                relevant.append(line)
            else:
                rest.append(line)
        relevant.sort(key=lambda line: (-line.score, line.entity_id))
        always.sort(key=lambda line: (-line.score, line.entity_id))
        return [*always, *relevant, *rest]

    def _line(self, state: State) -> tuple[str, bool, str]:
        """Return an entity's line, whether it is always shown, and its short line."""
        area_label = self._entities[state.entity_id][2]
        # A state written outside the house never enters the context block:
        # a placeholder says how to read it (get_state fences and taints).
        value = shown_state(state)
        # A name the device chose never enters the context either.
        name = self._entities[state.entity_id][0][0][1]
        text = f"{state.entity_id} | {one_line(name)} | {value}"
        if area_label:
            text += f" | {area_label}"
        always = state.domain in ALWAYS_ON_DOMAINS or (
            state.domain == "binary_sensor"
            and state.attributes.get("device_class") in PRESENCE_CLASSES
        )
        return text, always, f"{state.entity_id} = {value}"

    def catalogue(self) -> tuple[int, list[str]]:
        """Return the catalogue's generation and its lines: id | name | area.

        Call after :meth:`rank`, which refreshes the index. The generation
        changes whenever an entity's name, area or exposure changes, and only
        then: the catalogue sits in the cached prefix of every request.
        """
        if self._catalogue is None:
            lines = []
            for entity_id in sorted(self._entities):
                ((_name, name), *_rest), _keywords, area = self._entities[entity_id]
                line = f"{entity_id} | {one_line(name)}"
                if area:
                    line += f" | {one_line(area)}"
                lines.append(line)
            self._generation += 1
            self._catalogue = lines
        return self._generation, self._catalogue


def rank_entities(
    hass: HomeAssistant,
    message: str,
    *,
    domain_names: Mapping[str, Iterable[str]] | None = None,
    states: Sequence[State] | None = None,
) -> list[EntityLine]:
    """Rank the exposed entities for one message, from scratch."""
    return EntityIndex().rank(hass, message, domain_names=domain_names, states=states)
