"""Cancellation never abandons a started transaction: it lands after the COMMIT."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from harness_kernel.events import create_event
from harness_kernel.store import SqliteSessionStore


async def test_cancelling_an_append_in_flight_still_commits_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        # Another connection holds the write lock, so the append's BEGIN IMMEDIATE waits
        # inside its worker thread until we let go.
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            scope = trio.CancelScope()
            finished = trio.Event()

            async def append() -> None:
                with scope:
                    await store.append(
                        "s1", create_event("session.created", {"sessionId": "s1"}, event_id="e1")
                    )
                finished.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(append)
                await trio.sleep(0.2)
                scope.cancel()
                await trio.sleep(0.2)
                assert not finished.is_set()  # still waiting for its transaction
                blocker.execute("COMMIT")
        finally:
            blocker.close()
        assert scope.cancelled_caught
        assert [e.event.event_id for e in await store.slice("s1", 0)] == ["e1"]
    reopened = SqliteSessionStore(path)
    try:
        assert await reopened.size("s1") == 1
    finally:
        await reopened.aclose()


async def test_cancelling_before_the_worker_starts_writes_nothing(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("s1")
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.append("s1", create_event("session.created", {"sessionId": "s1"}))
        assert await store.size("s1") == 0
