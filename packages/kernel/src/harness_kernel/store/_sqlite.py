"""``SqliteSessionStore``: durable sessions and their event logs in one SQLite file (spec §6.2 to §6.4).

Every operation runs in a worker thread behind a one-slot limiter, on the store's single
connection. A read is one ``BEGIN … COMMIT``; writes are group-committed: those that arrive
while a commit runs share the next ``BEGIN IMMEDIATE … COMMIT``, each in its own savepoint
(:meth:`SqliteSessionStore._commit_grouped`). The thread is never
abandoned: a started transaction always finishes, and a cancellation that arrived meanwhile
is delivered right after it. Arguments are validated in the calling task, before any thread
(:class:`~harness_kernel.store._transactional.TransactionalStore`); what each operation does
inside its transaction is written once, for this store and the in-memory one, over the
:class:`_SqliteTables` below.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import PurePath
from typing import Any, Generic, TypeVar, cast

import trio

from harness_kernel.store._records import SESS_INVALID_RECORD, SessionStoreError
from harness_kernel.store._rows import CHECKPOINT_COLUMNS, EVENT_COLUMNS, SESSION_COLUMNS
from harness_kernel.store._schema import Synchronous, connect_store
from harness_kernel.store._tables import EventColumns, Row, Tables
from harness_kernel.store._transactional import TransactionalStore

__all__ = ["SqliteSessionStore"]

_T = TypeVar("_T")
_Work = Callable[[sqlite3.Connection], _T]


def _read_transaction(connection: sqlite3.Connection, work: _Work[_T]) -> _T:
    connection.execute("BEGIN")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


class _SqliteTables:
    """:class:`Tables` as SQL statements on a connection inside its open transaction."""

    __slots__ = ("_connection",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def _one(self, query: str, arguments: tuple[object, ...]) -> Row | None:
        row: Row | None = self._connection.execute(query, arguments).fetchone()
        return row

    def _all(self, query: str, arguments: tuple[object, ...] = ()) -> list[Row]:
        return self._connection.execute(query, arguments).fetchall()

    def session_row(self, session_id: str) -> Row | None:
        return self._one(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))

    def checkpoint_row(self, session_id: str) -> Row | None:
        return self._one(f"SELECT {CHECKPOINT_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))

    def listing_rows(self) -> list[tuple[Row, int]]:
        rows = self._all(
            f"SELECT {SESSION_COLUMNS},"
            " (SELECT COUNT(*) FROM events WHERE events.session_id = sessions.session_id)"
            " FROM sessions ORDER BY created_at DESC, session_id DESC"
        )
        return [(row[:-1], int(row[-1])) for row in rows]  # pyright: ignore[reportArgumentType]

    def insert_session(self, session_id: str, task_id: str | None, created_at: str, metadata: str) -> None:
        self._connection.execute(
            "INSERT INTO sessions(session_id, task_id, status, created_at, metadata)"
            " VALUES (?, ?, 'active', ?, ?)",
            (session_id, task_id, created_at, metadata),
        )

    def update_task(self, session_id: str, task_id: str) -> None:
        self._connection.execute(
            "UPDATE sessions SET task_id = ? WHERE session_id = ?", (task_id, session_id)
        )

    def update_metadata(self, session_id: str, metadata: str) -> None:
        self._connection.execute(
            "UPDATE sessions SET metadata = ? WHERE session_id = ?", (metadata, session_id)
        )

    def update_status(self, session_id: str, status: str, closed_at: str) -> None:
        self._connection.execute(
            "UPDATE sessions SET status = ?, closed_at = COALESCE(closed_at, ?) WHERE session_id = ?",
            (status, closed_at, session_id),
        )

    def update_checkpoint(
        self, session_id: str, revision: int, after_seq: int, payload: str, updated_at: str
    ) -> None:
        self._connection.execute(
            "UPDATE sessions SET checkpoint_revision = ?, checkpoint_seq = ?, checkpoint_payload = ?,"
            " checkpoint_updated_at = ? WHERE session_id = ?",
            (revision, after_seq, payload, updated_at, session_id),
        )

    def event_row(self, event_id: str) -> Row | None:
        return self._one(f"SELECT {EVENT_COLUMNS} FROM events WHERE event_id = ?", (event_id,))

    def insert_event(self, columns: EventColumns) -> int:
        row = self._one("SELECT value FROM meta WHERE key = 'next_global_seq'", ())
        text: object = None if row is None else row[0]
        if type(text) is not str or not text.isdigit():
            raise SessionStoreError(
                SESS_INVALID_RECORD, "stored next_global_seq is not a non-negative integer"
            )
        global_seq = int(text)
        session_id, seq, event_id, at, actor, event_type, payload = columns
        self._connection.execute(
            f"INSERT INTO events({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, seq, global_seq, event_id, at, actor, event_type, payload),
        )
        self._connection.execute(
            "UPDATE sessions SET next_seq = ? WHERE session_id = ?", (seq + 1, session_id)
        )
        self._connection.execute(
            "UPDATE meta SET value = ? WHERE key = 'next_global_seq'", (str(global_seq + 1),)
        )
        return global_seq

    def session_event_rows(self, session_id: str, after_seq: int, count: int) -> list[Row]:
        return self._all(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, count),
        )

    def slice_rows(self, session_id: str, start: int, stop: int | None) -> list[Row]:
        query = f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq >= ?"
        if stop is None:
            return self._all(query + " ORDER BY seq", (session_id, start))
        return self._all(query + " AND seq < ? ORDER BY seq", (session_id, start, stop))

    def audit_rows(self, after_global_seq: int, count: int) -> list[Row]:
        return self._all(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE global_seq > ? ORDER BY global_seq LIMIT ?",
            (after_global_seq, count),
        )

    def event_count(self, session_id: str) -> int:
        row = self._one("SELECT COUNT(*) FROM events WHERE session_id = ?", (session_id,))
        assert row is not None
        return int(row[0])  # pyright: ignore[reportArgumentType]

    def closed_candidates(self, before: str, count: int) -> list[tuple[object, object]]:
        rows = self._all(
            "SELECT session_id, closed_at FROM sessions WHERE status != 'active'"
            " AND closed_at IS NOT NULL AND closed_at < ? ORDER BY closed_at, session_id LIMIT ?",
            (before, count),
        )
        return [(row[0], row[1]) for row in rows]

    def delete_session(self, session_id: str) -> None:
        self._connection.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
        self._connection.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))


class SqliteSessionStore(TransactionalStore):
    """A :class:`SessionStore` in one SQLite database file (schema version 2): durable.

    Opened by the first operation or ``async with``; closed by :meth:`aclose`. Leases live in
    the ``metadata`` column as ``ownerId`` and ``leaseExpiresAt``, where the schema has
    always kept them.

    Args:
        path: The database file, handed unchanged to ``sqlite3.connect``; its directory must
            exist.
        now: The store clock (leases, default timestamps); defaults to the system clock in UTC.
            A naive time is taken as UTC.
        synchronous: ``"FULL"`` (every commit survives power loss) or ``"NORMAL"`` (survives
            a process crash; the latest commits may be lost on power loss).

    Raises:
        TypeError: ``path`` is neither a ``str`` nor a ``PurePath``.
        SessionStoreError: ``SESS_INVALID_RECORD`` — ``synchronous`` is not FULL or NORMAL.
    """

    def __init__(
        self,
        path: str | PurePath,
        *,
        now: Callable[[], datetime] | None = None,
        synchronous: Synchronous = "FULL",
    ) -> None:
        if type(path) is not str and not isinstance(path, PurePath):
            raise TypeError(f"path must be a str or PurePath, not {type(path).__name__}")
        if synchronous not in ("FULL", "NORMAL"):
            raise SessionStoreError(SESS_INVALID_RECORD, 'synchronous must be "FULL" or "NORMAL"')
        super().__init__(now=now)
        self._path = path
        self._synchronous: Synchronous = synchronous
        self._limiter = trio.CapacityLimiter(1)
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._queue: list[_Job[Any]] = []
        self._committing = False

    @property
    def path(self) -> str | PurePath:
        """The database file, as given."""
        return self._path

    async def _open(self) -> None:
        await self._call(lambda _connection: None)

    async def aclose(self) -> None:
        """Close the store: operations already running finish, later ones raise ``SESS_INVALID_RECORD``."""
        self._closed = True
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self._close_connection, limiter=self._limiter)

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _run_in_thread(self, work: _Work[_T]) -> _T:
        if self._closed:
            raise SessionStoreError(SESS_INVALID_RECORD, "session store is closed")
        if self._connection is None:
            self._connection = connect_store(self._path, self._synchronous)
        return work(self._connection)

    async def _call(self, work: _Work[_T]) -> _T:
        result = await self._call_uncancellable(work)
        # The work has finished; a cancellation that arrived meanwhile lands now.
        await trio.lowlevel.checkpoint_if_cancelled()
        return result

    async def _transact(self, work: Callable[[Tables], _T], *, write: bool) -> _T:
        if write:
            return await self._commit_grouped(lambda connection: work(_SqliteTables(connection)))
        return await self._call(
            lambda connection: _read_transaction(connection, lambda open_: work(_SqliteTables(open_)))
        )

    async def _commit_grouped(self, work: _Work[_T]) -> _T:
        """Run one write in the next group commit and return once that commit is durable.

        Writes that arrive while a commit is running wait and go together into the next one:
        one ``BEGIN IMMEDIATE … COMMIT`` (one fsync with ``synchronous=FULL``) for all of
        them, each inside its own savepoint, so a write that raises is rolled back alone and
        the others still commit. No caller returns before the commit that holds its write.
        A caller cancelled before its write was taken leaves nothing behind; once taken, the
        write finishes (shielded) and the cancellation is delivered after, as for a lone
        transaction.
        """
        # A caller cancelled before it asked writes nothing.
        await trio.lowlevel.checkpoint_if_cancelled()
        job = _Job(work)
        self._queue.append(job)
        if not self._committing:
            self._committing = True
            try:
                with trio.CancelScope(shield=True):
                    while self._queue:
                        batch, self._queue = self._queue, []
                        await self._commit_batch(batch)
            finally:
                self._committing = False
        else:
            try:
                await job.done.wait()
            except trio.Cancelled:
                if not job.taken:
                    self._queue.remove(job)
                    raise
                with trio.CancelScope(shield=True):
                    await job.done.wait()
                raise
        await trio.lowlevel.checkpoint_if_cancelled()
        return job.result()

    async def _commit_batch(self, batch: list[_Job[Any]]) -> None:
        for job in batch:
            job.taken = True
        try:
            await self._call_uncancellable(lambda connection: _group_transaction(connection, batch))
        except BaseException as error:
            for job in batch:
                if not job.settled:
                    job.fail(error)
        finally:
            for job in batch:
                job.done.set()

    async def _call_uncancellable(self, work: _Work[_T]) -> _T:
        if self._closed:
            raise SessionStoreError(SESS_INVALID_RECORD, "session store is closed")
        return await trio.to_thread.run_sync(
            self._run_in_thread, work, limiter=self._limiter, abandon_on_cancel=False
        )


class _Job(Generic[_T]):
    """One write waiting for, or done by, a group commit."""

    __slots__ = ("_error", "_value", "done", "settled", "taken", "work")

    def __init__(self, work: _Work[_T]) -> None:
        self.work = work
        self.done = trio.Event()
        self.taken = False
        self.settled = False
        self._value: _T | None = None
        self._error: BaseException | None = None

    def succeed(self, value: _T) -> None:
        self._value, self.settled = value, True

    def fail(self, error: BaseException) -> None:
        self._error, self.settled = error, True

    def result(self) -> _T:
        if self._error is not None:
            raise self._error
        return cast(_T, self._value)


def _group_transaction(connection: sqlite3.Connection, batch: list[_Job[Any]]) -> None:
    """One transaction for ``batch``: each write in its own savepoint, then one commit.

    A write that raises is rolled back to its savepoint and keeps its error; the others
    still commit. If the commit itself fails, every write of the batch fails with it.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        outcomes: list[tuple[_Job[Any], bool, object]] = []
        for job in batch:
            connection.execute("SAVEPOINT job")
            try:
                value = job.work(connection)
            except Exception as error:
                connection.execute("ROLLBACK TO job")
                connection.execute("RELEASE job")
                outcomes.append((job, False, error))
            else:
                connection.execute("RELEASE job")
                outcomes.append((job, True, value))
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    # Only a committed batch hands out its results.
    for job, ok, value in outcomes:
        if ok:
            job.succeed(value)
        else:
            assert isinstance(value, BaseException)
            job.fail(value)
