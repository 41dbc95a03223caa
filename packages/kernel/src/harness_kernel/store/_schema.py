"""Opening a session store database: pragmas, schema version 2 and the v1 → v2 migration (spec §6.2).

The table, column, index and trigger names are a contract: databases written by other
implementations of the store open here, and ours open there.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import PurePath
from typing import Final, Literal

from harness_kernel.store._records import SESS_SCHEMA_VERSION, SessionStoreError

__all__ = ["SCHEMA_VERSION", "Synchronous", "connect_store"]

SCHEMA_VERSION: Final = 2
BUSY_TIMEOUT_SECONDS: Final = 10.0

Synchronous = Literal["FULL", "NORMAL"]

_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS sessions (
        session_id TEXT PRIMARY KEY,
        task_id TEXT,
        status TEXT NOT NULL CHECK (status IN ('active', 'closed', 'archived')),
        created_at TEXT NOT NULL,
        closed_at TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        next_seq INTEGER NOT NULL DEFAULT 0,
        checkpoint_revision INTEGER NOT NULL DEFAULT 0,
        checkpoint_seq INTEGER,
        checkpoint_payload TEXT,
        checkpoint_updated_at TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS events (
        session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE RESTRICT,
        seq INTEGER NOT NULL,
        global_seq INTEGER,
        event_id TEXT NOT NULL,
        at TEXT NOT NULL,
        actor TEXT,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
)

# Columns a version-1 database may lack, with the definitions ALTER TABLE adds them by.
_SESSION_COLUMNS: Final = (
    ("metadata", "TEXT NOT NULL DEFAULT '{}'"),
    ("next_seq", "INTEGER NOT NULL DEFAULT 0"),
    ("checkpoint_revision", "INTEGER NOT NULL DEFAULT 0"),
    ("checkpoint_seq", "INTEGER"),
    ("checkpoint_payload", "TEXT"),
    ("checkpoint_updated_at", "TEXT"),
)

_MIGRATION_TAIL: Final = (
    # A partly filled column (never written by a v1 store) continues above its maximum.
    """UPDATE events SET global_seq = rowid + (SELECT COALESCE(MAX(global_seq), 0) FROM events)
       WHERE global_seq IS NULL""",
    "CREATE UNIQUE INDEX IF NOT EXISTS events_event_id_uq ON events(event_id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS events_global_seq_uq ON events(global_seq)",
    """CREATE TRIGGER IF NOT EXISTS events_global_seq_required BEFORE INSERT ON events
       WHEN NEW.global_seq IS NULL
       BEGIN SELECT RAISE(ABORT, 'events.global_seq is required'); END""",
    """UPDATE sessions SET next_seq = MAX(next_seq,
           COALESCE((SELECT MAX(seq) + 1 FROM events WHERE events.session_id = sessions.session_id), 0))""",
    """INSERT INTO meta(key, value) VALUES ('next_global_seq',
           (SELECT COALESCE(MAX(global_seq) + 1, 0) FROM events))
       ON CONFLICT(key) DO UPDATE SET
           value = CAST(MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)) AS TEXT)""",
    "INSERT INTO meta(key, value) VALUES ('schema_version', '2') ON CONFLICT(key) DO UPDATE SET value = '2'",
)

_DIGITS: Final = re.compile(r"[0-9]{1,18}")


def connect_store(path: str | PurePath, synchronous: Synchronous) -> sqlite3.Connection:
    """Open (and if needed create or migrate) the database at ``path``; the caller owns the result.

    Raises:
        sqlite3.Error: ``path`` cannot be opened (its directory must exist).
        SessionStoreError: ``SESS_SCHEMA_VERSION`` — the stored version is not an integer or
            is newer than 2. Nothing is changed and the connection is closed.
    """
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_SECONDS * 1000)}")
        _prepare_schema(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def _prepare_schema(connection: sqlite3.Connection) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        for statement in _TABLES:
            connection.execute(statement)
        row = connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = 1 if row is None else _parse_version(row[0])
        if version < SCHEMA_VERSION:
            _migrate_to_v2(connection)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _parse_version(value: object) -> int:
    text = value if type(value) is str else str(value)
    if not _DIGITS.fullmatch(text) or int(text) > SCHEMA_VERSION:
        raise SessionStoreError(SESS_SCHEMA_VERSION, f'unsupported session store schema version "{text}"')
    return int(text)


def _column_names(connection: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in connection.execute(f"PRAGMA table_info({table})")}


def _migrate_to_v2(connection: sqlite3.Connection) -> None:
    present = _column_names(connection, "sessions")
    for name, definition in _SESSION_COLUMNS:
        if name not in present:
            connection.execute(f"ALTER TABLE sessions ADD COLUMN {name} {definition}")
    if "global_seq" not in _column_names(connection, "events"):
        connection.execute("ALTER TABLE events ADD COLUMN global_seq INTEGER")
    for statement in _MIGRATION_TAIL:
        connection.execute(statement)
