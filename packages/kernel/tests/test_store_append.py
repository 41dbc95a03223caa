"""Appending events: canonical storage, idempotency, conflicts, leases, sequence numbers, atomicity."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio

from harness_kernel.events import Event, EventSchemaError, create_event, serialize_event
from harness_kernel.store import (
    SESS_CLOSED,
    SESS_NOT_FOUND,
    SESS_OWNERSHIP_LOST,
    SessionStoreError,
    SqliteSessionStore,
)
from harness_kernel.store._records import SESS_EVENT_CONFLICT

AT = "2024-05-01T12:30:00.125Z"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def created(session_id: str, event_id: str, workspace: str | None = None) -> Event:
    data: dict[str, object] = {"sessionId": session_id}
    if workspace is not None:
        data["workspace"] = workspace
    return create_event("session.created", data, event_id=event_id, at=AT)


def leased(owner: str, expires: datetime) -> dict[str, object]:
    return {"ownerId": owner, "leaseExpiresAt": expires.isoformat()}


def rows(path: Path) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT session_id, seq, global_seq, event_id FROM events").fetchall()
    finally:
        connection.close()


async def test_append_stores_the_canonical_bytes_and_returns_sequence_numbers(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        event = created("s1", "e1", "ws")
        stored = await store.append("s1", event)
        assert (stored.session_id, stored.seq, stored.global_seq) == ("s1", 0, 0)
        assert stored.event == event
    connection = sqlite3.connect(path)
    try:
        payload = connection.execute("SELECT payload FROM events").fetchone()[0]
    finally:
        connection.close()
    assert payload == serialize_event(event).decode()


async def test_sequence_numbers_are_gapless_per_session_and_globally(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("a")
        await store.create("b")
        results = [await store.append("ab"[i % 2], created("ab"[i % 2], f"e{i}")) for i in range(10)]
        assert [r.global_seq for r in results] == list(range(10))
        assert [r.seq for r in results if r.session_id == "a"] == [0, 1, 2, 3, 4]
        assert [r.seq for r in results if r.session_id == "b"] == [0, 1, 2, 3, 4]
        assert (await store.get("a")).next_seq == 5


async def test_concurrent_appends_stay_gapless(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("s1")
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(store.append, "s1", created("s1", f"e{i}"))
        events = await store.slice("s1", 0)
        assert [e.seq for e in events] == list(range(20))
        assert sorted(e.global_seq for e in events) == list(range(20))


async def test_a_repeated_append_is_idempotent_even_after_close(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        first = await store.append("s1", created("s1", "e1"))
        await store.close("s1")
        again = await store.append("s1", created("s1", "e1"))
        assert again == first
    assert len(rows(path)) == 1


async def test_the_same_event_id_with_other_content_or_session_conflicts(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("s1")
        await store.create("s2")
        await store.append("s1", created("s1", "e1"))
        for session, event in (("s1", created("s1", "e1", "other")), ("s2", created("s1", "e1"))):
            with pytest.raises(SessionStoreError) as caught:
                await store.append(session, event)
            assert caught.value.code == SESS_EVENT_CONFLICT
        assert await store.size("s1") == 1
        assert await store.size("s2") == 0


async def test_append_to_a_closed_or_unknown_session_fails(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("s1")
        await store.close("s1")
        with pytest.raises(SessionStoreError) as caught:
            await store.append("s1", created("s1", "e1"))
        assert caught.value.code == SESS_CLOSED
        with pytest.raises(SessionStoreError) as caught:
            await store.append("nope", created("nope", "e2"))
        assert caught.value.code == SESS_NOT_FOUND


async def test_an_invalid_event_raises_the_typed_event_error_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        bad = Event(v=1, type="session.created", event_id="", at=AT, data=created("s1", "x").data)
        with pytest.raises(EventSchemaError):
            await store.append("s1", bad)
    assert rows(path) == []


async def test_owner_appends_need_a_live_lease_under_the_store_clock(tmp_path: Path) -> None:
    clock = [NOW]
    async with SqliteSessionStore(tmp_path / "s.db", now=lambda: clock[0]) as store:
        await store.create("s1", metadata=leased("w1", NOW + timedelta(seconds=30)))
        assert (await store.append("s1", created("s1", "e1"), owner_id="w1")).seq == 0
        with pytest.raises(SessionStoreError) as caught:
            await store.append("s1", created("s1", "e2"), owner_id="w2")
        assert caught.value.code == SESS_OWNERSHIP_LOST
        clock[0] = NOW + timedelta(seconds=30)  # expiry must be strictly later than now
        with pytest.raises(SessionStoreError) as caught:
            await store.append("s1", created("s1", "e3"), owner_id="w1")
        assert caught.value.code == SESS_OWNERSHIP_LOST
        # Ownership comes before the duplicate rule; without owner_id the duplicate still returns.
        with pytest.raises(SessionStoreError) as caught:
            await store.append("s1", created("s1", "e1"), owner_id="w1")
        assert caught.value.code == SESS_OWNERSHIP_LOST
        assert (await store.append("s1", created("s1", "e1"))).seq == 0


async def test_an_unparsable_lease_counts_as_lost(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db", now=lambda: NOW) as store:
        await store.create("s1", metadata={"ownerId": "w1", "leaseExpiresAt": "tomorrow"})
        with pytest.raises(SessionStoreError) as caught:
            await store.append("s1", created("s1", "e1"), owner_id="w1")
        assert caught.value.code == SESS_OWNERSHIP_LOST


async def test_a_failure_between_insert_and_commit_leaves_nothing_half_written(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        await store.append("s1", created("s1", "e0"))
        # The last statement of an append bumps next_global_seq, after the INSERT and the
        # session update: make exactly that statement fail.
        saboteur = sqlite3.connect(path)
        try:
            saboteur.execute(
                "CREATE TRIGGER sabotage AFTER UPDATE ON meta WHEN NEW.key = 'next_global_seq'"
                " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
            )
            saboteur.commit()
            with pytest.raises(sqlite3.IntegrityError, match="injected failure"):
                await store.append("s1", created("s1", "e1"))
            assert rows(path) == [("s1", 0, 0, "e0")]
            assert (await store.get("s1")).next_seq == 1
            saboteur.execute("DROP TRIGGER sabotage")
            saboteur.commit()
        finally:
            saboteur.close()
        retried = await store.append("s1", created("s1", "e1"))
        assert (retried.seq, retried.global_seq) == (1, 1)
