"""Broken storage: a locked, full, truncated or garbage file never silences the bot.

Each database file (the assistant database and the LangGraph checkpoint file)
is broken the way it happens at home: another program holds a lock, the disk
fills up, a crash leaves a truncated or garbage file. The user still gets an
answer (without history), a repair issue says what is wrong, risky actions are
refused rather than left unconfirmable, and what was stored before survives
where the file is intact.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sqlite3
import threading
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pytest
from homeassistant.config_entries import ConfigEntryState
from homeassistant.const import EVENT_CALL_SERVICE, EVENT_HOMEASSISTANT_STOP
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import issue_registry as ir
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util

from custom_components.ha_personal_assistant.const import (
    CHECKPOINT_FILE,
    DATABASE_FILE,
    DOMAIN,
    STORAGE_DIR,
)
from custom_components.ha_personal_assistant.store import database as db_module
from custom_components.ha_personal_assistant.store import faults as faults_module
from custom_components.ha_personal_assistant.store import schema as schema_module
from custom_components.ha_personal_assistant.store import sqlite_file as file_module

from .common import (
    async_setup_assistant,
    async_setup_house,
    fire_time_changed,
    wait_until,
)
from .fake_ollama import error_reply
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from collections.abc import Iterator

    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama, OllamaReply
    from .telegram_harness import TelegramHarness

FILES = {"database": DATABASE_FILE, "checkpoints": CHECKPOINT_FILE}
UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}
REMEMBERED = "My cat is called Felix"


@pytest.fixture(autouse=True)
def fast_demo_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the demo locks move at once instead of after two seconds."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A broken file is a warning and a repair issue, never a logged error."""
    yield
    errors = [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("custom_components.ha_personal_assistant")
        and record.levelno >= logging.ERROR
    ]
    assert errors == []


@pytest.fixture
def short_deadlines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give up on a busy file after 1 s and retry it 2 s after a fault."""
    monkeypatch.setattr(db_module, "DB_TIMEOUT", 1.0)
    monkeypatch.setattr(faults_module, "FAULT_BACKOFF", 2.0)
    monkeypatch.setattr(file_module, "OPEN_TIMEOUT", 1.0)


@pytest.fixture
def unlocks(hass: HomeAssistant) -> list[Event[Any]]:
    """Every lock.unlock that HA actually executes."""
    calls: list[Event[Any]] = []

    def record(event: Event[Any]) -> None:
        if (event.data["domain"], event.data["service"]) == ("lock", "unlock"):
            calls.append(event)

    hass.bus.async_listen(EVENT_CALL_SERVICE, record)
    return calls


class FileLock:
    """A second, real SQLite connection holding BEGIN EXCLUSIVE on a file."""

    def __init__(self, path: Path, seconds: float, *, readers: bool = True) -> None:
        """Prepare to lock ``path`` for ``seconds``.

        With ``readers=False`` the other program opened the file first, in
        exclusive locking mode: nobody else can open it, not even to read.
        """
        self.path = path
        self.seconds = seconds
        self.readers = readers
        self.held = threading.Event()
        self.released = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            if not self.readers:
                conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            conn.execute("BEGIN EXCLUSIVE")
            self.held.set()
            self._stop.wait(self.seconds)
            conn.rollback()
        finally:
            conn.close()
            self.released.set()

    async def __aenter__(self) -> Self:
        """Take the lock; return once it is held."""
        self._thread.start()
        for _ in range(500):
            if self.held.is_set():
                return self
            await asyncio.sleep(0.01)
        msg = "could not lock the file"
        raise AssertionError(msg)

    async def __aexit__(self, *_: object) -> None:
        """Release the lock (early, if the test is done with it)."""
        self._stop.set()
        await asyncio.to_thread(self.released.wait, 10)

    def take(self) -> None:
        """Take the lock now, from a callback that cannot await (once)."""
        if not self._thread.is_alive() and not self.held.is_set():
            self._thread.start()
        if not self.held.wait(5):
            msg = "could not lock the file"
            raise AssertionError(msg)


def _path(hass: HomeAssistant, file: str) -> Path:
    return Path(hass.config.path(STORAGE_DIR)) / FILES[file]


def _issue(hass: HomeAssistant, issue_id: str) -> ir.IssueEntry | None:
    return ir.async_get(hass).async_get_issue(DOMAIN, issue_id)


async def _ask(telegram: TelegramHarness, text: str, timeout: float = 15) -> str:  # noqa: ASYNC109
    before = len(telegram.sent_messages())
    await telegram.send_text(text)
    sent = await telegram.wait_for_sent(before + 1, timeout=timeout)
    return str(sent[-1]["text"])


def _prompt_text(fake_ollama: FakeOllama) -> str:
    return "\n".join(
        str(m.get("content", "")) for m in fake_ollama.chat_requests[-1]["messages"]
    )


async def _start(
    hass: HomeAssistant, fake_ollama: FakeOllama, telegram: TelegramHarness
) -> MockConfigEntry:
    """Set up, then have one turn that is stored in both files."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    fake_ollama.reply("Nice cat.")
    assert await _ask(telegram, REMEMBERED) == "Nice cat."
    await hass.async_block_till_done()
    return entry


@pytest.mark.parametrize("file", ["database", "checkpoints"])
@pytest.mark.usefixtures("short_deadlines")
async def test_a_locked_file_still_gets_an_answer_a_repair_and_loses_nothing(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    file: str,
) -> None:
    """Locked by another program: answers go on, a repair shows, history survives."""
    await _start(hass, fake_ollama, telegram)
    async with FileLock(_path(hass, file), seconds=10) as lock:
        fake_ollama.reply("Still here.")
        assert await _ask(telegram, "Are you there?") == "Still here."
        # Answered while the other program still holds the file.
        assert not lock.released.is_set()
        await wait_until(lambda: _issue(hass, f"storage_unavailable_{file}"))
        issue = _issue(hass, f"storage_unavailable_{file}")
        assert issue is not None
        assert issue.translation_key == "storage_unavailable"
        assert str(_path(hass, file)) == issue.translation_placeholders["path"]
    # Nothing was moved aside: a lock is not damage.
    assert not list(_path(hass, file).parent.glob("*.corrupt-*"))
    await asyncio.sleep(2.1)  # the back-off after the fault
    fake_ollama.reply("I remember.")
    assert await _ask(telegram, "What is my cat called?") == "I remember."
    # The conversation from before the lock is still there.
    assert REMEMBERED in _prompt_text(fake_ollama)
    await wait_until(lambda: _issue(hass, f"storage_unavailable_{file}") is None)


async def test_a_real_ten_second_lock_does_not_hold_up_the_answer(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """With the default deadlines, a 10 s lock on the database is not waited out."""
    await _start(hass, fake_ollama, telegram)
    async with FileLock(_path(hass, "database"), seconds=10) as lock:
        started = time.monotonic()
        fake_ollama.reply("Here, without history.")
        reply = await _ask(telegram, "Hello?", timeout=30)
        answered_after = time.monotonic() - started
        lock_still_held = not lock.released.is_set()
    assert reply == "Here, without history."
    assert lock_still_held, f"answered only after the lock ended ({answered_after}s)"
    assert REMEMBERED not in _prompt_text(fake_ollama)
    assert _issue(hass, "storage_unavailable_database") is not None


@pytest.mark.usefixtures("short_deadlines")
async def test_a_full_disk_refuses_risky_actions_and_keeps_answering(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """The database cannot grow: a repair shows, an unlock is refused, not lost."""
    entry = await _start(hass, fake_ollama, telegram)
    database = entry.runtime_data.storage.database

    def fill(conn: sqlite3.Connection) -> None:
        # The disk is "full" at the file's current size: no page can be added.
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        for size in (2000, 200, 20):
            try:
                while True:
                    conn.execute(
                        "INSERT INTO tool_call_log"
                        " (ts, tool, person, duration_ms, outcome)"
                        " VALUES (0, 'filler', NULL, 0, ?)",
                        ("x" * size,),
                    )
            except sqlite3.OperationalError as err:
                if "full" not in str(err):
                    raise

    await database.async_run(fill, timeout=30)
    # A long message needs new pages for its history: the write fails.
    fake_ollama.reply("That is a long story.")
    assert await _ask(telegram, "Once upon a time " * 300) == "That is a long story."
    await wait_until(lambda: _issue(hass, "storage_unavailable_database"))
    issue = _issue(hass, "storage_unavailable_database")
    assert issue is not None
    assert "full" in issue.translation_placeholders["error"]

    fake_ollama.tool_call("call_service", UNLOCK).reply("I need your confirmation.")
    before = len(telegram.sent_messages())
    # A small row may still fit in a page with room left; another program
    # holding the file makes sure this one cannot be stored either.
    async with FileLock(_path(hass, "database"), seconds=10):
        await telegram.send_text("Unlock the front door")
        sent = await telegram.wait_for_sent(before + 2)
        assert "could not store the confirmation request" in sent[-1]["text"]
        assert "nothing was done" in sent[-1]["text"]
        assert "Unlock Front Door" in sent[-1]["text"]
        # Commands that need the database say so instead of failing silently.
        before = len(telegram.sent_messages())
        await telegram.send_command("/new")
        sent = await telegram.wait_for_sent(before + 1)
        assert "storage is unavailable" in sent[-1]["text"]
    # No Confirm button that could never work, and the door stays locked.
    assert not any(m.get("reply_markup") for m in telegram.bot_messages())
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "locked"
    assert unlocks == []

    # Space is freed; after the back-off everything works again.
    await asyncio.sleep(2.1)
    await database.async_run(
        lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"), timeout=5
    )
    await database.async_run(
        lambda conn: conn.execute("DELETE FROM tool_call_log WHERE tool = 'filler'")
    )
    fake_ollama.reply("Back to normal.")
    assert await _ask(telegram, "And now?") == "Back to normal."
    assert REMEMBERED in _prompt_text(fake_ollama)
    assert _issue(hass, "storage_unavailable_database") is None


@pytest.mark.usefixtures("short_deadlines")
async def test_a_full_checkpoint_file_still_answers_and_raises_a_repair(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Checkpoints cannot be saved: the reply still comes, a repair shows."""
    entry = await _start(hass, fake_ollama, telegram)
    conn = entry.runtime_data.storage.checkpoints.saver.inner.conn  # type: ignore[union-attr]
    await conn.execute("CREATE TABLE filler (x BLOB)")
    await conn.commit()
    async with conn.execute("PRAGMA page_count") as cur:
        row = await cur.fetchone()
    assert row is not None
    await conn.execute(f"PRAGMA max_page_count = {row[0]}")
    for size in (2000, 200, 20):
        with pytest.raises(sqlite3.OperationalError, match="full"):  # noqa: PT012
            while True:
                await conn.execute("INSERT INTO filler VALUES (?)", (b"x" * size,))
        await conn.commit()
    fake_ollama.reply("Answered anyway.")
    assert await _ask(telegram, "A question " * 200) == "Answered anyway."
    await wait_until(lambda: _issue(hass, "storage_unavailable_checkpoints"))
    # The assistant database was never affected.
    assert _issue(hass, "storage_unavailable_database") is None


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(len(data) // 2, 4096 + 100)])


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 500)


def _damaged_inside(path: Path) -> None:
    """A page that belongs to nothing: the header is fine, quick_check lists it."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    pages = int.from_bytes(data[28:32], "big")
    data[28:32] = (pages + 1).to_bytes(4, "big")
    path.write_bytes(bytes(data) + bytes(page_size))
    # SQLite's quick_check lists what it found (it does not fail outright).
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute("PRAGMA quick_check").fetchall()
    assert found == [(f"*** in database main ***\nPage {pages + 1} is never used",)]


@pytest.mark.parametrize("file", ["database", "checkpoints"])
@pytest.mark.parametrize(
    "spoil",
    [_truncate, _garbage, _damaged_inside],
    ids=["truncated", "garbage", "damaged-inside"],
)
async def test_a_damaged_file_is_moved_aside_recreated_and_reported(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    file: str,
    spoil: Any,
) -> None:
    """A truncated or garbage file is kept aside, a fresh one made, a repair shown."""
    entry = await _start(hass, fake_ollama, telegram)
    # A pending confirmation lives in the assistant database.
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    before = len(telegram.sent_messages())
    await telegram.send_text("Unlock the front door")
    await telegram.wait_for_sent(before + 2)
    assert await hass.config_entries.async_unload(entry.entry_id)
    path = _path(hass, file)
    await hass.async_add_executor_job(spoil, path)
    damaged = await hass.async_add_executor_job(path.read_bytes)

    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED
    asides = list(path.parent.glob(f"{path.name}.corrupt-*"))
    assert len(asides) == 1
    # The damaged bytes are kept for the user, untouched.
    assert await hass.async_add_executor_job(asides[0].read_bytes) == damaged
    issue_id = "database_recreated" if file == "database" else "checkpoints_recreated"
    issue = _issue(hass, issue_id)
    assert issue is not None
    assert issue.translation_placeholders["path"] == str(asides[0])

    fake_ollama.reply("Fresh start.")
    assert await _ask(telegram, "Hello again") == "Fresh start."
    # The damaged file's conversation is gone, never half-read.
    assert REMEMBERED not in _prompt_text(fake_ollama)
    before = len(telegram.sent_messages())
    await telegram.send_command("/confirm")
    reply = (await telegram.wait_for_sent(before + 1))[-1]
    if file == "checkpoints":
        # The assistant database was intact: the pending unlock is still there.
        assert reply["text"].startswith("Done: Unlock Front Door")
    else:
        assert "Done" not in reply["text"]

    # The repair asks what becomes of the damaged copy; "delete" removes it.
    assert issue.is_fixable
    assert await async_setup_component(hass, "repairs", {})
    flows = hass.data["repairs"]["flow_manager"]
    step = await flows.async_init(DOMAIN, data={"issue_id": issue_id})
    assert step["type"] is FlowResultType.MENU
    assert step["menu_options"] == ["delete", "keep"]
    assert step["description_placeholders"] == {"path": str(asides[0])}
    done = await flows.async_configure(step["flow_id"], {"next_step_id": "delete"})
    assert done["type"] is FlowResultType.CREATE_ENTRY
    assert not await hass.async_add_executor_job(asides[0].exists)
    assert _issue(hass, issue_id) is None
    # The fresh file is untouched.
    assert await hass.async_add_executor_job(path.exists)


async def _damaged_database(
    hass: HomeAssistant, fake_ollama: FakeOllama, telegram: TelegramHarness
) -> tuple[MockConfigEntry, Path, Path]:
    """Start, spoil the database, start again: the entry, the file, its copy."""
    entry = await _start(hass, fake_ollama, telegram)
    assert await hass.config_entries.async_unload(entry.entry_id)
    path = _path(hass, "database")
    await hass.async_add_executor_job(_garbage, path)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    (aside,) = await hass.async_add_executor_job(
        lambda: list(path.parent.glob(f"{path.name}.corrupt-*"))
    )
    return entry, path, aside


async def _answer_repair(hass: HomeAssistant, choice: str) -> None:
    """Open the database_recreated repair and pick ``choice`` in its menu."""
    assert await async_setup_component(hass, "repairs", {})
    flows = hass.data["repairs"]["flow_manager"]
    step = await flows.async_init(DOMAIN, data={"issue_id": "database_recreated"})
    done = await flows.async_configure(step["flow_id"], {"next_step_id": choice})
    assert done["type"] is FlowResultType.CREATE_ENTRY


async def test_a_kept_damaged_copy_stays_and_the_issue_goes(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Keep: the copy stays for the user to inspect; the issue is solved."""
    _, _, aside = await _damaged_database(hass, fake_ollama, telegram)
    await _answer_repair(hass, "keep")
    assert await hass.async_add_executor_job(aside.exists)
    assert _issue(hass, "database_recreated") is None


async def test_a_damaged_copy_is_deleted_while_the_assistant_is_off(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The repair still works with the entry disabled: the copy goes, the rest stays."""
    entry, path, aside = await _damaged_database(hass, fake_ollama, telegram)
    assert await hass.config_entries.async_unload(entry.entry_id)
    await _answer_repair(hass, "delete")
    assert not await hass.async_add_executor_job(aside.exists)
    assert await hass.async_add_executor_job(path.exists)
    assert _issue(hass, "database_recreated") is None


@pytest.mark.usefixtures("short_deadlines")
async def test_a_database_locked_at_startup_is_kept_and_used(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Locked while HA starts: the entry loads, answers, and the file is kept."""
    entry = await _start(hass, fake_ollama, telegram)
    assert await hass.config_entries.async_unload(entry.entry_id)
    path = _path(hass, "database")
    async with FileLock(path, seconds=10):
        await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        assert entry.state is ConfigEntryState.LOADED
        fake_ollama.reply("Answered while locked.")
        assert await _ask(telegram, "Hello?") == "Answered while locked."
    assert not list(path.parent.glob("*.corrupt-*"))
    assert _issue(hass, "database_recreated") is None
    await asyncio.sleep(2.1)  # the back-off after the fault
    fake_ollama.reply("Remembered.")
    assert await _ask(telegram, "What is my cat called?") == "Remembered."
    assert REMEMBERED in _prompt_text(fake_ollama)


async def test_storage_busy_at_setup_retries_and_then_loads(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A migration blocked by another program's lock: setup retried, then loads.

    After an update the schema must be migrated, which needs the write lock:
    while a backup holds it, setup stops with "storage is busy" (the file is
    kept as it is) and Home Assistant sets the entry up again later.
    """
    entry = await _start(hass, fake_ollama, telegram)
    assert await hass.config_entries.async_unload(entry.entry_id)
    path = _path(hass, "database")
    # The database as the previous version left it: one migration to go.
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP TABLE tasks")
        conn.execute(f"PRAGMA user_version = {schema_module.SCHEMA_VERSION - 1}")
        conn.commit()
    # Give up on the lock within a fraction of a second instead of ten.
    monkeypatch.setattr(file_module, "OPEN_TIMEOUT", 0.3)
    monkeypatch.setattr(
        file_module,
        "WAL_PRAGMAS",
        tuple(
            "PRAGMA busy_timeout=300" if p.startswith("PRAGMA busy_timeout") else p
            for p in file_module.WAL_PRAGMAS
        ),
    )
    async with FileLock(path, seconds=30):
        await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        assert entry.state is ConfigEntryState.SETUP_RETRY
        assert "storage cannot be opened right now" in str(entry.reason)
    assert not list(path.parent.glob("*.corrupt-*"))
    # Home Assistant tries again on its own; the lock is gone by then.
    fire_time_changed(hass, dt_util.utcnow() + timedelta(minutes=5))
    await wait_until(lambda: entry.state is ConfigEntryState.LOADED)
    await hass.async_block_till_done()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == (
            schema_module.SCHEMA_VERSION
        )
    fake_ollama.reply("Remembered.")
    assert await _ask(telegram, "What is my cat called?") == "Remembered."
    assert REMEMBERED in _prompt_text(fake_ollama)


async def test_a_skipped_checkpoint_file_leaves_no_call_unawaited(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    recwarn: pytest.WarningsRecorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the file is skipped, no call to it is made and left hanging."""
    # Debug records would keep the skipped call alive past the test.
    caplog.set_level(logging.INFO, logger="custom_components.ha_personal_assistant")
    entry = await _start(hass, fake_ollama, telegram)
    # Locked a moment ago: the file is skipped for FAULT_BACKOFF seconds.
    entry.runtime_data.storage.checkpoints.gate.failed("database is locked")
    fake_ollama.reply("Answered without the saved conversation.")
    assert await _ask(telegram, "Hello?") == "Answered without the saved conversation."
    await hass.async_block_till_done()
    # A call never awaited is reported when it is collected.
    gc.collect()
    never_awaited = [
        str(warning.message)
        for warning in recwarn
        if "was never awaited" in str(warning.message)
    ]
    assert never_awaited == []


async def test_a_saved_conversation_that_cannot_be_read_starts_afresh(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A checkpoint this version cannot decode: answered, then saved anew.

    As after a LangGraph format change or a damaged row: the conversation
    goes on from the next message instead of failing every turn until /new.
    """
    entry = await _start(hass, fake_ollama, telegram)
    conn = entry.runtime_data.storage.checkpoints.saver.inner.conn  # type: ignore[union-attr]
    await conn.execute("UPDATE checkpoints SET checkpoint = ?", (b"\xc1\x00garbage",))
    await conn.commit()
    fake_ollama.reply("Answered anyway.")
    assert await _ask(telegram, "Are you there?") == "Answered anyway."
    assert "cannot be read" in caplog.text
    # The turn was saved in place of the unreadable one: the next one has it.
    fake_ollama.reply("Still here.")
    assert await _ask(telegram, "And now?") == "Still here."
    prompt = _prompt_text(fake_ollama)
    assert "Are you there?" in prompt
    assert "Answered anyway." in prompt
    # No repair: the file itself is fine.
    assert _issue(hass, "storage_unavailable_checkpoints") is None


@pytest.mark.usefixtures("short_deadlines")
async def test_a_checkpoint_file_that_does_not_answer_is_given_up_on(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The file's connection is stuck in a long job: answered, a repair shows.

    As while a VACUUM of a large checkpoint file holds its connection: the
    turn stops waiting for it after the deadline and answers without the
    saved conversation, which is still there afterwards.
    """
    monkeypatch.setattr(db_module, "DB_TIMEOUT", 0.2)
    monkeypatch.setattr(faults_module, "FAULT_BACKOFF", 0.0)
    entry = await _start(hass, fake_ollama, telegram)
    saver = entry.runtime_data.storage.checkpoints.saver
    assert saver is not None
    async with saver.inner.lock:
        fake_ollama.reply("Here, without it.")
        started = time.monotonic()
        assert await _ask(telegram, "Hello?") == "Here, without it."
        assert time.monotonic() - started < 5
        assert REMEMBERED not in _prompt_text(fake_ollama)
        issue = _issue(hass, "storage_unavailable_checkpoints")
        assert issue is not None
        assert issue.translation_placeholders["error"] == "no answer within 0.2 s"
    fake_ollama.reply("I remember.")
    assert await _ask(telegram, "What is my cat called?") == "I remember."
    assert REMEMBERED in _prompt_text(fake_ollama)
    assert _issue(hass, "storage_unavailable_checkpoints") is None


@pytest.mark.usefixtures("short_deadlines")
async def test_a_model_failure_while_the_checkpoint_file_is_taken_loses_nothing(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The model fails while another program takes the file: said, nothing lost.

    The failed turn's partial state cannot be stored: the user is told the
    model failed (not that storage did), a repair shows, and the
    conversation from before is continued once the file is free again.
    """
    monkeypatch.setattr(db_module, "DB_TIMEOUT", 0.3)
    monkeypatch.setattr(faults_module, "FAULT_BACKOFF", 0.0)
    await _start(hass, fake_ollama, telegram)
    lock = FileLock(_path(hass, "checkpoints"), seconds=30)

    def fail(_request: dict[str, Any]) -> OllamaReply:
        # Taken after the turn loaded the conversation, before it is saved.
        lock.take()
        return error_reply(500, "llama runner process has terminated")

    fake_ollama.default = fail
    try:
        assert "reported an error" in await _ask(telegram, "Are you there?")
        issue = _issue(hass, "storage_unavailable_checkpoints")
        assert issue is not None
        assert "locked" in issue.translation_placeholders["error"]
        # The failed step's writes were dropped quietly (a debug line, no error).
        assert caplog.text.count("Pending writes not saved: database is locked") == 1
    finally:
        await lock.__aexit__()
    fake_ollama.default = lambda _request: "I remember."
    assert await _ask(telegram, "What is my cat called?") == "I remember."
    assert REMEMBERED in _prompt_text(fake_ollama)
    assert _issue(hass, "storage_unavailable_checkpoints") is None


@pytest.mark.usefixtures("short_deadlines")
async def test_a_checkpoint_file_held_at_startup_retries_setup_and_is_kept(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Another program holds the file so that not even reading works at start.

    The file is not damaged: it is neither moved aside nor replaced; setup
    is retried and then continues the saved conversation.
    """
    entry = await _start(hass, fake_ollama, telegram)
    assert await hass.config_entries.async_unload(entry.entry_id)
    path = _path(hass, "checkpoints")
    async with FileLock(path, seconds=30, readers=False):
        await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        assert entry.state is ConfigEntryState.SETUP_RETRY
        assert "storage cannot be opened right now" in str(entry.reason)
    assert not list(path.parent.glob("*.corrupt-*"))
    assert _issue(hass, "checkpoints_recreated") is None
    fire_time_changed(hass, dt_util.utcnow() + timedelta(minutes=5))
    await wait_until(lambda: entry.state is ConfigEntryState.LOADED)
    await hass.async_block_till_done()
    fake_ollama.reply("Remembered.")
    assert await _ask(telegram, "What is my cat called?") == "Remembered."
    assert REMEMBERED in _prompt_text(fake_ollama)


@pytest.mark.usefixtures("short_deadlines")
async def test_a_service_on_a_locked_file_says_so(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """clear_history while a backup holds the file: a translated message.

    It reaches the caller (an automation, the developer tools) as a message
    naming the cause, not as an unexpected error.
    """
    await _start(hass, fake_ollama, telegram)
    async with FileLock(_path(hass, "database"), seconds=10):
        with pytest.raises(HomeAssistantError) as locked:
            await hass.services.async_call(
                DOMAIN, "clear_history", {}, blocking=True, return_response=True
            )
    assert locked.value.translation_key == "storage_unavailable_service"
    assert str(locked.value) == (
        "The assistant's storage is unavailable right now (database is locked); "
        "try again in a moment"
    )


async def test_a_service_while_home_assistant_stops_says_so(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """An automation on HA's stop asks for a profile: the storage is closed."""
    await _start(hass, fake_ollama, telegram)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STOP)
    await hass.async_block_till_done()
    with pytest.raises(HomeAssistantError) as closed:
        await hass.services.async_call(
            DOMAIN,
            "export_profile",
            {"person": f"telegram:{ALICE_ID}"},
            blocking=True,
            return_response=True,
        )
    assert closed.value.translation_key == "storage_unavailable_service"
    assert str(closed.value) == (
        "The assistant's storage is unavailable right now "
        "(The executor is shut down); try again in a moment"
    )
