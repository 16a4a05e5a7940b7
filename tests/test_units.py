"""Tests of the plain-Python parts: message splitting, history trimming, storage."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from custom_components.ha_personal_assistant.agent.graph import (
    compact_history,
    message_text,
    new_turn_id,
)
from custom_components.ha_personal_assistant.executor import BlockingExecutor
from custom_components.ha_personal_assistant.store.database import (
    SCHEMA_VERSION,
    Database,
)
from custom_components.ha_personal_assistant.telegram import split_message

if TYPE_CHECKING:
    from pathlib import Path


def test_short_reply_is_one_part() -> None:
    """A reply under the limit is sent as it is."""
    assert split_message("  Hello there  ") == ["Hello there"]


def test_long_reply_splits_on_paragraphs_within_the_limit() -> None:
    """Parts stay within 4096 characters and break between paragraphs."""
    paragraph = "word " * 300  # 1500 characters
    text = "\n\n".join(paragraph.strip() for _ in range(6))
    parts = split_message(text)
    assert len(parts) == 3
    assert all(len(part) <= 4096 for part in parts)
    assert all(part.endswith("word") for part in parts)
    assert " ".join(parts).split() == text.split()


def test_text_without_spaces_is_cut_hard() -> None:
    """Even one endless word is delivered whole, in limit-sized parts."""
    parts = split_message("x" * 10000)
    assert [len(p) for p in parts] == [4096, 4096, 1808]


def test_reasoning_is_removed_from_answers() -> None:
    """A <think> block never reaches the user."""
    message = AIMessage(content="<think>hmm</think>\nIt is on.")
    assert message_text(message) == "It is on."


def test_history_keeps_user_messages_and_final_answers_of_recent_turns() -> None:
    """Tool traffic of finished turns is dropped and only the last turns stay."""
    messages = []
    for index in range(10):
        messages.append(HumanMessage(content=f"question {index}", id=new_turn_id()))
        messages.append(
            AIMessage(
                content="",
                tool_calls=[{"name": "get_state", "args": {}, "id": f"c{index}"}],
            )
        )
        messages.append(ToolMessage(content="{}", tool_call_id=f"c{index}"))
        messages.append(AIMessage(content=f"answer {index}"))
    kept = compact_history(messages, 3)
    assert [m.content for m in kept] == [
        "question 7",
        "answer 7",
        "question 8",
        "answer 8",
        "question 9",
        "answer 9",
    ]


@pytest.fixture
async def database(tmp_path: Path):
    """An opened assistant database on its own executor."""
    executor = BlockingExecutor()
    db = Database(tmp_path / "assistant.db", executor)
    await db.async_open()
    yield db
    await db.async_close()
    executor.shutdown()


async def test_session_continues_until_the_timeout(database: Database) -> None:
    """Messages within the timeout share a thread; silence starts a new one."""
    first = await database.async_current_session("chat", 1000.0, 60)
    again = await database.async_current_session("chat", 1050.0, 60)
    later = await database.async_current_session("chat", 1200.0, 60)
    other = await database.async_current_session("other", 1200.0, 60)
    assert first.is_new
    assert again.thread_id == first.thread_id
    assert not again.is_new
    assert later.is_new
    assert later.thread_id != first.thread_id
    assert other.thread_id not in (first.thread_id, later.thread_id)


async def test_new_session_replaces_the_open_one(database: Database) -> None:
    """/new gives the chat a fresh thread right away."""
    first = await database.async_current_session("chat", 1000.0, 600)
    fresh = await database.async_new_session("chat", 1001.0)
    current = await database.async_current_session("chat", 1002.0, 600)
    assert fresh.thread_id != first.thread_id
    assert current.thread_id == fresh.thread_id


async def test_a_message_id_is_handled_once(database: Database) -> None:
    """An edit or a replay of the same message id is recognized."""
    assert await database.async_mark_seen("chat", 5, 1.0)
    assert not await database.async_mark_seen("chat", 5, 2.0)
    assert await database.async_mark_seen("other", 5, 2.0)
    await database.async_prune(seen_before=10.0)
    assert await database.async_mark_seen("chat", 5, 11.0)


async def test_schema_version_is_recorded(tmp_path: Path, database: Database) -> None:
    """The file carries the schema version migrations start from."""
    conn = sqlite3.connect(database.path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


async def test_a_corrupt_database_is_moved_aside_and_recreated(tmp_path: Path) -> None:
    """A damaged file is kept for the user and a working one takes its place."""
    path = tmp_path / "assistant.db"
    path.write_bytes(b"this is not a database" * 100)
    executor = BlockingExecutor()
    db = Database(path, executor)
    try:
        await db.async_open()
        assert db.recreated_from is not None
        assert db.recreated_from.read_bytes().startswith(b"this is not")
        session = await db.async_current_session("chat", 1.0, 60)
        assert session.is_new
    finally:
        await db.async_close()
        executor.shutdown()
