"""The fast path on Home Assistant's own intent test sentences, beside HA's agent.

Usage::

    git clone https://github.com/home-assistant/intents /tmp/intents
    .venv/bin/python bench/fast_path.py /tmp/intents [en de]

Builds the fixture house of ``tests/<language>/_fixtures.yaml`` (floors,
areas, entities with their states, all exposed to Assist) in a real Home
Assistant, then sends every sentence of ``tests/<language>/*.yaml`` to HA's
built-in agent and to this integration's agent (Assist), whose model (the
fake server) answers nothing useful ("OK"). A sentence counts for an agent
when its answer is the response the test expects; for ours only when no
model request was made. Actions the policy restricts (unlock, open a garage
door) count when ours asked for Confirm with no model request. Service calls
reach state-only entities, so the fixture states never change between
sentences. Prints per intent, then the totals, p50 and p95 per turn.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ha_bench import machine, percentile, quiet_logs, run_pytest

ENV_PATH = "FAST_PATH_INTENTS"
ENV_LANGUAGES = "FAST_PATH_LANGUAGES"

if __name__ == "__main__":
    if len(sys.argv) < 2:  # noqa: PLR2004 - the script and the path
        sys.exit(__doc__)
    os.environ[ENV_PATH] = sys.argv[1]
    os.environ[ENV_LANGUAGES] = " ".join(sys.argv[2:]) or "en de"
    # pytest imports this file again, after its plugins, for the fixtures.
    sys.exit(run_pytest(str(Path(__file__).resolve())))

# ruff: noqa: E402, I001, F811 -- import order loads this integration; fixtures are imported
import custom_components  # noqa: F401
import pytest
import yaml
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.core import Context
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import chat_session, intent
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr
from homeassistant.setup import async_setup_component

from custom_components.ha_personal_assistant.const import (
    CONF_FAST_PATH,
    DOMAIN,
    EVENT_ACTION_EXECUTED,
)
from tests.common import async_setup_assistant
from tests.conftest import auto_enable_custom_integrations, hass_config_dir  # noqa: F401
from tests.fake_ollama import fake_ollama  # noqa: F401
from tests.telegram_harness import telegram, telegram_api  # noqa: F401

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from tests.fake_ollama import FakeOllama
    from tests.telegram_harness import TelegramHarness

# Components whose services and intents the fixture house uses.
COMPONENTS = (
    "homeassistant",
    "conversation",
    "intent",
    "light",
    "switch",
    "fan",
    "cover",
    "lock",
    "valve",
    "climate",
    "media_player",
    "vacuum",
    "lawn_mower",
    "humidifier",
    "weather",
    "sensor",
    "binary_sensor",
    "scene",
    "script",
    "todo",
)
CONFIRM_MARK = "Please confirm"
# Restricted actions on the fixture house's lock (lock.front_door): the
# fixture tests' own unlock sentences are worded for a newer HA than 2026.10.
RESTRICTED = {
    "en": ("unlock the front door", "open the front door lock"),
    "de": ("entsperre die Haustür", "entriegle die Haustür"),
}
TARGET_SHARE = 0.95
TARGET_P95_RATIO = 2.0


def _languages() -> list[str]:
    return os.environ.get(ENV_LANGUAGES, "en de").split()


def _read(root: Path, language: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = root / "tests" / language
    fixtures = yaml.safe_load((folder / "_fixtures.yaml").read_text("utf-8"))
    cases: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):
        if not path.name.startswith("_"):
            cases.extend(yaml.safe_load(path.read_text("utf-8")).get("tests", []))
    return fixtures, cases


async def _build_house(hass: HomeAssistant, fixtures: dict[str, Any]) -> None:
    floors = fr.async_get(hass)
    areas = ar.async_get(hass)
    entities = er.async_get(hass)
    floor_ids: dict[str, str] = {}
    for floor in fixtures.get("floors") or []:
        floor_ids[floor["id"]] = floors.async_create(floor["name"]).floor_id
    area_ids: dict[str, str] = {}
    for area in fixtures.get("areas") or []:
        area_ids[area["id"]] = areas.async_create(
            area["name"], floor_id=floor_ids.get(area.get("floor", ""))
        ).id
    for entity in fixtures.get("entities") or []:
        domain, object_id = entity["id"].split(".", 1)
        entry = entities.async_get_or_create(
            domain, "fast_path_bench", entity["id"], suggested_object_id=object_id
        )
        entities.async_update_entity(
            entry.entity_id, area_id=area_ids.get(entity.get("area", ""))
        )
        state = entity.get("state", "unknown")
        if isinstance(state, dict):
            # {"in": what a sentence says, "out": the entity's real state}
            state = state.get("out", "unknown")
        hass.states.async_set(
            entry.entity_id,
            str(state),
            {**(entity.get("attributes") or {}), "friendly_name": entity["name"]},
        )
        async_expose_entity(hass, "conversation", entry.entity_id, True)  # noqa: FBT003


def _expected(case: dict[str, Any]) -> set[str]:
    response = case.get("response")
    if response is None:
        return set()
    responses = response if isinstance(response, list) else [response]
    return {" ".join(str(r).split()) for r in responses}


def _speech(result: conversation.ConversationResult) -> str:
    speech = result.response.speech.get("plain", {}).get("speech", "")
    return " ".join(str(speech).split())


@pytest.fixture
def telegram_chat_ids() -> list[int]:
    """Alice's private chat (the bench talks through Assist)."""
    return [111111111]


@pytest.fixture(params=_languages())
def language(request: pytest.FixtureRequest) -> str:
    """One run per language."""
    return str(request.param)


async def test_fast_path(  # noqa: PLR0912, PLR0915 - one measured run, printed
    hass: HomeAssistant,
    telegram: TelegramHarness,  # noqa: ARG001 - telegram_bot is set up, as in use
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
    language: str,
) -> None:
    """Measure and print; asserts nothing but that the run completed."""
    root = Path(os.environ[ENV_PATH])
    fixtures, cases = _read(root, language)
    hass.config.language = language
    for component in COMPONENTS:
        await async_setup_component(hass, component, {})
    await hass.async_block_till_done()
    await _build_house(hass, fixtures)
    entry = await async_setup_assistant(hass, fake_ollama, **{CONF_FAST_PATH: True})
    ours = er.async_get(hass).async_get_entity_id(
        "conversation", DOMAIN, entry.entry_id
    )
    quiet_logs()
    import logging  # noqa: PLC0415

    reasons: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            reasons.append(record.getMessage())

    package = logging.getLogger("custom_components.ha_personal_assistant")
    if os.environ.get("FAST_PATH_DEBUG"):
        package.setLevel(logging.DEBUG)
        package.addHandler(_Collect())
    context = Context(user_id=hass_admin_user.id)

    async def ask(agent_id: str | None, text: str) -> tuple[str, float]:
        started = time.perf_counter()
        result = await conversation.async_converse(
            hass, text, None, context, language=language, agent_id=agent_id
        )
        return _speech(result), time.perf_counter() - started

    async def ask_strict(text: str) -> tuple[str, float]:
        """HA's strict stage alone: what "prefer handling commands locally" runs."""
        started = time.perf_counter()
        user_input = conversation.ConversationInput(
            text=text,
            context=context,
            conversation_id=None,
            device_id=None,
            satellite_id=None,
            language=language,
            agent_id="conversation.home_assistant",
        )
        with (
            chat_session.async_get_chat_session(hass) as session,
            conversation.async_get_chat_log(hass, session, user_input) as chat_log,
        ):
            try:
                response = await conversation.async_handle_intents(
                    hass, user_input, chat_log
                )
            except intent.IntentError:
                # An intent no component here handles (HassBroadcast).
                response = None
        speech = "" if response is None else response.speech.get("plain", {})
        text = " ".join(str((speech or {}).get("speech", "")).split())
        return text, time.perf_counter() - started

    executed: list[Any] = []
    hass.bus.async_listen(EVENT_ACTION_EXECUTED, executed.append)

    # Warm-up: each agent loads its intents once.
    await ask(None, "what time is it")
    await ask(ours, "what time is it")
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ha_times: list[float] = []
    strict_times: list[float] = []
    our_times: list[float] = []
    misses: list[str] = []
    for case in cases:
        name = case.get("intent", {}).get("name", "?")
        expected = _expected(case)
        for sentence in case.get("sentences", []):
            row = rows[name]
            row["sentences"] += 1
            speech, seconds = await ask(None, sentence)
            ha_ok = speech in expected
            if ha_ok:
                row["ha"] += 1
                ha_times.append(seconds)
            speech, seconds = await ask_strict(sentence)
            strict_ok = speech in expected
            if strict_ok:
                row["strict"] += 1
                strict_times.append(seconds)
            before = len(fake_ollama.chat_requests)
            reasons.clear()
            speech, seconds = await ask(ours, sentence)
            calls = len(fake_ollama.chat_requests) - before
            if calls == 0:
                our_times.append(seconds)
            fast = calls == 0 and (speech in expected or CONFIRM_MARK in speech)
            if fast:
                row["ours" if speech in expected else "confirm"] += 1
                row["both"] += ha_ok
                row["both_strict"] += strict_ok
            else:
                row["model"] += calls > 0
                if strict_ok:
                    misses.append(
                        f"{name}: {sentence!r} -> {speech[:60]!r} {reasons[-2:]}"
                    )
            await hass.async_block_till_done()

    unlocks_run = [e for e in executed if e.data["service"] in ("unlock", "open")]
    held: list[str] = []
    for sentence in RESTRICTED.get(language, ()):
        before, ran = len(fake_ollama.chat_requests), len(executed)
        speech, _ = await ask(ours, sentence)
        asked = CONFIRM_MARK in speech and "lock.front_door" in speech
        calls = len(fake_ollama.chat_requests) - before
        held.append(
            f"  {sentence!r}: {'asks for Confirm' if asked else 'does NOT ask'}, "
            f"{calls} model requests, {len(executed) - ran} actions run"
        )

    print()
    print(f"bench/fast_path.py  {language}  {machine()}")
    print(
        f"{'intent':32} {'sent':>5} {'HA':>5} {'HAstr':>5} {'ours':>5} "
        f"{'conf':>5} {'model':>5}"
    )
    total: dict[str, int] = defaultdict(int)
    for name in sorted(rows):
        row = rows[name]
        for key, value in row.items():
            total[key] += value
        print(
            f"{name:32} {row['sentences']:5} {row['ha']:5} {row['strict']:5} "
            f"{row['ours']:5} {row['confirm']:5} {row['model']:5}"
        )
    share = total["both"] / max(1, total["ha"])
    ha_p95, our_p95 = percentile(ha_times, 0.95), percentile(our_times, 0.95)
    print(
        f"{'total':32} {total['sentences']:5} {total['ha']:5} {total['strict']:5} "
        f"{total['ours']:5} {total['confirm']:5} {total['model']:5}"
    )
    strict_share = total["both_strict"] / max(1, total["strict"])
    print(
        f"without the model (answered, or held for Confirm), of HA's strict "
        f"stage's passes: {total['both_strict']}/{total['strict']} = "
        f"{strict_share:.1%}; of the whole agent's (with its fuzzy fallback): "
        f"{total['both']}/{total['ha']} = {share:.1%} (target {TARGET_SHARE:.0%})"
    )
    print(
        f"HA strict stage p50 {percentile(strict_times, 0.5) * 1000:.1f} ms, p95 "
        f"{percentile(strict_times, 0.95) * 1000:.1f} ms"
    )
    print(
        f"per turn: HA p50 {percentile(ha_times, 0.5) * 1000:.1f} ms, p95 "
        f"{ha_p95 * 1000:.1f} ms; ours (no model) p50 "
        f"{percentile(our_times, 0.5) * 1000:.1f} ms, p95 {our_p95 * 1000:.1f} ms; "
        f"p95 ratio {our_p95 / max(ha_p95, 1e-9):.2f} (target <= {TARGET_P95_RATIO})"
    )
    print("restricted actions (policy: confirm), sent to ours on their own:")
    for line in held:
        print(line)
    print(f"unlocks or opens run without Confirm in the whole run: {len(unlocks_run)}")
    if misses:
        print(f"HA strict passes ours missed ({len(misses)}), first 40:")
        for line in misses[:40]:
            print(f"  {line}")
