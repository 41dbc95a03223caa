"""The store's writer and reader threads: group commit, failures, cancellation, reads beside writes.

The writer is paused where a test needs it by wrapping its batch function (``WriterGate``,
in the writer thread) or by a write whose work waits inside the open transaction; tasks
are put in the queue one at a time (``wait_all_tasks_blocked`` after each), so every order
and batch below is exact, never a matter of timing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import harness_kernel.store._sqlite as sqlite_store
from harness_kernel.events import Event, create_event
from harness_kernel.store import (
    SESS_CLOSED,
    SESS_INVALID_RECORD,
    SESS_NOT_FOUND,
    SequencedEvent,
    SessionStoreError,
    SqliteSessionStore,
)
from harness_kernel.store._records import SESS_EVENT_CONFLICT
from harness_kernel.store._tables import Tables

AT = "2024-05-01T12:30:00.125Z"
# A safety net only: a broken test must not hang the run for ever.
_HANG = 60.0


def created(session_id: str, event_id: str, workspace: str | None = None) -> Event:
    data: dict[str, object] = {"sessionId": session_id}
    if workspace is not None:
        data["workspace"] = workspace
    return create_event("session.created", data, event_id=event_id, at=AT)


def stored_rows(path: Path) -> dict[str, tuple[str, int, int]]:
    """``event_id -> (session_id, seq, global_seq)`` as another connection reads the file."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT event_id, session_id, seq, global_seq FROM events").fetchall()
        return {str(row[0]): (str(row[1]), int(row[2]), int(row[3])) for row in rows}
    finally:
        connection.close()


def next_global_seq(path: Path) -> str:
    connection = sqlite3.connect(path)
    try:
        return str(connection.execute("SELECT value FROM meta WHERE key = 'next_global_seq'").fetchone()[0])
    finally:
        connection.close()


class WriterGate:
    """Wraps the writer's batch function: records each batch's size, pauses one on request,
    and can make SQLite refuse a transaction statement (``BEGIN``, ``COMMIT``) in one batch."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self.pause_next = False
        self.entered = threading.Event()
        self.release = threading.Event()
        self.deny: tuple[str, int] | None = None  # (statement, batch number counted from 1)
        original = sqlite_store._group_transaction  # pyright: ignore[reportPrivateUsage]

        def gated(connection: sqlite3.Connection, batch: list[object]) -> None:
            self.sizes.append(len(batch))
            if self.pause_next:
                self.pause_next = False
                self.entered.set()
                self.release.wait(_HANG)
            denied = self.deny[0] if self.deny is not None and self.deny[1] == len(self.sizes) else None
            if denied is not None:

                def authorize(
                    action: int,
                    first: str | None,
                    second: str | None,
                    database: str | None,
                    trigger: str | None,
                ) -> int:
                    refused = action == sqlite3.SQLITE_TRANSACTION and first == denied
                    return sqlite3.SQLITE_DENY if refused else sqlite3.SQLITE_OK

                connection.set_authorizer(authorize)
            try:
                original(connection, batch)  # type: ignore[arg-type]
            finally:
                if denied is not None:
                    connection.set_authorizer(None)

        monkeypatch.setattr(sqlite_store, "_group_transaction", gated)

    async def paused(self) -> None:
        """Wait until the writer sits paused in the batch it has taken."""
        assert await trio.to_thread.run_sync(self.entered.wait, _HANG)


class Outcomes:
    """Runs store calls as tasks, one queued at a time, and keeps what each returned or raised."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.results: dict[str, object] = {}

    async def queue(self, name: str, call: Callable[[], Awaitable[object]]) -> None:
        async def run() -> None:
            try:
                self.results[name] = await call()
            except (SessionStoreError, sqlite3.Error) as error:
                self.results[name] = error

        self._nursery.start_soon(run)
        # The task has run up to its wait: its job is in the queue, behind the earlier ones.
        await trio.testing.wait_all_tasks_blocked()

    def code(self, name: str) -> str:
        error = self.results[name]
        assert isinstance(error, SessionStoreError), error
        return error.code

    def stored(self, name: str) -> SequencedEvent:
        value = self.results[name]
        assert isinstance(value, SequencedEvent), value
        return value


async def test_many_tasks_on_many_sessions_get_exact_contiguous_sequences(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    sessions, tasks_per_session, per_task = 12, 3, 8
    reported: dict[str, SequencedEvent] = {}
    async with SqliteSessionStore(path) as store:
        for index in range(sessions):
            await store.create(f"s{index}")

        async def writer(session_id: str, task: int) -> None:
            previous = -1
            for number in range(per_task):
                event_id = f"{session_id}-{task}-{number}"
                stored = await store.append(session_id, created(session_id, event_id))
                # Order within a session: each task's appends land in the order it made them.
                assert stored.seq > previous
                previous = stored.seq
                reported[event_id] = stored

        async with trio.open_nursery() as nursery:
            for index in range(sessions):
                for task in range(tasks_per_session):
                    nursery.start_soon(writer, f"s{index}", task)
        for index in range(sessions):
            restored = await store.slice(f"s{index}", 0)
            assert [event.seq for event in restored] == list(range(tasks_per_session * per_task))
            assert all(reported[event.event.event_id] == event for event in restored)
    total = sessions * tasks_per_session * per_task
    assert sorted(stored.global_seq for stored in reported.values()) == list(range(total))
    assert stored_rows(path) == {
        event_id: (stored.session_id, stored.seq, stored.global_seq) for event_id, stored in reported.items()
    }
    assert next_global_seq(path) == str(total)


async def test_a_failing_write_fails_alone_in_its_batch_and_leaves_no_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = WriterGate(monkeypatch)
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        for session_id in ("a", "b", "c"):
            await store.create(session_id)
        await store.append("c", created("c", "dup"))
        await store.close("c")
        async with trio.open_nursery() as nursery:
            outcomes = Outcomes(nursery)
            gate.pause_next = True
            await outcomes.queue("first", lambda: store.append("a", created("a", "a0")))
            await gate.paused()
            await outcomes.queue("a1", lambda: store.append("a", created("a", "a1")))
            await outcomes.queue("missing", lambda: store.append("zz", created("zz", "z0")))
            await outcomes.queue("b0", lambda: store.append("b", created("b", "b0")))
            await outcomes.queue("conflict", lambda: store.append("a", created("a", "dup")))
            await outcomes.queue(
                "many", lambda: store.append_many("b", [created("b", "b1"), created("b", "dup", "/x")])
            )
            await outcomes.queue("closed", lambda: store.append("c", created("c", "c1")))
            await outcomes.queue("a2", lambda: store.append("a", created("a", "a2")))
            await outcomes.queue("a1 again", lambda: store.append("a", created("a", "a1")))
            await outcomes.queue("b2", lambda: store.append("b", created("b", "b2")))
            gate.release.set()
        # The nine writes queued behind the paused one made exactly one batch.
        assert gate.sizes[-2:] == [1, 9]
        assert outcomes.code("missing") == SESS_NOT_FOUND
        assert outcomes.code("conflict") == SESS_EVENT_CONFLICT
        assert outcomes.code("many") == SESS_EVENT_CONFLICT
        assert outcomes.code("closed") == SESS_CLOSED
        first = outcomes.stored("first")
        good = [outcomes.stored(name) for name in ("a1", "b0", "a2", "b2")]
        assert [(s.session_id, s.seq) for s in good] == [("a", 1), ("b", 0), ("a", 2), ("b", 1)]
        # Rolled-back writes took no global sequence numbers: the good ones follow on.
        assert [s.global_seq for s in good] == [first.global_seq + n for n in (1, 2, 3, 4)]
        # The retry of a1, in the same batch, is the stored event itself.
        assert outcomes.stored("a1 again") == outcomes.stored("a1")
        assert [e.event.event_id for e in await store.slice("b", 0)] == ["b0", "b2"]
    assert set(stored_rows(path)) == {"dup", "a0", "a1", "b0", "a2", "b2"}
    assert next_global_seq(path) == str(first.global_seq + 5)


async def test_a_write_cancelled_before_the_writer_takes_it_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = WriterGate(monkeypatch)
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        scope = trio.CancelScope()
        finished = trio.Event()

        async def cancelled_append() -> None:
            with scope:
                await store.append("s1", created("s1", "withdrawn"))
            finished.set()

        async with trio.open_nursery() as nursery:
            outcomes = Outcomes(nursery)
            gate.pause_next = True
            await outcomes.queue("first", lambda: store.append("s1", created("s1", "first")))
            await gate.paused()
            nursery.start_soon(cancelled_append)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            # It returns at once, while the writer is still paused: it was withdrawn.
            await finished.wait()
            assert scope.cancelled_caught
            await outcomes.queue("after", lambda: store.append("s1", created("s1", "after")))
            gate.release.set()
        assert gate.sizes[-2:] == [1, 1]
        assert outcomes.stored("after").seq == 1
    assert set(stored_rows(path)) == {"first", "after"}


async def test_a_write_cancelled_after_the_writer_took_it_is_committed_then_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = WriterGate(monkeypatch)
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        scope = trio.CancelScope()
        finished = trio.Event()

        async def cancelled_append() -> None:
            with scope:
                await store.append("s1", created("s1", "taken"))
            finished.set()

        async with trio.open_nursery() as nursery:
            gate.pause_next = True
            nursery.start_soon(cancelled_append)
            await gate.paused()
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            # Taken: the caller waits for its commit instead of returning half-way.
            assert not finished.is_set()
            gate.release.set()
        assert scope.cancelled_caught
        assert [e.event.event_id for e in await store.slice("s1", 0)] == ["taken"]
    assert set(stored_rows(path)) == {"taken"}


async def test_reads_answer_from_a_snapshot_while_the_writer_holds_its_transaction_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    entered, release = threading.Event(), threading.Event()

    def slow_write(tables: Tables) -> None:
        tables.insert_session("hidden", None, "2024-01-01T00:00:00Z", "{}")
        entered.set()
        release.wait(_HANG)

    async with SqliteSessionStore(path) as store:
        await store.create("visible")
        await store.append("visible", created("visible", "v0"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: store._transact(slow_write, write=True)  # pyright: ignore[reportPrivateUsage]
            )
            assert await trio.to_thread.run_sync(entered.wait, _HANG)
            try:
                # The writer is inside BEGIN IMMEDIATE with an uncommitted row; reads go on,
                # each on a snapshot that does not see it.
                assert [e.event.event_id for e in await store.slice("visible", 0)] == ["v0"]
                assert (await store.read("visible")).events[0].seq == 0
                assert [listing.record.session_id for listing in await store.list()] == ["visible"]
                with pytest.raises(SessionStoreError) as caught:
                    await store.get("hidden")
                assert caught.value.code == SESS_NOT_FOUND
            finally:
                release.set()
        assert (await store.get("hidden")).session_id == "hidden"


async def test_a_read_returns_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        await store.append("s1", created("s1", "e0"))
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            appended = trio.Event()

            async def append() -> None:
                await store.append("s1", created("s1", "e1"))
                appended.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(append)
                await trio.testing.wait_all_tasks_blocked()
                # The append cannot commit before the blocker lets go, yet a restore answers.
                assert [e.event.event_id for e in await store.slice("s1", 0)] == ["e0"]
                assert not appended.is_set()
                blocker.execute("COMMIT")
        finally:
            blocker.close()
        assert await store.size("s1") == 2


async def test_a_cancelled_read_is_withdrawn_or_finishes_first(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    entered, release = threading.Event(), threading.Event()

    def slow_read(tables: Tables) -> object:
        entered.set()
        release.wait(_HANG)
        return tables.session_row("s1")

    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        running, queued = trio.CancelScope(), trio.CancelScope()
        results: list[object] = []

        async def read_in(scope: trio.CancelScope, read: Callable[[], Awaitable[object]]) -> None:
            with scope:
                results.append(await read())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                read_in,
                running,
                lambda: store._transact(slow_read, write=False),  # pyright: ignore[reportPrivateUsage]
            )
            assert await trio.to_thread.run_sync(entered.wait, _HANG)
            nursery.start_soon(read_in, queued, lambda: store.get("s1"))
            await trio.testing.wait_all_tasks_blocked()
            queued.cancel()
            running.cancel()
            await trio.testing.wait_all_tasks_blocked()
            # The queued read was withdrawn; the running one still waits for its transaction.
            assert queued.cancelled_caught
            assert not running.cancelled_caught
            release.set()
        assert running.cancelled_caught
        assert results == []
        assert (await store.get("s1")).session_id == "s1"


async def test_aclose_commits_the_queued_writes_and_refuses_later_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = WriterGate(monkeypatch)
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path)
    await store.create("s1")
    closed = trio.Event()

    async def close() -> None:
        await store.aclose()
        closed.set()

    async with trio.open_nursery() as nursery:
        outcomes = Outcomes(nursery)
        gate.pause_next = True
        await outcomes.queue("running", lambda: store.append("s1", created("s1", "e0")))
        await gate.paused()
        await outcomes.queue("queued 1", lambda: store.append("s1", created("s1", "e1")))
        await outcomes.queue("queued 2", lambda: store.append("s1", created("s1", "e2")))
        nursery.start_soon(close)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(SessionStoreError) as caught:
            await store.append("s1", created("s1", "late"))
        assert caught.value.code == SESS_INVALID_RECORD
        assert not closed.is_set()  # it waits for the work it let in
        gate.release.set()
    assert [outcomes.stored(name).seq for name in ("running", "queued 1", "queued 2")] == [0, 1, 2]
    assert set(stored_rows(path)) == {"e0", "e1", "e2"}
    with pytest.raises(SessionStoreError) as caught:
        await store.slice("s1", 0)
    assert caught.value.code == SESS_INVALID_RECORD


@pytest.mark.parametrize("statement", ["BEGIN", "COMMIT"])
async def test_a_failed_transaction_fails_every_write_of_its_batch_and_the_store_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statement: str
) -> None:
    gate = WriterGate(monkeypatch)
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        await store.create("s2")
        async with trio.open_nursery() as nursery:
            outcomes = Outcomes(nursery)
            gate.pause_next = True
            await outcomes.queue("first", lambda: store.append("s1", created("s1", "e0")))
            await gate.paused()
            # The next batch is refused by SQLite itself, as a disk error on COMMIT would be.
            gate.deny = (statement, len(gate.sizes) + 1)
            await outcomes.queue("s1", lambda: store.append("s1", created("s1", "e1")))
            await outcomes.queue("s2", lambda: store.append("s2", created("s2", "f0")))
            await outcomes.queue("create", lambda: store.create("s3"))
            gate.release.set()
        assert gate.sizes[-1] == 3
        for name in ("s1", "s2", "create"):
            error = outcomes.results[name]
            assert isinstance(error, sqlite3.DatabaseError), error
            assert "not authorized" in str(error)
        # Nothing of the failed batch was written, and the store carries on where it was.
        assert set(stored_rows(path)) == {"e0"}
        with pytest.raises(SessionStoreError) as caught:
            await store.get("s3")
        assert caught.value.code == SESS_NOT_FOUND
        again = await store.append("s1", created("s1", "e1"))
        assert (again.seq, again.global_seq) == (1, outcomes.stored("first").global_seq + 1)
    assert next_global_seq(path) == "2"


async def test_two_stores_on_one_file_share_the_global_sequence(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    reported: list[SequencedEvent] = []
    async with SqliteSessionStore(path) as left, SqliteSessionStore(path) as right:

        async def writer(store: SqliteSessionStore, session_id: str) -> None:
            await store.create(session_id)
            for number in range(6):
                reported.append(await store.append(session_id, created(session_id, f"{session_id}-{number}")))

        async with trio.open_nursery() as nursery:
            for index in range(3):
                nursery.start_soon(writer, left, f"left{index}")
                nursery.start_soon(writer, right, f"right{index}")
    # Each writer reads next_global_seq from the file under its write lock, so the two never
    # hand out the same number, and none is skipped.
    assert sorted(stored.global_seq for stored in reported) == list(range(36))
    assert next_global_seq(path) == "36"


async def test_a_private_in_memory_database_reads_through_its_writer() -> None:
    async with SqliteSessionStore(":memory:") as store:
        await store.create("s1")
        stored = await store.append("s1", created("s1", "e0"))
        assert await store.slice("s1", 0) == (stored,)
        assert [listing.event_count for listing in await store.list()] == [1]


def test_a_store_serves_one_trio_run_after_another(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")

    async def first() -> SequencedEvent:
        await store.create("s1")
        return await store.append("s1", created("s1", "e0"))

    async def second() -> tuple[SequencedEvent, ...]:
        await store.append("s1", created("s1", "e1"))
        try:
            return await store.slice("s1", 0)
        finally:
            await store.aclose()

    stored = trio.run(first)
    assert [e.event.event_id for e in trio.run(second)] == ["e0", "e1"]
    assert stored.seq == 0
