"""The context assembler: a token budget for everything after the cached prefix."""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr
from homeassistant.util import dt as dt_util
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from .agent.prompts import CONTEXT_HEADER
from .agent.turns import (
    USER_TEXT,
    expire_taint,
    is_tainted_turn,
    mark_message,
    opening_after_trim,
    sources_of,
    split_turns,
    stub_turn,
    with_opening,
)
from .security.firewall import mark_untrusted
from .security.names import model_name
from .security.trust import context_state
from .tokens import MESSAGE_OVERHEAD, TokenCounter
from .tools.ha import exposed_states

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from homeassistant.core import HomeAssistant, State
    from langchain_core.messages import AnyMessage

# The answer needs room too: an eighth of the window, within these bounds.
ANSWER_SHARE: Final = 1 / 8
MIN_ANSWER_RESERVE: Final = 256
MAX_ANSWER_RESERVE: Final = 1024
# Estimates err high already; the margin covers what they still miss.
SAFETY_MARGIN: Final = 0.10
# What the model's chat template adds around the tools and each message.
TEMPLATE_OVERHEAD: Final = 150
# Shares of what is left after the fixed part and the user's message. A part
# that needs less lends the rest to the others, in proportion to their shares.
SHARES: Final = {"history": 0.35, "entities": 0.35, "documents": 0.20, "profile": 0.10}
SEARCH_DOCUMENTS: Final = "search_documents"
AUTO_CONTEXT_CALL_ID: Final = "auto_context_documents"
ENTITIES_HEADER: Final = "Entities (entity_id | name | state | area):"
DOCUMENTS_HEADER: Final = "From the home's knowledge:"
PROFILE_HEADER: Final = "What you know about this user:"
ENTITY_FOOTER_TOKENS: Final = 16
CUT_NOTE: Final = " … (cut to fit the context window)"
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

# Domain words in the languages HA's users write most; HA's own translation of
# the domain's name in the configured language is added at run time.
DOMAIN_WORDS: Final[Mapping[str, tuple[str, ...]]] = {
    "light": (
        "light", "lights", "lamp", "lamps", "licht", "lichter", "lampe", "lampen",
        "leuchte", "свет", "светильник", "лампа", "люстра", "światło", "światła",
        "lampa", "lampy", "灯", "电灯", "灯光",
    ),
    "switch": (
        "switch", "switches", "plug", "socket", "schalter", "steckdose",
        "выключатель", "розетка", "przełącznik", "gniazdko", "开关", "插座",
    ),
    "climate": (
        "climate", "heating", "thermostat", "temperature", "heater", "heizung",
        "klima", "thermostat", "temperatur", "отопление", "термостат",
        "температура", "кондиционер", "ogrzewanie", "termostat", "temperatura",
        "klimatyzacja", "空调", "暖气", "温度",
    ),
    "cover": (
        "cover", "blind", "blinds", "shutter", "shutters", "curtain", "garage",
        "rollo", "rollladen", "jalousie", "vorhang", "garage", "markise",
        "штора", "шторы", "жалюзи", "гараж", "roleta", "rolety", "zasłona",
        "garaż", "brama", "窗帘", "百叶窗", "车库",
    ),
    "lock": (
        "lock", "locks", "door", "schloss", "tür", "türschloss", "замок", "дверь",
        "zamek", "drzwi", "锁", "门锁", "门",
    ),
    "sensor": (
        "sensor", "temperature", "humidity", "power", "energy", "sensor",
        "temperatur", "feuchtigkeit", "luftfeuchtigkeit", "strom", "energie",
        "датчик", "температура", "влажность", "энергия", "czujnik",
        "temperatura", "wilgotność", "energia", "传感器", "温度", "湿度",
    ),
    "binary_sensor": (
        "motion", "window", "door", "bewegung", "fenster", "tür", "движение",
        "окно", "дверь", "ruch", "okno", "drzwi", "运动", "窗", "门",
    ),
    "fan": ("fan", "fans", "ventilator", "lüfter", "вентилятор", "wentylator", "风扇"),
    "media_player": (
        "tv", "television", "speaker", "music", "player", "fernseher",
        "lautsprecher", "musik", "телевизор", "колонка", "музыка", "telewizor",
        "głośnik", "muzyka", "电视", "音箱", "音乐",
    ),
    "vacuum": (
        "vacuum", "robot", "staubsauger", "saugroboter", "пылесос", "odkurzacz",
        "吸尘器", "扫地机",
    ),
    "camera": ("camera", "kamera", "камера", "摄像头", "相机"),
    "alarm_control_panel": (
        "alarm", "security", "alarmanlage", "сигнализация", "охрана", "alarm",
        "警报", "报警",
    ),
    "scene": ("scene", "szene", "сцена", "scena", "场景"),
    "script": ("script", "skript", "скрипт", "skrypt", "脚本"),
    "weather": ("weather", "wetter", "погода", "pogoda", "天气"),
    "valve": ("valve", "ventil", "клапан", "кран", "zawór", "阀门"),
    "water_heater": ("boiler", "warmwasser", "бойлер", "bojler", "热水器"),
    "humidifier": (
        "humidifier", "luftbefeuchter", "увлажнитель", "nawilżacz", "加湿器",
    ),
    "person": ("who", "home", "wer", "zuhause", "кто", "дома", "kto", "domu", "谁"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Budget:
    """How the context window of one request is divided."""

    num_ctx: int
    # System prompt, tool schemas and template: estimated once per session.
    fixed: int

    @property
    def answer_reserve(self) -> int:
        """Return the tokens kept free for the model's answer."""
        return min(
            MAX_ANSWER_RESERVE,
            max(MIN_ANSWER_RESERVE, int(self.num_ctx * ANSWER_SHARE)),
        )

    @property
    def limit(self) -> int:
        """Return the most tokens a request may hold."""
        return int((self.num_ctx - self.answer_reserve) * (1 - SAFETY_MARGIN))


def share_out(total: int, demands: Mapping[str, int]) -> dict[str, int]:
    """Split ``total`` by :data:`SHARES`; room a part does not need goes to others."""
    granted = dict.fromkeys(demands, 0)
    left = total
    wanting = {name for name, demand in demands.items() if demand > 0}
    while left > 0 and wanting:
        weight = sum(SHARES[name] for name in wanting)
        handed = 0
        for name in sorted(wanting):
            offer = int(left * SHARES[name] / weight)
            take = min(offer, demands[name] - granted[name])
            granted[name] += take
            handed += take
        wanting = {name for name in wanting if granted[name] < demands[name]}
        if handed == 0:
            break
        left -= handed
    return granted


@dataclass(frozen=True, slots=True)
class DocumentChunk:
    """A retrieved chunk, as the context shows it."""

    title: str
    content: str
    trusted: bool
    # Untrusted chunks, fenced and marked by the firewall (see fence_chunks).
    fenced: str = ""


def fence_chunks(chunks: Sequence[DocumentChunk]) -> list[DocumentChunk]:
    """Return the chunks with the untrusted ones fenced; blocking (milliseconds).

    The fence is random, so it is made once per turn and every request of the
    turn carries the same bytes.
    """
    return [
        chunk
        if chunk.trusted or chunk.fenced
        else replace(
            chunk,
            fenced=mark_untrusted(
                f"{chunk.title}\n{chunk.content}", source="documents"
            ),
        )
        for chunk in chunks
    ]


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
    return _one_line(context_state(state))


def _one_line(text: str) -> str:
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
    words: dict[str, set[str]] = {}
    for domain, names in DOMAIN_WORDS.items():
        words.setdefault(domain, set()).update(name.casefold() for name in names)
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
        text = f"{state.entity_id} | {_one_line(name)} | {value}"
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
                line = f"{entity_id} | {_one_line(name)}"
                if area:
                    line += f" | {_one_line(area)}"
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


def _fit_lines(
    lines: Iterable[str], allowance: int, counter: TokenCounter
) -> list[str]:
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count(line) + 1
        if used + cost > allowance:
            break
        kept.append(line)
        used += cost
    return kept


@dataclass(slots=True)
class TurnContext:
    """What one turn may add after the history, before the budget cuts it."""

    # Lines every message carries (the time, who is asking).
    header: list[str]
    entities: list[EntityLine]
    profile: str = ""
    documents: list[DocumentChunk] = field(default_factory=list)
    # Lines a session needs once (the home's name and time zone): repeated
    # only when they left the prompt.
    session: list[str] = field(default_factory=list)
    # The catalogue in the system prompt names every exposed entity and its
    # area: a state line then needs only the id and the state.
    catalogued: bool = False


@dataclass(slots=True)
class Prepared:
    """The history and the new message of a turn, as the model will read them."""

    history: list[AnyMessage]
    opening: str
    user: HumanMessage
    # Retrieved untrusted documents, as a search_documents call and its result.
    documents: list[AnyMessage]
    # The history was trimmed (the model server re-reads what follows the cut).
    trimmed: bool
    # Tainted turns left the prompt (reduced to the user's own words).
    expired: bool
    # The user's message was cut to fit: the characters kept, of how many.
    # The user is told with the reply.
    cut: tuple[int, int] | None = None


@dataclass(slots=True)
class Request:
    """The messages of one model request and their estimated size."""

    messages: list[AnyMessage]
    tokens: int
    # The sources of the untrusted text in the request (empty: none).
    untrusted: list[str]
    # The same without the learned correction, to compare with Ollama's count.
    raw_tokens: int


# Of the room after the fixed prefix and the user's message: the new turn's
# live context (states, profile, documents) and this turn's tool rounds.
LIVE_SHARE: Final = 0.30
TOOL_RESERVE: Final = 0.15
# A longer message is cut (and the user told): the rest needs room too.
MAX_USER_SHARE: Final = 0.5
# A history that outgrows its room is trimmed in one step to this share of
# it, so the following turns append again for a long while.
TRIM_TO: Final = 0.5
# Past this share of its room, a background summary of the older half is
# written (after the reply, when the chats are quiet), ready for the trim.
SUMMARIZE_AT: Final = 0.7
# When not every changed state fits, at most this many matched ones are
# shown: those scoring at least this share of the best match.
MAX_LIVE_ENTITIES: Final = 10
BEST_SHARE: Final = 0.75
# The catalogue (ids, names, areas) may take this share of the request limit.
CATALOGUE_SHARE: Final = 0.2
CATALOGUE_HEADER: Final = "Entities you can see (entity_id | name | area):"
NO_CATALOGUE: Final = (
    "{count} entities are exposed to you. The [Context] of a message lists "
    "those it is about; use list_entities to find others."
)
_ENTITY_LINE_RE: Final = re.compile(
    r"^([a-z0-9_]+\.[a-z0-9_]+)(?: = | \| )", re.MULTILINE
)
_HISTORY_LINE_SEPARATOR: Final = "\n"


def build_system_prompt(
    base: str, catalogue: Sequence[str], limit: int, counter: TokenCounter
) -> tuple[str, bool]:
    """Return the system prompt with the catalogue, and whether it lists all.

    The catalogue changes only when an entity's exposure, name or area
    changes: it belongs to the cached prefix. In a house too big for its
    share, the prompt says how many entities there are instead.
    """
    if not catalogue:
        return f"{base}\n\nNo entities are exposed to you.", True
    text = "\n".join([CATALOGUE_HEADER, *catalogue])
    if counter.count(text) <= limit * CATALOGUE_SHARE:
        return f"{base}\n\n{text}", True
    return f"{base}\n\n{NO_CATALOGUE.format(count=len(catalogue))}", False


def _last_shown(history_text: str) -> dict[str, str]:
    """Return each entity's last state line in the history's context blocks."""
    shown: dict[str, str] = {}
    for match in _ENTITY_LINE_RE.finditer(history_text):
        end = history_text.find("\n", match.start())
        shown[match.group(1)] = history_text[
            match.start() : end if end != -1 else len(history_text)
        ]
    return shown


class ContextAssembler:
    """Builds the requests of one turn: the history as sent, then the new message."""

    def __init__(
        self,
        *,
        budget: Budget,
        counter: TokenCounter,
        system_prompt: str,
        turn: TurnContext,
    ) -> None:
        """Keep the turn's material; nothing is cut until the turn is prepared."""
        self.budget = budget
        self.counter = counter
        self.system_prompt = system_prompt
        self.turn = turn
        # Fenced in the executor by the caller; here only if it did not.
        self._fenced = [
            chunk.fenced for chunk in fence_chunks(turn.documents) if not chunk.trusted
        ]
        self._costs: dict[tuple[str | None, int, float], int] = {}

    def _cost(self, message: AnyMessage) -> int:
        """Return a message's estimate; a turn re-reads the same messages each round."""
        key = (message.id, len(str(message.content)), self.counter.correction)
        if message.id is None or key not in self._costs:
            cost = _message_cost(self.counter)(message)
            if message.id is None:
                return cost
            self._costs[key] = cost
        return self._costs[key]

    def _room(self) -> int:
        """Return the tokens a request may hold after the fixed prefix."""
        fixed = self.counter.scale(self.budget.fixed)
        return max(0, self.budget.limit - fixed - 2 * MESSAGE_OVERHEAD)

    def history_room(self, user_tokens: int) -> int:
        """Return the room the history may fill beside a message this long."""
        room = self._room()
        live = int(max(0, room - user_tokens) * LIVE_SHARE)
        return max(0, room - user_tokens - live - int(room * TOOL_RESERVE))

    def history_tokens(self, messages: Sequence[AnyMessage], opening: str) -> int:
        """Return the estimated tokens of a history as it is sent."""
        return sum(self._cost(message) for message in with_opening(messages, opening))

    def prepare(
        self,
        history: Sequence[AnyMessage],
        *,
        opening: str,
        text: str,
        turn_id: str,
        summary: tuple[str, str] | None = None,
    ) -> Prepared:
        """Return the turn's history and its new message with the live context.

        The history keeps its bytes, except in these large, rare steps: a
        background summary replaces the turns it covers; tainted turns leave
        after :data:`TAINTED_TURNS_KEPT` later turns; a history that outgrew
        its room loses its older half (and every tainted turn) at once.
        """
        counter = self.counter
        turns = split_turns(history)
        trimmed = False
        if summary is not None:
            text_of_summary, upto = summary
            ids = [str(turn[0].id) for turn in turns]
            if upto in ids:
                turns = turns[ids.index(upto) + 1 :]
                opening = text_of_summary
                trimmed = True
        turns, expired = expire_taint(turns)
        room = self._room()
        cut = None
        max_user = int(room * MAX_USER_SHARE)
        if counter.count(text) > max_user:
            total = len(text)
            keep = max(1, int(total * max_user / max(counter.count(text), 1)))
            while keep > 1 and counter.count(text[:keep]) > max_user:
                keep = int(keep * 0.9)
            text = text[:keep]
            cut = (keep, total)
        user_tokens = counter.count(text)
        live_allowance = int(max(0, room - user_tokens) * LIVE_SHARE)
        history_room = self.history_room(user_tokens)
        flat = [message for turn in turns for message in turn]
        if self.history_tokens(flat, opening) > history_room:
            turns, opening = self._trim(turns, opening, int(history_room * TRIM_TO))
            trimmed = True
            flat = [message for turn in turns for message in turn]
        lines, documents = self._live(flat, opening, live_allowance)
        content = text
        if lines:
            content = f"{text}\n\n{CONTEXT_HEADER}\n" + "\n".join(lines)
        user = HumanMessage(
            content=content, id=turn_id, additional_kwargs={USER_TEXT: text}
        )
        return Prepared(
            history=flat,
            opening=opening,
            user=user,
            documents=_document_messages(text, documents) if documents else [],
            trimmed=trimmed,
            expired=expired,
            cut=cut,
        )

    def _trim(
        self, turns: list[list[AnyMessage]], opening: str, target: int
    ) -> tuple[list[list[AnyMessage]], str]:
        """Drop the oldest turns until the history fits ``target``; one step."""
        dropped: list[list[AnyMessage]] = []
        kept = list(turns)
        while kept:
            candidate = opening_after_trim(opening, dropped)
            flat = [message for turn in kept for message in turn]
            if self.history_tokens(flat, candidate) <= target:
                break
            dropped.append(kept.pop(0))
        # At a trim every tainted turn leaves as well: the bytes after the cut
        # are re-read anyway.
        kept = [stub_turn(turn) if is_tainted_turn(turn) else turn for turn in kept]
        return kept, opening_after_trim(opening, dropped)

    def _live(
        self, history: Sequence[AnyMessage], opening: str, allowance: int
    ) -> tuple[list[str], list[str]]:
        """Return the new turn's context lines and fenced documents.

        A line the history already holds is not repeated: the profile and
        knowledge lines it has, the session lines, and each entity's state
        as it was last shown. Only what is new or changed costs tokens.
        """
        counter = self.counter
        turn = self.turn
        history_text = _HISTORY_LINE_SEPARATOR.join(
            [
                opening,
                *(
                    str(message.content)
                    for message in history
                    if isinstance(message, HumanMessage)
                ),
            ]
        )
        shown = _last_shown(history_text)
        known = set(history_text.splitlines())
        # The date and the home once per conversation (until they change or
        # leave the prompt), the time every message, who is asking when it
        # is not the same person as last time.
        last_user = next(
            (
                line
                for line in reversed(history_text.splitlines())
                if line.startswith("User: ")
            ),
            None,
        )
        parts = [
            line
            for line in turn.header
            if not (line.startswith("Date: ") and line in known)
            and not (line.startswith("User: ") and line == last_user)
        ]
        parts.extend(line for line in turn.session if line not in known)
        profile = [
            line
            for line in turn.profile.splitlines()
            if line.strip() and line not in known
        ]
        trusted = [
            line
            for chunk in turn.documents
            if chunk.trusted
            and (line := f"- {_one_line(chunk.title)}: {_one_line(chunk.content)}")
            not in known
        ]

        def entity_text(line: EntityLine) -> str:
            return line.short if turn.catalogued and line.short else line.text

        changed = [
            line
            for line in turn.entities
            if shown.get(line.entity_id) != entity_text(line)
        ]
        entity_costs = {
            line.entity_id: counter.count(entity_text(line)) + 1 for line in changed
        }
        header_cost = sum(counter.count(line) + 1 for line in parts)
        demands = {
            "entities": sum(entity_costs.values()) + counter.count(ENTITIES_HEADER),
            "documents": sum(counter.count(line) + 1 for line in trusted)
            + sum(counter.count(text) + MESSAGE_OVERHEAD for text in self._fenced),
            "profile": sum(counter.count(line) + 1 for line in profile)
            + (counter.count(PROFILE_HEADER) if profile else 0),
        }
        granted = share_out(max(0, allowance - header_cost), demands)
        # With the catalogue in the cached prefix (every id, name and area),
        # a turn brings only the states it needs: who is home and what the
        # message names (the first message of a session costs itself, not the
        # whole house); list_entities and get_state read the rest.
        if granted["entities"] >= demands["entities"] and not turn.catalogued:
            entities = changed
        else:
            entities = _best_named(changed, turn.entities)
            if turn.catalogued:
                # A state shown earlier that changed is said again: the
                # model takes a shown state as true until a later line.
                entities += [
                    line
                    for line in changed
                    if line.entity_id in shown and line not in entities
                ]
        entity_lines = _fit_lines(
            (entity_text(line) for line in entities),
            granted["entities"] - counter.count(ENTITIES_HEADER),
            counter,
        )
        if profile:
            fitted = _fit_lines(
                profile, granted["profile"] - counter.count(PROFILE_HEADER), counter
            )
            if fitted:
                parts.append(PROFILE_HEADER)
                parts.extend(fitted)
        doc_room = granted["documents"]
        trusted_lines = _fit_lines(trusted, doc_room, counter)
        doc_room -= sum(counter.count(line) + 1 for line in trusted_lines)
        if trusted_lines:
            parts.append(DOCUMENTS_HEADER)
            parts.extend(trusted_lines)
        fenced: list[str] = []
        for text in self._fenced:
            cost = counter.count(text) + MESSAGE_OVERHEAD
            if cost > doc_room:
                break
            fenced.append(text)
            doc_room -= cost
        if entity_lines:
            parts.append(ENTITIES_HEADER)
            parts.extend(entity_lines)
        if not turn.catalogued and (left := len(turn.entities) - len(entity_lines)):
            note = f"({left} more: use list_entities)"
            if note not in known:
                parts.append(note)
        return parts, fenced

    def build(self, messages: Sequence[AnyMessage], *, opening: str) -> Request:
        """Return the request for the current state, cut only if it cannot fit.

        The history and the new message were prepared to fit; only this turn's
        own tool results can still overflow. Then, in this order: retrieved
        documents, the oldest turns (for this request only), and the longest
        tool results are cut. The system prompt and the user's message never are.
        """
        counter = self.counter
        fixed = counter.scale(self.budget.fixed)
        cost_of = self._cost
        rendered = with_opening(messages, opening)
        total = sum(cost_of(message) for message in rendered)
        room = self.budget.limit - fixed
        if total > room:
            rendered = [
                message
                for message in rendered
                if getattr(message, "tool_call_id", None) != AUTO_CONTEXT_CALL_ID
                and not (
                    isinstance(message, AIMessage)
                    and any(
                        call["id"] == AUTO_CONTEXT_CALL_ID
                        for call in message.tool_calls
                    )
                )
            ]
            total = sum(cost_of(message) for message in rendered)
        if total > room:
            turns = split_turns(list(messages))
            while len(turns) > 1 and total > room:
                turns.pop(0)
                rendered = with_opening(
                    [message for turn in turns for message in turn], opening
                )
                total = sum(cost_of(message) for message in rendered)
        if total > room:
            turns = split_turns(rendered)
            current = turns[-1]
            head = [message for turn in turns[:-1] for message in turn]
            current[1:] = _shrink_tool_results(current[1:], total - room, cost_of)
            rendered = [*head, *current]
            total = sum(cost_of(message) for message in rendered)
        result: list[AnyMessage] = [
            SystemMessage(content=self.system_prompt),
            *rendered,
        ]
        tokens = fixed + total
        return Request(
            result,
            tokens,
            untrusted=sources_of(rendered),
            raw_tokens=math.ceil(tokens / counter.correction),
        )


def _best_named(
    changed: Sequence[EntityLine], entities: Sequence[EntityLine]
) -> list[EntityLine]:
    """Return the lines worth sending when not every changed state fits.

    Who is home, and the entities the message names best (ties and near ties
    of the best score). A message whose best words fit more than
    MAX_LIVE_ENTITIES entities alike ("which lights are on?" in a house of
    a hundred lights, where "light" is in every name) names none in
    particular: list_entities answers that in full, better than an arbitrary
    ten here, and the turn costs no state lines the answer cannot use.
    """
    best = max((line.score for line in entities), default=0)

    def is_named(line: EntityLine) -> bool:
        return not line.always and bool(line.score) and line.score >= best * BEST_SHARE

    named = [line for line in changed if is_named(line)]
    if sum(1 for line in entities if is_named(line)) > MAX_LIVE_ENTITIES:
        named = []
    always = [line for line in changed if line.always]
    return [*always, *named][:MAX_LIVE_ENTITIES]


def _document_messages(query: str, documents: Sequence[str]) -> list[AnyMessage]:
    """Return retrieved untrusted chunks as if the model had searched for them."""
    source = ["documents found for your message"]
    return [
        mark_message(
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": SEARCH_DOCUMENTS,
                        "args": {"query": query},
                        "id": AUTO_CONTEXT_CALL_ID,
                        "type": "tool_call",
                    }
                ],
                id=f"{AUTO_CONTEXT_CALL_ID}-{uuid.uuid4().hex}",
            ),
            source,
        ),
        mark_message(
            ToolMessage(
                content="\n\n".join(documents),
                tool_call_id=AUTO_CONTEXT_CALL_ID,
                name=SEARCH_DOCUMENTS,
                id=f"{AUTO_CONTEXT_CALL_ID}-result-{uuid.uuid4().hex}",
            ),
            source,
        ),
    ]


def _shrink_tool_results(
    messages: Sequence[AnyMessage], excess: int, cost_of: Callable[[AnyMessage], int]
) -> list[AnyMessage]:
    """Return ``messages`` with the longest tool results cut by ``excess`` tokens."""
    result = list(messages)
    while excess > 0:
        tools = [
            (cost_of(message), index)
            for index, message in enumerate(result)
            if isinstance(message, ToolMessage)
            and len(str(message.content)) > len(CUT_NOTE)
        ]
        if not tools:
            break
        cost, index = max(tools)
        message = result[index]
        assert isinstance(message, ToolMessage)  # noqa: S101 - selected above
        text = str(message.content)
        keep = max(0, cost - excess - MESSAGE_OVERHEAD - len(CUT_NOTE)) / max(cost, 1)
        cut = text[: int(len(text) * keep)] + CUT_NOTE
        result[index] = ToolMessage(
            content=cut,
            tool_call_id=message.tool_call_id,
            name=message.name,
            status=message.status,
            id=message.id,
            additional_kwargs=dict(message.additional_kwargs),
        )
        excess -= cost - cost_of(result[index])
    return result


def _message_cost(counter: TokenCounter) -> Callable[[AnyMessage], int]:
    def cost(message: AnyMessage) -> int:
        content = message.content
        text = content if isinstance(content, str) else str(content)
        tokens = counter.count(text) + MESSAGE_OVERHEAD
        if isinstance(message, AIMessage) and message.tool_calls:
            tokens += sum(
                counter.count(str(call["args"])) + 8 for call in message.tool_calls
            )
        return tokens

    return cost


def describe_moment(_hass: HomeAssistant, user_name: str | None) -> list[str]:
    """Return the lines of a message's header: date, time and who is asking.

    The date and the user are repeated only when they change (see
    ContextAssembler._live); the time comes with every message.
    """
    now = dt_util.now()
    lines = [f"Date: {now:%Y-%m-%d} ({now:%A})", f"Time: {now:%H:%M}"]
    if user_name:
        lines.append(f"User: {_one_line(user_name)}")
    return lines


def describe_home(hass: HomeAssistant) -> list[str]:
    """Return the lines a session needs once: the home's name and time zone."""
    name = _one_line(hass.config.location_name)
    return [f"Home: {name}, time zone {hass.config.time_zone}"]
