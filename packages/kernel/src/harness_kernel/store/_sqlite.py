"""``SqliteSessionStore``: durable sessions and their event logs in one SQLite file (spec §6.2 to §6.4).

The store owns two long-lived threads, each with its own connection
(:class:`~harness_kernel.store._worker.ConnectionThread`), started when it opens and joined
by :meth:`SqliteSessionStore.aclose`. The writer group-commits: it takes every write waiting
and runs them in one ``BEGIN IMMEDIATE … COMMIT`` (one fsync with ``synchronous=FULL``),
each in its own savepoint, then wakes their tasks (:func:`_group_transaction`). The reader
runs each read as one ``BEGIN … COMMIT`` on a WAL snapshot, so reads never wait behind a
commit. A started transaction always finishes, and a cancellation that arrived meanwhile is
delivered right after it. Arguments are validated in the calling task, before any thread
(:class:`~harness_kernel.store._transactional.TransactionalStore`); what each operation does
inside its transaction is written once, for this store and the in-memory one, over the
:class:`_SqliteTables` below.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import PurePath
from typing import Any, TypeVar

from harness_kernel.store._records import SESS_INVALID_RECORD, SessionStoreError
from harness_kernel.store._schema import BUSY_TIMEOUT_SECONDS, Synchronous, connect_store
from harness_kernel.store.backend import (
    COLUMNS,
    ConnectionThread,
    EventColumns,
    Job,
    Row,
    Tables,
    ThreadedStore,
)

__all__ = ["SqliteSessionStore"]

_T = TypeVar("_T")


class _GlobalSequence:
    """The store-wide ``next_global_seq`` within one write transaction.

    Read from the ``meta`` row at the transaction's first insert — under ``BEGIN IMMEDIATE``
    that row is the truth, whichever connection or process wrote it last — counted here, and
    written back once before ``COMMIT``: two statements per transaction, not two per event.
    """

    __slots__ = ("_connection", "_next", "_stored")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._next: int | None = None
        self._stored: int | None = None

    def take(self) -> int:
        """The next global sequence number, counted as used."""
        if self._next is None:
            row = self._connection.execute("SELECT value FROM meta WHERE key = 'next_global_seq'").fetchone()
            text: object = None if row is None else row[0]
            if type(text) is not str or not text.isdigit():
                raise SessionStoreError(
                    SESS_INVALID_RECORD, "stored next_global_seq is not a non-negative integer"
                )
            self._next = self._stored = int(text)
        taken = self._next
        self._next = taken + 1
        return taken

    def mark(self) -> int | None:
        """Where the count stands, for :meth:`restore` after a rolled-back savepoint."""
        return self._next

    def restore(self, mark: int | None) -> None:
        """Forget the numbers taken since ``mark``: their inserts were rolled back."""
        self._next = mark

    def flush(self) -> None:
        """Write the count to ``meta`` if this transaction used any number."""
        if self._next is not None and self._next != self._stored:
            self._connection.execute(
                "UPDATE meta SET value = ? WHERE key = 'next_global_seq'", (str(self._next),)
            )
            self._stored = self._next


def _read_transaction(connection: sqlite3.Connection, jobs: list[Job[Any]]) -> None:
    """Each read job as its own ``BEGIN … COMMIT``: one consistent snapshot per operation."""
    for job in jobs:
        connection.execute("BEGIN")
        try:
            value = job.work(_SqliteTables(connection, _GlobalSequence(connection)))
            connection.execute("COMMIT")
        except Exception as error:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            job.fail(error)
        else:
            job.succeed(value)


class _SqliteTables:
    """:class:`Tables` as SQL statements on a connection inside its open transaction."""

    __slots__ = ("_connection", "_sequence")

    def __init__(self, connection: sqlite3.Connection, sequence: _GlobalSequence) -> None:
        self._connection = connection
        self._sequence = sequence

    def _one(self, query: str, arguments: tuple[object, ...]) -> Row | None:
        row: Row | None = self._connection.execute(query, arguments).fetchone()
        return row

    def _all(self, query: str, arguments: tuple[object, ...] = ()) -> list[Row]:
        return self._connection.execute(query, arguments).fetchall()

    def session_row(self, session_id: str) -> Row | None:
        return self._one(f"SELECT {COLUMNS.session} FROM sessions WHERE session_id = ?", (session_id,))

    def checkpoint_row(self, session_id: str) -> Row | None:
        return self._one(f"SELECT {COLUMNS.checkpoint} FROM sessions WHERE session_id = ?", (session_id,))

    def listing_rows(self) -> list[tuple[Row, int]]:
        rows = self._all(
            f"SELECT {COLUMNS.session},"
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

    def reactivate_session(self, session_id: str) -> None:
        self._connection.execute(
            "UPDATE sessions SET status = 'active', closed_at = NULL WHERE session_id = ?", (session_id,)
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
        return self._one(f"SELECT {COLUMNS.event} FROM events WHERE event_id = ?", (event_id,))

    def insert_event(self, columns: EventColumns) -> int:
        global_seq = self._sequence.take()
        session_id, seq, event_id, at, actor, event_type, payload = columns
        self._connection.execute(
            f"INSERT INTO events({COLUMNS.event}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, seq, global_seq, event_id, at, actor, event_type, payload),
        )
        self._connection.execute(
            "UPDATE sessions SET next_seq = ? WHERE session_id = ?", (seq + 1, session_id)
        )
        return global_seq

    def session_event_rows(self, session_id: str, after_seq: int, count: int) -> list[Row]:
        return self._all(
            f"SELECT {COLUMNS.event} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, count),
        )

    def slice_rows(self, session_id: str, start: int, stop: int | None) -> list[Row]:
        query = f"SELECT {COLUMNS.event} FROM events WHERE session_id = ? AND seq >= ?"
        if stop is None:
            return self._all(query + " ORDER BY seq", (session_id, start))
        return self._all(query + " AND seq < ? ORDER BY seq", (session_id, start, stop))

    def audit_rows(self, after_global_seq: int, count: int) -> list[Row]:
        return self._all(
            f"SELECT {COLUMNS.event} FROM events WHERE global_seq > ? ORDER BY global_seq LIMIT ?",
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


class _Threads:
    """The open store: its writer thread, and its reader thread (``None`` for a private database)."""

    __slots__ = ("reader", "writer")

    def __init__(
        self,
        writer: ConnectionThread[sqlite3.Connection],
        reader: ConnectionThread[sqlite3.Connection] | None,
    ) -> None:
        self.writer = writer
        self.reader = reader

    def stop(self) -> None:
        """Finish everything queued, close both connections and end both threads (blocking)."""
        if self.reader is not None:
            self.reader.stop()
        self.writer.stop()


class SqliteSessionStore(ThreadedStore[_Threads]):
    """A :class:`SessionStore` in one SQLite database file (schema version 2): durable.

    Opened by the first operation or ``async with``; closed by :meth:`aclose`. Leases live in
    the ``metadata`` column as ``ownerId`` and ``leaseExpiresAt``, where the schema has
    always kept them. An open store holds two threads, each with its own connection: the
    writer, which commits every write waiting in one transaction, and the reader (WAL
    snapshots), so a read never waits behind a commit. A private database (``":memory:"``
    or ``""``) has one connection, and its reads go through the writer.

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

    @property
    def path(self) -> str | PurePath:
        """The database file, as given."""
        return self._path

    def _start(self) -> _Threads:
        """Open both connections (creating or migrating the schema) and start their threads."""
        connection = connect_store(self._path, self._synchronous)
        try:
            reader = _connect_reader(self._path, connection)
        except BaseException:
            connection.close()
            raise
        writer = ConnectionThread(
            connection,
            _group_transaction,
            name="harness-store-writer",
            grouped=True,
        )
        if reader is None:
            return _Threads(writer, None)
        return _Threads(
            writer,
            ConnectionThread(reader, _read_transaction, name="harness-store-reader", grouped=False),
        )

    async def _transact(self, work: Callable[[Tables], _T], *, write: bool) -> _T:
        threads = await self._running()
        if write or threads.reader is None:
            return await threads.writer.run(work)
        return await threads.reader.run(work)


def _connect_reader(path: str | PurePath, writer: sqlite3.Connection) -> sqlite3.Connection | None:
    """A read-only connection to the writer's WAL database, or ``None`` if it has no WAL.

    A private database (``":memory:"``, ``""``) would be another, empty one; a database
    without WAL would make the reader and the writer block each other.
    """
    if str(path) in ("", ":memory:"):
        return None
    mode = writer.execute("PRAGMA journal_mode").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        return None
    reader = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        reader.execute("PRAGMA query_only=ON")
    except BaseException:
        reader.close()
        raise
    return reader


def _group_transaction(connection: sqlite3.Connection, batch: list[Job[Any]]) -> None:
    """One transaction for ``batch``: each write in its own savepoint, then one commit.

    A write that raises is rolled back to its savepoint and keeps its error; the others
    still commit. A lone write needs no savepoint: if it raises, the transaction is rolled
    back. If the transaction itself fails (``BEGIN``, ``COMMIT``, an error after which
    SQLite rolled everything back), every write of the batch fails with that error and
    nothing is written.
    """
    sequence = _GlobalSequence(connection)
    tables = _SqliteTables(connection, sequence)
    connection.execute("BEGIN IMMEDIATE")
    try:
        if len(batch) == 1:
            settlements = [batch[0].settlement(True, batch[0].work(tables))]
        else:
            settlements = [_in_savepoint(connection, sequence, tables, job) for job in batch]
        sequence.flush()
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    # Only a committed batch hands out its results.
    for settle in settlements:
        settle()


def _in_savepoint(
    connection: sqlite3.Connection, sequence: _GlobalSequence, tables: _SqliteTables, job: Job[Any]
) -> Callable[[], None]:
    mark = sequence.mark()
    connection.execute("SAVEPOINT job")
    try:
        value = job.work(tables)
    except Exception as error:
        if not connection.in_transaction:
            raise  # SQLite rolled the whole transaction back: the batch fails with this error
        connection.execute("ROLLBACK TO job")
        connection.execute("RELEASE job")
        sequence.restore(mark)
        return job.settlement(False, error)
    connection.execute("RELEASE job")
    return job.settlement(True, value)
