"""The database restarted under load (``pg_ctl restart -m fast``): typed errors or durable appends.

Several tasks append to several sessions through one store (and one reads) while the server
restarts. Every append either returns — and then it is in the database, at the ``seq`` and
``global_seq`` it returned — or raises a ``SessionStoreError`` with ``SESS_UNAVAILABLE``;
nothing else escapes. The same store object serves again after the restart without being
reopened, and a retry by event id of each failed append agrees with the database: one that
was stored comes back at its place, one that was not is stored now, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import trio
import trio.lowlevel
from pg_cluster import Cluster
from pg_crash_trials import snapshot_database
from pg_crash_workloads import crash_event

from harness_kernel.events import Event
from harness_kernel.store import SessionStoreError
from harness_store_postgres import SESS_UNAVAILABLE, PostgresSessionStore

SESSIONS = 4
WRITERS = 8
AFTER_RESTART = 5
"""Appends each writer makes once the server is back, so every one of them reconnected."""


@dataclass
class _Load:
    acked: dict[str, tuple[str, int, int]] = field(default_factory=dict[str, tuple[str, int, int]])
    failed: list[tuple[str, Event]] = field(default_factory=list[tuple[str, Event]])
    codes: list[str] = field(default_factory=list[str])
    reads: int = 0
    restarted: trio.Event = field(default_factory=trio.Event)
    restarting: trio.Event = field(default_factory=trio.Event)


async def _writer(store: PostgresSessionStore, load: _Load, number: int) -> None:
    session_id = f"s{number % SESSIONS}"
    index = 0
    after = 0
    while after < AFTER_RESTART:
        event = crash_event("r", session_id, number, index, 0)
        index += 1
        try:
            stored = await store.append(session_id, event)
        except SessionStoreError as error:
            load.failed.append((session_id, event))
            load.codes.append(error.code)
        else:
            load.acked[event.event_id] = (session_id, stored.seq, stored.global_seq)
            if not load.restarting.is_set() and index >= 3:
                load.restarting.set()
        if load.restarted.is_set():
            after += 1
        await trio.lowlevel.checkpoint()


async def _reader(store: PostgresSessionStore, load: _Load) -> None:
    while not load.restarted.is_set():
        try:
            await store.read("s0", limit=50)
        except SessionStoreError as error:
            load.codes.append(error.code)
        else:
            load.reads += 1
        await trio.lowlevel.checkpoint()


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_a_restart_under_load_fails_appends_typed_loses_nothing_and_the_store_serves_on(
    postgres: Cluster, mode: str
) -> None:
    # fast: sessions are ended and the server checkpoints; immediate: a server crash,
    # recovered from the WAL (fsync=off loses nothing here: the machine does not crash).
    if not postgres.restartable:
        pytest.skip("HARNESS_TEST_DATABASE_URL's server cannot be restarted by the tests")
    conninfo = postgres.new_database()
    load = _Load()
    async with PostgresSessionStore(conninfo, readers=2) as store:
        for number in range(SESSIONS):
            await store.create(f"s{number}")

        async def restart() -> None:
            await load.restarting.wait()
            await trio.to_thread.run_sync(postgres.restart, mode)
            load.restarted.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(restart)
            nursery.start_soon(_reader, store, load)
            for number in range(WRITERS):
                nursery.start_soon(_writer, store, load, number)

        # The restart hit appends in flight, and only as SESS_UNAVAILABLE.
        assert load.failed, "the restart failed no append: it did not happen under load"
        assert set(load.codes) == {SESS_UNAVAILABLE}
        before = snapshot_database(conninfo)
        assert before.problems == []
        for event_id, where in load.acked.items():
            assert before.events.get(event_id) == where, event_id
        # The same store object, not reopened: retries by event id agree with the database.
        for session_id, event in load.failed:
            retried = await store.append(session_id, event)
            stored = before.events.get(event.event_id)
            if stored is not None:
                assert (session_id, retried.seq, retried.global_seq) == stored
            else:
                assert retried.global_seq >= len(before.events)
        in_doubt_stored = sum(event.event_id in before.events for _, event in load.failed)
        print(
            f"restart -m {mode} under load: {len(load.acked)} appends acknowledged, {len(load.failed)}"
            f" failed ({in_doubt_stored} of them stored), {load.reads} reads"
        )
        after = snapshot_database(conninfo)
        assert after.problems == []
        assert {event.event_id for _, event in load.failed} <= set(after.events)
        assert len(after.events) == len(load.acked) + len(load.failed)
        # Reads are served too.
        size = await store.size("s0")
        assert [item.seq for item in await store.slice("s0", 0)] == list(range(size))
