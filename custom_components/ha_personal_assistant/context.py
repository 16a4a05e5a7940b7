"""The context assembler: a token budget for everything after the cached prefix."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr
from homeassistant.util import dt as dt_util
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from .agent.prompts import CONTEXT_HEADER, SUMMARY_HEADER
from .security.firewall import mark_untrusted
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


# What an entity's keywords depend on: its name and registry entries.
type _Signature = tuple[
    str, er.RegistryEntry | None, ar.AreaEntry | None, fr.FloorEntry | None
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
    return (state.name, entry, area, floor)


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
        self._lines: dict[str, tuple[State, str, bool]] = {}

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
        for keyword in self._keywords.found(message):
            for entity_id, score in self._by_keyword.get(keyword, ()):
                kinds.setdefault(entity_id, set()).add(score)
        always: list[EntityLine] = []
        relevant: list[EntityLine] = []
        rest: list[EntityLine] = []
        lines = self._lines
        for state in visible:
            cached = lines.get(state.entity_id)
            if cached is None or cached[0] is not state:
                cached = (state, *self._line(state))
                lines[state.entity_id] = cached
            _state, text, is_always = cached
            # Each kind of match counts once: "kitchen light" beats "light".
            score = sum(kinds[state.entity_id]) if state.entity_id in kinds else 0
            line = EntityLine(state.entity_id, text, score, is_always)
            if is_always:
                always.append(line)
            elif score:
                relevant.append(line)
            else:
                rest.append(line)
        relevant.sort(key=lambda line: (-line.score, line.entity_id))
        always.sort(key=lambda line: (-line.score, line.entity_id))
        return [*always, *relevant, *rest]

    def _line(self, state: State) -> tuple[str, bool]:
        """Return an entity's context line, and whether it is always shown."""
        area_label = self._entities[state.entity_id][2]
        # A state written outside the house never enters the context block:
        # a placeholder says how to read it (get_state fences and taints).
        text = f"{state.entity_id} | {state.name} | {context_state(state)}"
        if area_label:
            text += f" | {area_label}"
        always = state.domain in ALWAYS_ON_DOMAINS or (
            state.domain == "binary_sensor"
            and state.attributes.get("device_class") in PRESENCE_CLASSES
        )
        return text, always


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
    """What one turn may add after the cached prefix, before the budget cuts it."""

    header: list[str]
    entities: list[EntityLine]
    profile: str = ""
    documents: list[DocumentChunk] = field(default_factory=list)


@dataclass(slots=True)
class Request:
    """The messages of one model request and their estimated size."""

    messages: list[AnyMessage]
    tokens: int
    # Untrusted text (retrieved documents) was put into the request.
    untrusted: bool
    # The same without the learned correction, to compare with Ollama's count.
    raw_tokens: int


class ContextAssembler:
    """Builds each request of a turn so that it fits the context window."""

    def __init__(
        self,
        *,
        budget: Budget,
        counter: TokenCounter,
        system_prompt: str,
        turn: TurnContext,
    ) -> None:
        """Keep the turn's material; nothing is cut until a request is built."""
        self.budget = budget
        self.counter = counter
        self.system_prompt = system_prompt
        self.turn = turn
        # Fenced in the executor by the caller; here only if it did not.
        self._fenced = [
            chunk.fenced for chunk in fence_chunks(turn.documents) if not chunk.trusted
        ]
        self._plan: tuple[list[str], list[str], list[str]] | None = None
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

    def _plan_context(self, summary: str, history_demand: int, room: int) -> None:
        """Decide once per turn what the context block and documents carry."""
        counter = self.counter
        turn = self.turn
        entity_costs = [counter.count(line.text) + 1 for line in turn.entities]
        # The header and the "(N more ...)" line.
        entity_overhead = counter.count(ENTITIES_HEADER) + ENTITY_FOOTER_TOKENS
        relevant = [
            cost
            for line, cost in zip(turn.entities, entity_costs, strict=True)
            if line.always or line.score
        ]
        trusted = [
            f"- {chunk.title}: {chunk.content}"
            for chunk in turn.documents
            if chunk.trusted
        ]
        doc_demand = sum(counter.count(line) + 1 for line in trusted) + sum(
            counter.count(text) + MESSAGE_OVERHEAD for text in self._fenced
        )
        demands = {
            "history": history_demand,
            "entities": sum(entity_costs) + entity_overhead,
            "documents": doc_demand,
            "profile": sum(
                counter.count(line) + 1 for line in turn.profile.splitlines()
            )
            + counter.count(PROFILE_HEADER),
        }
        granted = share_out(room, demands)
        show_all = granted["entities"] >= demands["entities"]
        if not show_all:
            demands["entities"] = sum(relevant) + entity_overhead
            granted = share_out(room, demands)
        candidates = [
            line for line in turn.entities if show_all or line.always or line.score
        ]
        entity_lines = _fit_lines(
            (line.text for line in candidates),
            granted["entities"] - entity_overhead,
            counter,
        )
        parts = list(turn.header)
        if turn.profile and granted["profile"] > 0:
            profile = _fit_lines(
                turn.profile.splitlines(),
                granted["profile"] - counter.count(PROFILE_HEADER),
                counter,
            )
            if profile:
                parts.append(PROFILE_HEADER)
                parts.extend(profile)
        if summary:
            parts.extend((SUMMARY_HEADER, summary))
        # Trusted knowledge first (it may use the room), then the untrusted
        # chunks get what is left of the documents' share: they are cut first.
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
        if not turn.entities:
            parts.append("No entities are exposed to the assistant.")
        elif entity_lines:
            parts.append(ENTITIES_HEADER)
        self._plan = (parts, entity_lines, fenced)

    def build(  # noqa: PLR0915 - the cut order reads best in one place
        self,
        messages: Sequence[AnyMessage],
        *,
        turn_id: str | None,
        summary: str,
        text_of: Callable[[AnyMessage], str],
    ) -> Request:
        """Return the request for the current state, cut to fit the window."""
        counter = self.counter
        start = next(
            (i for i, message in enumerate(messages) if message.id == turn_id),
            len(messages),
        )
        history = list(messages[:start])
        current = list(messages[start:])
        user = current[0] if current else None
        user_text = text_of(user) if user is not None else ""
        cost_of = self._cost
        fixed = counter.scale(self.budget.fixed)
        rest = sum(cost_of(message) for message in current[1:])
        room = self.budget.limit - fixed - counter.count(user_text) - MESSAGE_OVERHEAD
        if self._plan is None:
            history_demand = sum(cost_of(message) for message in history) + (
                counter.count(summary) + counter.count(SUMMARY_HEADER)
            )
            self._plan_context(summary, history_demand, max(0, room - rest))
        assert self._plan is not None  # noqa: S101 - planned just above
        parts, planned_entities, fenced = self._plan
        # Cut until the request fits: untrusted chunks first, then the oldest
        # turns, then the least relevant entities, then the other context
        # lines from the end. The system prompt and the user's message are
        # never cut.
        documents = list(fenced)
        context_lines = list(parts)
        entity_lines = list(planned_entities)
        history_costs = [cost_of(message) for message in history]
        document_costs = [counter.count(text) + MESSAGE_OVERHEAD for text in documents]
        line_costs = [counter.count(line) + 1 for line in context_lines]
        entity_costs = [counter.count(line) + 1 for line in entity_lines]
        documents_overhead = 2 * MESSAGE_OVERHEAD
        total = (
            sum(history_costs)
            + sum(document_costs)
            + (documents_overhead if documents else 0)
            + sum(line_costs)
            + sum(entity_costs)
            + ENTITY_FOOTER_TOKENS
            + rest
        )
        while total > room:
            if documents:
                documents.pop()
                total -= document_costs.pop()
                if not documents:
                    total -= documents_overhead
            elif history:
                length = _turn_length(history)
                del history[:length]
                total -= sum(history_costs[:length])
                del history_costs[:length]
            elif entity_lines:
                entity_lines.pop()
                total -= entity_costs.pop()
            elif len(context_lines) > len(self.turn.header):
                context_lines.pop()
                total -= line_costs.pop()
            else:
                break
        if total > room:
            # Only this turn's own tool results are left to cut: the longest first.
            current[1:] = _shrink_tool_results(current[1:], total - room, cost_of)
            new_rest = sum(cost_of(message) for message in current[1:])
            total += new_rest - rest
        context_lines = _with_entities(context_lines, entity_lines, self.turn.entities)
        result: list[AnyMessage] = [SystemMessage(content=self.system_prompt), *history]
        if user is not None:
            result.append(
                HumanMessage(
                    content=f"{user_text}\n\n{CONTEXT_HEADER}\n"
                    + "\n".join(context_lines),
                    id=user.id,
                )
            )
        if documents:
            result.extend(_document_messages(user_text, documents))
        result.extend(current[1:])
        tokens = fixed + total + counter.count(user_text) + 2 * MESSAGE_OVERHEAD
        return Request(
            result,
            tokens,
            untrusted=bool(documents),
            raw_tokens=math.ceil(tokens / counter.correction),
        )


def _with_entities(
    lines: list[str], entity_lines: list[str], entities: Sequence[EntityLine]
) -> list[str]:
    """Return the context lines with the entity lines and the count left out."""
    if lines and lines[-1] == ENTITIES_HEADER and not entity_lines:
        lines = lines[:-1]
    result = [*lines, *entity_lines]
    if entities and (left_out := len(entities) - len(entity_lines)):
        result.append(f"({left_out} more: use list_entities)")
    return result


def _document_messages(query: str, documents: Sequence[str]) -> list[AnyMessage]:
    """Return retrieved untrusted chunks as if the model had searched for them."""
    return [
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
        ),
        ToolMessage(
            content="\n\n".join(documents),
            tool_call_id=AUTO_CONTEXT_CALL_ID,
            name=SEARCH_DOCUMENTS,
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
        )
        excess -= cost - cost_of(result[index])
    return result


def _turn_length(history: Sequence[AnyMessage]) -> int:
    """Return how many messages the oldest turn of ``history`` spans."""
    for index, message in enumerate(history[1:], start=1):
        if isinstance(message, HumanMessage):
            return index
    return len(history)


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


def describe_moment(hass: HomeAssistant, user_name: str | None) -> list[str]:
    """Return the header lines: time, home and who is asking."""
    now = dt_util.now()
    lines = [
        f"Time: {now:%Y-%m-%d %H:%M} ({now:%A}), time zone {hass.config.time_zone}",
        f"Home: {hass.config.location_name}",
    ]
    if user_name:
        lines.append(f"User: {user_name}")
    return lines
