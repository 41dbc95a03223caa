"""Several stores on one database: leases fenced by the database, group commit, gapless sequences."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
import trio

from harness_kernel.events import Event, create_event
from harness_kernel.store import SESS_OWNERSHIP_LOST, SequencedEvent, SessionStoreError
from harness_kernel.store.conformance import ManualClock
from harness_store_postgres import PostgresSessionStore

AT = "2024-05-01T12:30:00.125Z"


def created(session_id: str, event_id: str) -> Event:
    return create_event(
        "session.created", {"sessionId": session_id, "workspace": "/w"}, event_id=event_id, at=AT
    )


async def test_a_stale_owner_is_refused_though_its_own_clock_says_its_lease_is_live(
    new_database: Callable[[], str],
) -> None:
    conninfo = new_database()
    clock_a, clock_b = ManualClock(), ManualClock()
    async with (
        PostgresSessionStore(conninfo, now=clock_a) as replica_a,
        PostgresSessionStore(conninfo, now=clock_b) as replica_b,
    ):
        await replica_a.create("s", owner_id="a", lease_ms=1000)
        await replica_a.append("s", created("s", "e0"), owner_id="a")
        # B's clock passes A's expiry; A's does not (A is still running and thinks it owns "s").
        clock_b.advance(milliseconds=1001)
        taken = await replica_b.create("s", owner_id="b", lease_ms=60_000)
        assert taken.lease is not None
        assert taken.lease.owner_id == "b"
        with pytest.raises(SessionStoreError) as raised:
            await replica_a.append("s", created("s", "late"), owner_id="a")
        assert raised.value.code == SESS_OWNERSHIP_LOST
        with pytest.raises(SessionStoreError) as renewal:
            await replica_a.renew_lease("s", "a", lease_ms=1000)
        assert renewal.value.code == SESS_OWNERSHIP_LOST
        continued = await replica_b.append("s", created("s", "e1"), owner_id="b")
        assert continued.seq == 1
        assert [item.event.event_id for item in (await replica_b.read("s")).events] == ["e0", "e1"]


async def _wait_for_lock_waiter(conninfo: str) -> None:
    """Until some backend of this database waits for a lock (no time limit: the test's own)."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        while True:
            row = connection.execute(
                "SELECT COUNT(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if row is not None and row[0] == 1:
                return
            await trio.sleep(0.01)


async def test_an_append_in_flight_during_a_takeover_sees_the_committed_owner(
    new_database: Callable[[], str],
) -> None:
    conninfo = new_database()
    async with PostgresSessionStore(conninfo, now=ManualClock()) as replica_a:
        await replica_a.create("s", owner_id="a", lease_ms=60_000)
        takeover = psycopg.connect(conninfo)
        try:
            # Another replica's takeover, its transaction open: the global row lock taken first
            # (as every store write does), then the lease rewritten for owner "b".
            takeover.execute("SELECT value FROM harness_meta WHERE key = 'next_global_seq' FOR UPDATE")
            takeover.execute(
                "UPDATE harness_sessions SET metadata = %s WHERE session_id = 's'",
                ('{"ownerId":"b","leaseExpiresAt":"2999-01-01T00:00:00.000Z"}',),
            )
            outcome: list[BaseException | SequencedEvent] = []

            async def append_as_a() -> None:
                try:
                    outcome.append(await replica_a.append("s", created("s", "late"), owner_id="a"))
                except SessionStoreError as error:
                    outcome.append(error)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(append_as_a)
                await _wait_for_lock_waiter(conninfo)  # A's write waits behind the takeover
                takeover.commit()
        finally:
            takeover.close()
        assert len(outcome) == 1
        assert isinstance(outcome[0], SessionStoreError)
        assert outcome[0].code == SESS_OWNERSHIP_LOST
        assert await replica_a.size("s") == 0


async def test_concurrent_appends_group_commit_into_gapless_sequences(
    new_database: Callable[[], str],
) -> None:
    conninfo = new_database()
    sessions, per_session = 4, 40
    results: list[SequencedEvent] = []
    async with (
        PostgresSessionStore(conninfo, now=ManualClock()) as one,
        PostgresSessionStore(conninfo, now=ManualClock()) as other,
    ):
        for index in range(sessions):
            await one.create(f"s{index}")

        async def append(store: PostgresSessionStore, session: int, number: int) -> None:
            results.append(await store.append(f"s{session}", created(f"s{session}", f"e{session}-{number}")))

        async with trio.open_nursery() as nursery:
            for number in range(per_session):
                for session in range(sessions):
                    nursery.start_soon(append, one if number % 2 else other, session, number)
        total = sessions * per_session
        assert sorted(item.global_seq for item in results) == list(range(total))
        for session in range(sessions):
            seqs = sorted(item.seq for item in results if item.session_id == f"s{session}")
            assert seqs == list(range(per_session))
            page = await one.read(f"s{session}", limit=1000)
            assert [item.seq for item in page.events] == list(range(per_session))
        audit = await other.read_audit_events(limit=1000)
        assert [item.global_seq for item in audit.events] == list(range(total))
        with psycopg.connect(conninfo) as connection:
            row = connection.execute(
                "SELECT value FROM harness_meta WHERE key = 'next_global_seq'"
            ).fetchone()
        assert row == (total,)
