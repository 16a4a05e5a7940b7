"""The assistant database's schema: one migration per version, applied at open."""

from __future__ import annotations

import sqlite3

from ..const import LOGGER

# Each entry migrates the schema from the previous version to its own.
MIGRATIONS: dict[int, str] = {
    1: """
        CREATE TABLE conversation_sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_key TEXT NOT NULL,
            thread_id TEXT NOT NULL UNIQUE,
            started_at REAL NOT NULL,
            last_activity REAL NOT NULL,
            ended_at REAL
        );
        CREATE INDEX conversation_sessions_open
            ON conversation_sessions (conversation_key, ended_at);
        CREATE TABLE telegram_messages_seen (
            conversation_key TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            seen_at REAL NOT NULL,
            PRIMARY KEY (conversation_key, message_id)
        ) WITHOUT ROWID;
        CREATE TABLE tool_call_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            tool TEXT NOT NULL,
            person TEXT,
            duration_ms REAL NOT NULL,
            outcome TEXT NOT NULL
        );
    """,
    2: """
        CREATE TABLE pending_actions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            token TEXT NOT NULL UNIQUE,
            conversation_key TEXT NOT NULL,
            bot_entry_id TEXT,
            chat_id INTEGER,
            requester TEXT NOT NULL,
            ha_user_id TEXT,
            calls TEXT NOT NULL,
            summary TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            status TEXT NOT NULL,
            message_id INTEGER,
            decided_by TEXT,
            decided_at REAL,
            idempotency_key TEXT UNIQUE,
            outcome TEXT
        );
        CREATE INDEX pending_actions_open
            ON pending_actions (conversation_key, requester, status);
        CREATE TABLE action_audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            telegram_user TEXT,
            chat_id INTEGER,
            ha_user_id TEXT,
            entities TEXT NOT NULL,
            service TEXT NOT NULL,
            policy TEXT NOT NULL,
            confirmation TEXT NOT NULL,
            outcome TEXT NOT NULL,
            latency_ms REAL,
            action_id INTEGER
        );
        CREATE INDEX action_audit_log_user ON action_audit_log (telegram_user, ts);
    """,
    3: """
        CREATE TABLE profile_entries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            person TEXT NOT NULL,
            category TEXT NOT NULL,
            content TEXT NOT NULL,
            confidence REAL NOT NULL,
            source TEXT NOT NULL,
            sensitivity TEXT NOT NULL DEFAULT 'normal',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            reinforced_at REAL NOT NULL,
            UNIQUE (person, content)
        );
        CREATE INDEX profile_entries_person ON profile_entries (person);
        CREATE TABLE conversation_history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL,
            conversation_key TEXT NOT NULL,
            person TEXT,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX conversation_history_session
            ON conversation_history (session_id, id);
        CREATE TABLE interaction_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            person TEXT,
            conversation_key TEXT,
            user_text TEXT NOT NULL,
            reply TEXT NOT NULL,
            tainted INTEGER NOT NULL DEFAULT 0,
            processed INTEGER NOT NULL DEFAULT 0
        );
        ALTER TABLE conversation_sessions ADD COLUMN summary TEXT;
        ALTER TABLE conversation_sessions ADD COLUMN summary_upto INTEGER;
    """,
    4: """
        CREATE TABLE search_audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            person TEXT,
            chat_id INTEGER,
            query TEXT NOT NULL,
            categories TEXT NOT NULL,
            outcome TEXT NOT NULL,
            results INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX search_audit_log_person ON search_audit_log (person, ts);
    """,
    # Documents, their chunks and the canonical float32 copy of each chunk's
    # embedding. The sqlite-vec index (rag_vec) is created at run time, when
    # the extension loads and the embedding dimension is known.
    5: """
        CREATE TABLE rag_documents (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            source TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            embedding_model TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (source, content_hash)
        );
        CREATE INDEX rag_documents_title ON rag_documents (source, title);
        CREATE TABLE rag_chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            document_id INTEGER NOT NULL
                REFERENCES rag_documents (id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            UNIQUE (document_id, ordinal)
        );
        CREATE TABLE rag_vectors (
            chunk_id INTEGER PRIMARY KEY
                REFERENCES rag_chunks (id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX rag_vectors_model ON rag_vectors (model);
        CREATE TABLE rag_vec_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            model TEXT NOT NULL,
            dim INTEGER NOT NULL
        );
    """,
    # Why a pending action asks when outside text made it ask (the taint
    # rule), shown with the request; older rows have none.
    6: """
        ALTER TABLE pending_actions ADD COLUMN reason TEXT;
    """,
    # The append-only history: which turn a summary reaches (it replaces the
    # turns up to it at the next trim), and which answers read outside text.
    7: """
        ALTER TABLE conversation_sessions ADD COLUMN summary_turn TEXT;
        ALTER TABLE conversation_history ADD COLUMN turn_id TEXT;
        ALTER TABLE conversation_history ADD COLUMN tainted INTEGER NOT NULL DEFAULT 0;
    """,
    # Telegram messages received and not answered yet: a stop of Home
    # Assistant in between leaves them here, and the next start tells their
    # senders (nothing is dropped without a word).
    8: """
        CREATE TABLE telegram_in_flight (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_key TEXT NOT NULL,
            bot_entry_id TEXT NOT NULL,
            chat_id INTEGER NOT NULL,
            message_id INTEGER,
            text TEXT NOT NULL,
            received_at REAL NOT NULL
        );
    """,
    # Reminders, timers and watches (tasks/): durable across restarts, judged
    # when they fire as the person who made them.
    9: """
        CREATE TABLE tasks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            owner TEXT NOT NULL,
            owner_name TEXT,
            ha_user_id TEXT,
            conversation_key TEXT,
            bot_entry_id TEXT,
            chat_id INTEGER,
            message TEXT,
            action TEXT,
            fire_at REAL,
            repeat TEXT NOT NULL DEFAULT 'none',
            clock TEXT,
            entity_id TEXT,
            condition TEXT,
            for_minutes REAL,
            until REAL,
            tainted INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            fired_count INTEGER NOT NULL DEFAULT 0,
            last_fired_at REAL,
            outcome TEXT,
            language TEXT
        );
        CREATE INDEX tasks_status ON tasks (status);
        CREATE INDEX tasks_owner ON tasks (owner, status);
    """,
}
SCHEMA_VERSION = max(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the file's schema up to ``SCHEMA_VERSION``, one migration at a time."""
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        msg = f"Database schema {version} is newer than this version knows"
        raise sqlite3.DatabaseError(msg)
    for target in range(version + 1, SCHEMA_VERSION + 1):
        with conn:
            conn.executescript(
                f"BEGIN; {MIGRATIONS[target]} PRAGMA user_version = {target};"
            )
        LOGGER.debug("Migrated the assistant database to schema %s", target)
