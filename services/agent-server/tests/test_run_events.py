"""``RunEvents``: the runtime's batch event store for one prompt, with ``session.created`` as its prelude."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_server._turns import RunEvents
from harness_kernel.events import Event, create_event
from harness_kernel.store import BatchEventStore, SqliteSessionStore


def _event(event_type: str, event_id: str) -> Event:
    return create_event(event_type, {"sessionId": "s1"}, event_id=event_id, at="2024-05-01T12:30:00.125Z")  # pyright: ignore[reportArgumentType]


async def _nothing(session_id: str) -> AsyncIterator[Event]:
    for event in ():
        yield event


def _recorder() -> tuple[list[list[str]], Any]:
    calls: list[list[str]] = []

    async def record(events: Sequence[Event]) -> None:
        calls.append([event.event_id for event in events])

    return calls, record


async def test_the_prelude_goes_with_the_first_batch_only() -> None:
    calls, record = _recorder()
    events = RunEvents("s1", record, _nothing, prelude=_event("session.created", "created"))
    assert isinstance(events, BatchEventStore)
    await events.append_many([_event("session.created", "a"), _event("session.created", "b")])
    await events.append(_event("session.created", "c"))
    assert await events.store_prelude() is False
    assert calls == [["created", "a", "b"], ["c"]]


async def test_a_run_that_appended_nothing_still_stores_the_prelude_once() -> None:
    calls, record = _recorder()
    events = RunEvents("s1", record, _nothing, prelude=_event("session.created", "created"))
    assert await events.store_prelude() is True
    assert await events.store_prelude() is False
    await events.append(_event("session.created", "x"))
    assert calls == [["created"], ["x"]]


async def test_a_failed_first_batch_takes_the_prelude_with_it() -> None:
    attempts: list[list[str]] = []

    async def failing(events: Sequence[Event]) -> None:
        attempts.append([event.event_id for event in events])
        raise OSError("disk full")

    events = RunEvents("s1", failing, _nothing, prelude=_event("session.created", "created"))
    with pytest.raises(OSError, match="disk full"):
        await events.append(_event("session.created", "a"))
    # The run is poisoned; the prelude is not written again behind the failed batch.
    assert await events.store_prelude() is False
    assert attempts == [["created", "a"]]


async def test_read_session_is_this_session_only(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.sqlite") as store:
        await store.create("s1")
        await store.append_many("s1", [_event("session.created", "e1")])
        log = store.event_log("s1")

        async def record(batch: Sequence[Event]) -> None:
            await log.append_many(batch)

        events = RunEvents("s1", record, log.read_session)
        assert [event.event_id async for event in events.read_session("s1")] == ["e1"]
        with pytest.raises(ValueError, match="one session"):
            events.read_session("s2")
