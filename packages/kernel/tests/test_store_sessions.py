"""Creating, reopening, getting and listing sessions in a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness_kernel.events import create_event
from harness_kernel.store import (
    SESS_INVALID_RECORD,
    SESS_NOT_FOUND,
    SessionStoreError,
    SqliteSessionStore,
)


async def test_create_defaults_to_an_active_session_with_a_generated_id(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        record = await store.create()
        assert record.session_id.startswith("sess-")
        assert record.status == "active"
        assert record.metadata == {}
        assert record.next_seq == 0
        assert record.closed_at is None
        assert await store.get(record.session_id) == record


async def test_reopen_keeps_created_at_and_fills_a_missing_task_id(tmp_path: Path) -> None:
    async with SqliteSessionStore(str(tmp_path / "s.db")) as store:
        first = await store.create("s1", created_at="2024-01-01T00:00:00Z", metadata={"a": 1})
        again = await store.create("s1", task_id="t1", created_at="2030-01-01T00:00:00Z", metadata={"b": 2})
        assert again.created_at == first.created_at
        assert again.task_id == "t1"
        assert again.metadata == {"a": 1}
        third = await store.create("s1", task_id="t2")
        assert third.task_id == "t1"


async def test_get_of_an_unknown_session_raises_not_found_with_the_exact_message(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        with pytest.raises(SessionStoreError) as caught:
            await store.get("missing")
        assert caught.value.code == SESS_NOT_FOUND
        assert str(caught.value) == 'session "missing" not found'


async def test_list_is_newest_first_with_event_counts(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("a", created_at="2024-01-01T00:00:00Z")
        await store.create("b", created_at="2024-01-02T00:00:00Z")
        await store.create("c", created_at="2024-01-02T00:00:00Z")
        await store.append("a", create_event("session.created", {"sessionId": "a"}))
        listing = await store.list()
        assert [item.record.session_id for item in listing] == ["c", "b", "a"]
        assert [item.event_count for item in listing] == [0, 0, 1]


@pytest.mark.parametrize("bad", ["", "x" * 257, 5, None])
async def test_session_ids_must_be_1_to_256_characters(tmp_path: Path, bad: object) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        with pytest.raises(SessionStoreError) as caught:
            await store.get(bad)  # pyright: ignore[reportArgumentType]
        assert caught.value.code == SESS_INVALID_RECORD
        assert (await store.create("x" * 256)).session_id == "x" * 256


@pytest.mark.parametrize("metadata", [[1], {"k": float("nan")}, {"k": {1, 2}}])
async def test_metadata_must_be_a_json_object(tmp_path: Path, metadata: object) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        with pytest.raises(SessionStoreError) as caught:
            await store.create("s1", metadata=metadata)  # pyright: ignore[reportArgumentType]
        assert caught.value.code == SESS_INVALID_RECORD
        assert await store.list() == ()


async def test_a_closed_store_refuses_every_operation(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    await store.create("s1")
    await store.aclose()
    await store.aclose()
    with pytest.raises(SessionStoreError) as caught:
        await store.get("s1")
    assert caught.value.code == SESS_INVALID_RECORD
    assert str(caught.value) == "session store is closed"


async def test_opening_needs_an_existing_directory_and_creates_none(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "missing" / "s.db")
    with pytest.raises(sqlite3.OperationalError):
        await store.create("s1")
    await store.aclose()
    assert not (tmp_path / "missing").exists()


async def test_the_database_uses_wal_and_the_contract_schema(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path, synchronous="NORMAL") as store:
        await store.create("s1")
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
        assert meta == {"schema_version": "2", "next_global_seq": "0"}
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        assert {"events_event_id_uq", "events_global_seq_uq", "events_global_seq_required"} <= names
    finally:
        connection.close()


def test_synchronous_must_be_full_or_normal(tmp_path: Path) -> None:
    with pytest.raises(SessionStoreError):
        SqliteSessionStore(tmp_path / "s.db", synchronous="OFF")  # pyright: ignore[reportArgumentType]
