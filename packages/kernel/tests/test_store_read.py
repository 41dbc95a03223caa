"""Reading events back: pages, cursors, audit reads, slices, sizes and distrust of stored rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness_kernel.events import (
    Event,
    EventParseError,
    EventSchemaError,
    EventVersionError,
    UnknownEventTypeError,
    create_event,
)
from harness_kernel.store import (
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SessionStoreError,
    SqliteSessionStore,
)

AT = "2024-05-01T12:30:00.125Z"


def created(session_id: str, event_id: str) -> Event:
    return create_event("session.created", {"sessionId": session_id}, event_id=event_id, at=AT, actor="me")


async def filled(path: Path, count: int) -> SqliteSessionStore:
    store = SqliteSessionStore(path)
    await store.create("a")
    await store.create("b")
    for i in range(count):
        await store.append("a", created("a", f"a{i}"))
        await store.append("b", created("b", f"b{i}"))
    return store


async def test_read_pages_through_a_session_with_cursors(tmp_path: Path) -> None:
    store = await filled(tmp_path / "s.db", 5)
    try:
        page = await store.read("a", limit=2)
        assert [e.seq for e in page.events] == [0, 1]
        assert (page.next_after_seq, page.has_more) == (1, True)
        page = await store.read("a", after_seq=page.next_after_seq, limit=3)
        assert [e.event.event_id for e in page.events] == ["a2", "a3", "a4"]
        assert (page.next_after_seq, page.has_more) == (4, False)
        empty = await store.read("a", after_seq=4)
        assert (empty.events, empty.next_after_seq, empty.has_more) == ((), 4, False)
    finally:
        await store.aclose()


async def test_audit_reads_cross_sessions_in_global_order(tmp_path: Path) -> None:
    store = await filled(tmp_path / "s.db", 3)
    try:
        page = await store.read_audit_events(limit=4)
        assert [e.event.event_id for e in page.events] == ["a0", "b0", "a1", "b1"]
        assert (page.next_after_global_seq, page.has_more) == (3, True)
        rest = await store.read_audit_events(after_global_seq=3, limit=1000)
        assert [e.global_seq for e in rest.events] == [4, 5]
        assert not rest.has_more
    finally:
        await store.aclose()


@pytest.mark.parametrize(("after", "limit"), [(-2, 10), (True, 10), (0, 0), (0, 1001), (1.0, 10), (0, None)])
async def test_invalid_cursors_and_limits_are_rejected(tmp_path: Path, after: object, limit: object) -> None:
    store = await filled(tmp_path / "s.db", 1)
    try:
        for call in (
            store.read("a", after_seq=after, limit=limit),  # pyright: ignore[reportArgumentType]
            store.read_audit_events(after_global_seq=after, limit=limit),  # pyright: ignore[reportArgumentType]
        ):
            with pytest.raises(SessionStoreError) as caught:
                await call
            assert caught.value.code == SESS_INVALID_CURSOR
    finally:
        await store.aclose()


async def test_slice_size_and_event_log(tmp_path: Path) -> None:
    store = await filled(tmp_path / "s.db", 5)
    try:
        assert [e.seq for e in await store.slice("a", 1, 3)] == [1, 2]
        assert [e.seq for e in await store.slice("a", 3)] == [3, 4]
        assert await store.size("a") == 5
        log = store.event_log("a")
        stored = await log.append(created("a", "a5"))
        assert stored.seq == 5
        assert await log.size() == 6
        assert [e.seq for e in await log.slice(5)] == [5]
        assert (await log.read(after_seq=4)).events == (stored,)
        with pytest.raises(SessionStoreError) as caught:
            await store.slice("a", -1)
        assert caught.value.code == SESS_INVALID_CURSOR
    finally:
        await store.aclose()


async def corrupt(path: Path, sql: str) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute(sql)
        connection.commit()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ("not json", EventParseError),
        ('{"v":2,"type":"session.created"}', EventVersionError),
        ('{"v":1,"type":"nope"}', UnknownEventTypeError),
        ('{"v":1,"type":"session.created","eventId":"a0","at":"x","data":{}}', EventSchemaError),
    ],
)
async def test_a_corrupt_payload_raises_the_typed_event_error(
    tmp_path: Path, payload: str, error: type[Exception]
) -> None:
    path = tmp_path / "s.db"
    store = await filled(path, 1)
    try:
        await corrupt(path, f"UPDATE events SET payload = '{payload}' WHERE event_id = 'a0'")
        with pytest.raises(error):
            await store.read("a")
        with pytest.raises(error):
            await store.read_audit_events()
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    "assignment", ["event_id = 'zz'", "type = 'agent.started'", "at = '2020-01-01T00:00:00Z'", "actor = NULL"]
)
async def test_columns_disagreeing_with_the_payload_are_invalid_records(
    tmp_path: Path, assignment: str
) -> None:
    path = tmp_path / "s.db"
    store = await filled(path, 1)
    try:
        await corrupt(path, f"UPDATE events SET {assignment} WHERE event_id = 'a0'")
        with pytest.raises(SessionStoreError) as caught:
            await store.slice("a", 0)
        assert caught.value.code == SESS_INVALID_RECORD
    finally:
        await store.aclose()
