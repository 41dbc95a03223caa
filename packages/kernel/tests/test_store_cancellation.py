"""Cancellation never abandons a started transaction: it lands after the COMMIT."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from harness_kernel.events import create_event
from harness_kernel.store import SqliteSessionStore


def _signal_when_the_writer_takes(store: SqliteSessionStore) -> threading.Event:
    """An event the writer thread sets once it has taken a batch: from then on its jobs can no
    longer be withdrawn by a cancellation, only finished. Nothing else tells that moment."""
    threads = store._threads  # pyright: ignore[reportPrivateUsage]
    assert threads is not None
    writer = threads.writer
    run_jobs: Callable[[sqlite3.Connection, list[Any]], None] = writer._run_jobs  # pyright: ignore[reportPrivateUsage]
    taken = threading.Event()

    def run(connection: sqlite3.Connection, jobs: list[Any]) -> None:
        taken.set()
        run_jobs(connection, jobs)

    writer._run_jobs = run  # pyright: ignore[reportPrivateUsage]
    return taken


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

            taken = _signal_when_the_writer_takes(store)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append)
                # The cancellation must come after the writer took the job (before, it withdraws
                # it: the next test); a fixed sleep guessed that moment and lost on a busy machine.
                with trio.fail_after(30):
                    await trio.to_thread.run_sync(taken.wait, abandon_on_cancel=True)
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
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
