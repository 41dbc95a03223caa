"""``PostgresSessionStore``: the kernel's ``SessionStore`` in a PostgreSQL database (decision 049).

The store keeps one writer connection and a few reader connections, each owned by one
long-lived thread (the kernel's ``ConnectionThread``, as the SQLite store's threads): psycopg's
blocking API runs there, never in the trio thread. The writer group-commits: it takes every
write waiting and runs them in one transaction — the ``harness_meta`` row locked first, each
write in its own savepoint — and wakes each caller only after ``COMMIT`` returned. Readers
run each read as one ``REPEATABLE READ READ ONLY`` transaction, round robin. A connection
that breaks fails the operations it held with ``SESS_UNAVAILABLE`` and is reopened for the
next one. Arguments are checked in the calling task, and every rule is the kernel's,
written once over ``Tables`` (``TransactionalStore``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from harness_kernel.store import SESS_INVALID_RECORD, SessionStoreError
from harness_kernel.store.backend import ConnectionThread, Job, Tables, ThreadedStore
from harness_store_postgres._errors import StoreUnavailableError
from harness_store_postgres._schema import prepare_schema
from harness_store_postgres._tables import Connection, GlobalSequence, PostgresTables

__all__ = ["PostgresSessionStore"]

_T = TypeVar("_T")
READERS_MAX: Final = 16
_CONNECT_TIMEOUT_SECONDS: Final = 10


def _unavailable(error: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(f"the session store database is unavailable: {error}".strip())


def _usable(connection: Connection) -> bool:
    return not connection.closed and not connection.broken


def _job_error(error: Exception) -> Exception:
    """What a job's caller sees: a value PostgreSQL cannot hold (a NUL character) is bad input."""
    if isinstance(error, psycopg.DataError):
        return SessionStoreError(SESS_INVALID_RECORD, f"PostgreSQL cannot store this value: {error}")
    return error


class _Link:
    """One thread's connection, reopened when it broke (only that thread touches it)."""

    __slots__ = ("_connection", "_conninfo", "_options")

    def __init__(self, conninfo: str, options: Mapping[str, object]) -> None:
        self._conninfo = conninfo
        self._options = dict(options)
        self._connection: Connection | None = None

    def get(self) -> Connection:
        """The open connection, connecting first if there is none or it broke.

        Raises:
            StoreUnavailableError: the database cannot be reached.
        """
        connection = self._connection
        if connection is not None and _usable(connection):
            return connection
        self.close()
        try:
            connection = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=_CONNECT_TIMEOUT_SECONDS,
                **self._options,  # pyright: ignore[reportArgumentType]
            )
        except psycopg.OperationalError as error:
            raise _unavailable(error) from None
        try:
            # Only the system catalogue is searched: every table name is written with its
            # schema, and no schema another role creates ("$user" first by default) can
            # lend a function, an operator or a table to an unqualified name.
            connection.execute("SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)")
        except psycopg.OperationalError as error:
            connection.close()
            raise _unavailable(error) from None
        self._connection = connection
        return connection

    def close(self) -> None:
        """Close the connection, if any (a broken one too)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


def _rollback(connection: Connection) -> None:
    if _usable(connection) and connection.info.transaction_status != TransactionStatus.IDLE:
        connection.execute("ROLLBACK")


def _write_batch(link: _Link, batch: list[Job[Any]]) -> None:
    """One transaction for ``batch`` on the writer's connection, or every job fails alike.

    A connection found broken before ``COMMIT`` was sent (a server restart, an idle
    connection ended) cannot have stored anything: the batch runs once more on a new
    connection. One that breaks while ``COMMIT`` is on its way leaves the outcome unknown:
    ``SESS_UNAVAILABLE``, and a retry by event id tells.
    """
    for attempt in range(2):
        connection = link.get()
        progress = _Progress()
        try:
            _group_transaction(connection, batch, progress)
        except Exception as error:
            if _usable(connection):
                raise
            if progress.committing:
                raise StoreUnavailableError(
                    f"the connection broke while COMMIT was on its way ({error}): the write may or"
                    " may not be stored; retry it (an append by its event id) to find out"
                ) from error
            if attempt == 1:
                raise _unavailable(error) from error
        else:
            return


class _Progress:
    """Whether a write transaction has sent its ``COMMIT``."""

    __slots__ = ("committing",)

    def __init__(self) -> None:
        self.committing = False


def _group_transaction(connection: Connection, batch: list[Job[Any]], progress: _Progress) -> None:
    """``BEGIN``, lock the global sequence, each write in a savepoint, ``COMMIT``; then answer.

    A write that raises is rolled back to its savepoint and keeps its error; the others
    still commit. A lone write needs no savepoint. If the transaction itself fails, every
    write of the batch fails with that error and nothing is written.
    """
    sequence = GlobalSequence(connection)
    tables = PostgresTables(connection, sequence)
    try:
        sequence.begin_and_lock()
        if len(batch) == 1:
            try:
                value = batch[0].work(tables)
            except Exception as error:
                raise _job_error(error) from error
            settlements = [batch[0].settlement(True, value)]
        else:
            settlements = [_in_savepoint(connection, sequence, tables, job) for job in batch]
        # From here the outcome is unknown if the connection breaks: the COMMIT is on its way.
        progress.committing = True
        sequence.flush_and_commit()
    except BaseException:
        _rollback(connection)
        raise
    # Only a committed batch hands out its results.
    for settle in settlements:
        settle()


def _in_savepoint(
    connection: Connection, sequence: GlobalSequence, tables: PostgresTables, job: Job[Any]
) -> Callable[[], None]:
    mark = sequence.mark()
    connection.execute("SAVEPOINT job")
    try:
        value = job.work(tables)
    except Exception as error:
        if not _usable(connection):
            raise  # the connection broke: the batch fails with this error
        connection.execute("ROLLBACK TO SAVEPOINT job")
        connection.execute("RELEASE SAVEPOINT job")
        sequence.restore(mark)
        return job.settlement(False, _job_error(error))
    connection.execute("RELEASE SAVEPOINT job")
    return job.settlement(True, value)


def _read_batch(link: _Link, jobs: list[Job[Any]]) -> None:
    """Each read as its own ``REPEATABLE READ READ ONLY`` transaction: one snapshot per operation.

    A read changes nothing, so one that meets a broken connection runs once more on a new one.
    """
    for job in jobs:
        for attempt in range(2):
            try:
                connection = link.get()
            except StoreUnavailableError as error:
                job.fail(error)
                break
            try:
                connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                value = job.work(PostgresTables(connection, None))
                connection.execute("COMMIT")
            except Exception as error:
                if _usable(connection):
                    _rollback(connection)
                    job.fail(_job_error(error))
                    break
                if attempt == 1:
                    job.fail(_unavailable(error))
            else:
                job.succeed(value)
                break


class _Threads:
    """The open store: its writer thread and its reader threads."""

    __slots__ = ("_turn", "readers", "writer")

    def __init__(self, writer: ConnectionThread[_Link], readers: list[ConnectionThread[_Link]]) -> None:
        self.writer = writer
        self.readers = readers
        self._turn = itertools.cycle(readers)

    def reader(self) -> ConnectionThread[_Link]:
        """The next reader, round robin."""
        return next(self._turn)

    def stop(self) -> None:
        """Finish everything queued, close every connection and end every thread (blocking)."""
        for reader in self.readers:
            reader.stop()
        self.writer.stop()


class PostgresSessionStore(ThreadedStore[_Threads]):
    """A :class:`~harness_kernel.store.SessionStore` in a PostgreSQL database, shared by replicas.

    Opened by the first operation or ``async with`` (which creates or migrates the schema:
    :data:`~harness_store_postgres.SCHEMA_VERSION`); closed by :meth:`aclose`. Several
    stores — in several processes or machines — may use one database: the per-session
    ``seq`` and the store-wide ``global_seq`` stay gapless, and a write made with
    ``owner_id`` is judged, inside its transaction and under a lock on the session row,
    against the lease as committed (so a replica whose lease was taken over is refused
    even while it still runs). Leases are judged by this store's clock, so replicas need
    synchronised clocks (NTP) and leases much longer than their skew.

    Args:
        conninfo: A libpq connection string or ``postgresql://`` URL. The database must use
            the UTF8 encoding.
        now: The store clock (leases, default timestamps); defaults to the system clock in
            UTC. A naive time is taken as UTC.
        readers: How many reader connections (1 to 16); with the writer the store holds
            ``readers + 1`` connections.
        owner: The role that must own the store's tables (and, unless it is a superuser's
            or the database owner's, the ``public`` schema); ``None`` is the role the store
            connects as. Checked at start-up: :class:`SchemaOwnerError` otherwise.

    Raises:
        TypeError: ``conninfo`` or ``owner`` is not a ``str``.
        SessionStoreError: ``SESS_INVALID_RECORD`` — ``readers`` is out of range.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        now: Callable[[], datetime] | None = None,
        readers: int = 2,
        owner: str | None = None,
    ) -> None:
        if type(conninfo) is not str:
            raise TypeError(f"conninfo must be a str, not {type(conninfo).__name__}")
        if owner is not None and type(owner) is not str:
            raise TypeError(f"owner must be a str or None, not {type(owner).__name__}")
        if type(readers) is not int or not 1 <= readers <= READERS_MAX:
            raise SessionStoreError(
                SESS_INVALID_RECORD, f"readers must be an integer from 1 to {READERS_MAX}"
            )
        super().__init__(now=now)
        self._conninfo = conninfo
        self._readers = readers
        self._owner = owner

    def _start(self) -> _Threads:
        """Connect the writer (creating or migrating the schema) and the readers; start their threads."""
        links = [
            _Link(self._conninfo, {"application_name": "harness-store"}) for _ in range(self._readers + 1)
        ]
        try:
            writer = links[0].get()
            _check_encoding(writer)
            try:
                prepare_schema(writer, owner=self._owner)
            except psycopg.Error as error:
                if not _usable(writer):
                    raise _unavailable(error) from error
                raise
            for link in links[1:]:
                link.get()
        except BaseException:
            for link in links:
                link.close()
            raise
        return _Threads(
            ConnectionThread(links[0], _write_batch, name="harness-pg-writer", grouped=True),
            [
                ConnectionThread(link, _read_batch, name=f"harness-pg-reader-{index}", grouped=False)
                for index, link in enumerate(links[1:])
            ],
        )

    async def _transact(self, work: Callable[[Tables], _T], *, write: bool) -> _T:
        threads = await self._running()
        return await (threads.writer if write else threads.reader()).run(work)


def _check_encoding(connection: Connection) -> None:
    row = connection.execute("SHOW server_encoding").fetchone()
    if row is None or str(row[0]).upper() not in ("UTF8", "UTF-8"):
        raise SessionStoreError(
            SESS_INVALID_RECORD, f"the database's encoding is {row[0] if row else None!r}, not UTF8"
        )
