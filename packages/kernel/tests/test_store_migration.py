"""Opening version-1 databases (migration to version 2) and refusing unknown versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness_kernel.events import create_event, serialize_event
from harness_kernel.store import SESS_SCHEMA_VERSION, SessionStoreError, SqliteSessionStore

AT = "2024-05-01T12:30:00.125Z"


def build_v1(path: Path, *, version: str | None = None) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.executescript(
            """
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE sessions(session_id TEXT PRIMARY KEY, task_id TEXT,
              status TEXT NOT NULL CHECK (status IN ('active','closed','archived')),
              created_at TEXT NOT NULL, closed_at TEXT);
            CREATE TABLE events(session_id TEXT NOT NULL REFERENCES sessions(session_id),
              seq INTEGER NOT NULL, event_id TEXT NOT NULL, at TEXT NOT NULL, actor TEXT,
              type TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (session_id, seq));
            INSERT INTO sessions VALUES ('a', 't', 'active', '2024-01-01T00:00:00Z', NULL);
            INSERT INTO sessions VALUES ('b', NULL, 'closed', '2024-01-02T00:00:00Z', '2024-01-03T00:00:00Z');
            """
        )
        for session, seq, event_id in (("a", 0, "a0"), ("b", 0, "b0"), ("a", 3, "a3"), ("b", 1, "b1")):
            event = create_event("session.created", {"sessionId": session}, event_id=event_id, at=AT)
            connection.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, NULL, 'session.created', ?)",
                (session, seq, event_id, AT, serialize_event(event).decode()),
            )
        if version is not None:
            connection.execute("INSERT INTO meta VALUES ('schema_version', ?)", (version,))
        connection.commit()
    finally:
        connection.close()


def columns(connection: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]


@pytest.mark.parametrize("version", [None, "1"])
async def test_a_v1_database_is_migrated_keeping_seqs_and_backfilling_global_seq(
    tmp_path: Path, version: str | None
) -> None:
    path = tmp_path / "v1.db"
    build_v1(path, version=version)
    async with SqliteSessionStore(path) as store:
        a = await store.get("a")
        assert (a.next_seq, a.metadata, a.checkpoint_revision) == (4, {}, 0)
        assert [e.seq for e in await store.slice("a", 0)] == [0, 3]
        audit = await store.read_audit_events()
        assert [e.global_seq for e in audit.events] == [1, 2, 3, 4]
        assert [e.event.event_id for e in audit.events] == ["a0", "b0", "a3", "b1"]
        appended = await store.append("a", create_event("session.created", {"sessionId": "a"}, event_id="a4"))
        assert (appended.seq, appended.global_seq) == (4, 5)
    connection = sqlite3.connect(path)
    try:
        assert "global_seq" in columns(connection, "events")
        assert {"metadata", "next_seq", "checkpoint_revision", "checkpoint_seq", "checkpoint_payload"} <= set(
            columns(connection, "sessions")
        )
        meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
        assert meta == {"schema_version": "2", "next_global_seq": "6"}
        with pytest.raises(sqlite3.IntegrityError):
            connection.execute(
                "INSERT INTO events(session_id, seq, event_id, at, type, payload)"
                " VALUES ('a', 9, 'z', 'x', 't', '{}')"
            )
    finally:
        connection.close()


@pytest.mark.parametrize("version", ["x", "3", "2.0", ""])
async def test_an_unknown_schema_version_is_refused_without_changes(tmp_path: Path, version: str) -> None:
    path = tmp_path / "v.db"
    build_v1(path, version=version)
    store = SqliteSessionStore(path)
    with pytest.raises(SessionStoreError) as caught:
        await store.get("a")
    assert caught.value.code == SESS_SCHEMA_VERSION
    await store.aclose()
    connection = sqlite3.connect(path)
    try:
        assert "global_seq" not in columns(connection, "events")
    finally:
        connection.close()
