"""The in-memory EventStore fake and the SQLite port, through the EventStore protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_kernel.events import Event, create_event
from harness_kernel.store import (
    SESS_INVALID_RECORD,
    EventStore,
    MemoryEventStore,
    SessionStoreError,
    SqliteEventStore,
    SqliteSessionStore,
)


def created(session_id: str) -> Event:
    return create_event("session.created", {"sessionId": session_id})


async def collect(store: EventStore, session_id: str) -> list[Event]:
    return [event async for event in store.read_session(session_id)]


async def test_memory_store_keeps_append_order_and_filters_by_session() -> None:
    store = MemoryEventStore()
    events = [created("a"), created("b"), created("a")]
    for event in events:
        await store.append(event)
    assert store.events == tuple(events)
    assert await collect(store, "a") == [events[0], events[2]]
    assert await collect(store, "z") == []
    assert isinstance(store, EventStore)


async def test_memory_store_rejects_non_events() -> None:
    store = MemoryEventStore()
    with pytest.raises(TypeError):
        await store.append({"v": 1})  # pyright: ignore[reportArgumentType]
    assert store.events == ()


@pytest.mark.slow
async def test_sqlite_port_appends_to_its_session_and_reads_back_in_pages(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as sessions:
        await sessions.create("a")
        port = SqliteEventStore(sessions, "a")
        assert isinstance(port, EventStore)
        events = [created("a") for _ in range(1005)]
        for event in events:
            await port.append(event)
        assert await collect(port, "a") == events
        with pytest.raises(SessionStoreError) as caught:
            await port.append(created("b"))
        assert caught.value.code == SESS_INVALID_RECORD
