"""The kernel's ``Tables`` as SQL on a PostgreSQL connection inside its open transaction.

Every rule of the store is the kernel's (``_operations``, run by ``TransactionalStore``);
this module only says how each primitive reads or writes the tables. In a write
transaction the session row is read ``FOR UPDATE``: the lease an owner's write is judged
by is locked until that write commits, so a takeover by another replica waits for it, or
the write waits for the takeover and sees the new owner (decision 049).
"""

from __future__ import annotations

from typing import Final, LiteralString

import psycopg
from psycopg import sql

from harness_kernel.store import SESS_INVALID_RECORD, SessionStoreError
from harness_kernel.store.backend import COLUMNS, EventColumns, Row

__all__ = ["GlobalSequence", "PostgresTables"]

Connection = psycopg.Connection[tuple[object, ...]]

_NEXT_GLOBAL: Final = "SELECT value FROM public.harness_meta WHERE key = 'next_global_seq'"


class GlobalSequence:
    """The store-wide ``next_global_seq`` within one write transaction.

    :meth:`lock` reads the ``harness_meta`` row ``FOR UPDATE`` as the transaction's first
    statement: every write transaction of every replica takes this one row lock first, so
    writes are serialized (and cannot deadlock on the session rows they lock after it), and
    the value read is the truth. It is counted here and written back once before ``COMMIT``,
    so global sequence numbers are gapless, unlike a PostgreSQL ``SEQUENCE``.
    """

    __slots__ = ("_connection", "_next", "_stored")

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._next = 0
        self._stored = 0

    def begin_and_lock(self) -> None:
        """Begin the write transaction, lock the row and read the count: one round trip.

        Without parameters psycopg sends the two statements as one simple query and keeps a
        result for each.
        """
        cursor = self._connection.execute(
            "BEGIN ISOLATION LEVEL READ COMMITTED; " + _NEXT_GLOBAL + " FOR UPDATE"
        )
        cursor.nextset()  # past BEGIN's result to the SELECT's
        row = cursor.fetchone()
        value: object = None if row is None else row[0]
        if type(value) is not int or value < 0:
            raise SessionStoreError(
                SESS_INVALID_RECORD, "stored next_global_seq is not a non-negative integer"
            )
        self._next = self._stored = value

    def take(self) -> int:
        """The next global sequence number, counted as used."""
        taken = self._next
        self._next = taken + 1
        return taken

    def mark(self) -> int:
        """Where the count stands, for :meth:`restore` after a rolled-back savepoint."""
        return self._next

    def restore(self, mark: int) -> None:
        """Forget the numbers taken since ``mark``: their inserts were rolled back."""
        self._next = mark

    def flush_and_commit(self) -> None:
        """Write the count back if this transaction used any number, and ``COMMIT``: one round trip.

        The count is an ``int`` this object computed, composed as a literal, so the update and
        the ``COMMIT`` travel as one simple query.
        """
        if self._next == self._stored:
            self._connection.execute("COMMIT")
            return
        update = sql.SQL("UPDATE public.harness_meta SET value = {} WHERE key = 'next_global_seq'; COMMIT")
        self._connection.execute(update.format(sql.Literal(self._next)))
        self._stored = self._next


class PostgresTables:
    """``Tables`` over one connection in its open transaction (``sequence`` only when writing)."""

    __slots__ = ("_connection", "_lock", "_sequence")

    def __init__(self, connection: Connection, sequence: GlobalSequence | None) -> None:
        self._connection = connection
        self._sequence = sequence
        self._lock: LiteralString = "" if sequence is None else " FOR UPDATE"

    def _one(self, query: LiteralString, arguments: tuple[object, ...]) -> Row | None:
        return self._connection.execute(query, arguments).fetchone()

    def _all(self, query: LiteralString, arguments: tuple[object, ...] = ()) -> list[Row]:
        return self._connection.execute(query, arguments).fetchall()

    def session_row(self, session_id: str) -> Row | None:
        return self._one(
            f"SELECT {COLUMNS.session} FROM public.harness_sessions WHERE session_id = %s{self._lock}",
            (session_id,),
        )

    def checkpoint_row(self, session_id: str) -> Row | None:
        return self._one(
            f"SELECT {COLUMNS.checkpoint} FROM public.harness_sessions WHERE session_id = %s{self._lock}",
            (session_id,),
        )

    def listing_rows(self) -> list[tuple[Row, int]]:
        rows = self._all(
            f"SELECT {COLUMNS.session},"
            " (SELECT COUNT(*) FROM public.harness_events e WHERE e.session_id = harness_sessions.session_id)"
            " FROM public.harness_sessions ORDER BY created_at DESC, session_id DESC"
        )
        return [(row[:-1], int(row[-1])) for row in rows]  # pyright: ignore[reportArgumentType]

    def insert_session(self, session_id: str, task_id: str | None, created_at: str, metadata: str) -> None:
        self._connection.execute(
            "INSERT INTO public.harness_sessions(session_id, task_id, status, created_at, metadata)"
            " VALUES (%s, %s, 'active', %s, %s)",
            (session_id, task_id, created_at, metadata),
        )

    def update_task(self, session_id: str, task_id: str) -> None:
        self._connection.execute(
            "UPDATE public.harness_sessions SET task_id = %s WHERE session_id = %s", (task_id, session_id)
        )

    def update_metadata(self, session_id: str, metadata: str) -> None:
        self._connection.execute(
            "UPDATE public.harness_sessions SET metadata = %s WHERE session_id = %s", (metadata, session_id)
        )

    def update_status(self, session_id: str, status: str, closed_at: str) -> None:
        self._connection.execute(
            "UPDATE public.harness_sessions SET status = %s, closed_at = COALESCE(closed_at, %s)"
            " WHERE session_id = %s",
            (status, closed_at, session_id),
        )

    def reactivate_session(self, session_id: str) -> None:
        self._connection.execute(
            "UPDATE public.harness_sessions SET status = 'active', closed_at = NULL WHERE session_id = %s",
            (session_id,),
        )

    def update_checkpoint(
        self, session_id: str, revision: int, after_seq: int, payload: str, updated_at: str
    ) -> None:
        self._connection.execute(
            "UPDATE public.harness_sessions SET checkpoint_revision = %s, checkpoint_seq = %s,"
            " checkpoint_payload = %s, checkpoint_updated_at = %s WHERE session_id = %s",
            (revision, after_seq, payload, updated_at, session_id),
        )

    def event_row(self, event_id: str) -> Row | None:
        return self._one(
            f"SELECT {COLUMNS.event} FROM public.harness_events WHERE event_id = %s", (event_id,)
        )

    def insert_event(self, columns: EventColumns) -> int:
        if self._sequence is None:
            raise SessionStoreError(SESS_INVALID_RECORD, "an event can only be inserted by a write")
        global_seq = self._sequence.take()
        session_id, seq, event_id, at, actor, event_type, payload = columns
        # One round trip for both: a data-modifying WITH runs exactly once, and a failing
        # insert (a duplicate key) fails the whole statement, the update with it.
        self._connection.execute(
            f"WITH inserted AS (INSERT INTO public.harness_events({COLUMNS.event})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s))"
            " UPDATE public.harness_sessions SET next_seq = %s WHERE session_id = %s",
            (session_id, seq, global_seq, event_id, at, actor, event_type, payload, seq + 1, session_id),
        )
        return global_seq

    def session_event_rows(self, session_id: str, after_seq: int, count: int) -> list[Row]:
        return self._all(
            f"SELECT {COLUMNS.event} FROM public.harness_events WHERE session_id = %s AND seq > %s"
            " ORDER BY seq LIMIT %s",
            (session_id, after_seq, count),
        )

    def slice_rows(self, session_id: str, start: int, stop: int | None) -> list[Row]:
        if stop is None:
            return self._all(
                f"SELECT {COLUMNS.event} FROM public.harness_events WHERE session_id = %s AND seq >= %s"
                " ORDER BY seq",
                (session_id, start),
            )
        return self._all(
            f"SELECT {COLUMNS.event} FROM public.harness_events WHERE session_id = %s AND seq >= %s"
            " AND seq < %s ORDER BY seq",
            (session_id, start, stop),
        )

    def audit_rows(self, after_global_seq: int, count: int) -> list[Row]:
        return self._all(
            f"SELECT {COLUMNS.event} FROM public.harness_events WHERE global_seq > %s"
            " ORDER BY global_seq LIMIT %s",
            (after_global_seq, count),
        )

    def event_count(self, session_id: str) -> int:
        row = self._one("SELECT COUNT(*) FROM public.harness_events WHERE session_id = %s", (session_id,))
        assert row is not None
        return int(row[0])  # pyright: ignore[reportArgumentType]

    def closed_candidates(self, before: str, count: int) -> list[tuple[object, object]]:
        rows = self._all(
            "SELECT session_id, closed_at FROM public.harness_sessions WHERE status <> 'active'"
            " AND closed_at IS NOT NULL AND closed_at < %s ORDER BY closed_at, session_id LIMIT %s",
            (before, count),
        )
        return [(row[0], row[1]) for row in rows]

    def delete_session(self, session_id: str) -> None:
        self._connection.execute("DELETE FROM public.harness_events WHERE session_id = %s", (session_id,))
        self._connection.execute("DELETE FROM public.harness_sessions WHERE session_id = %s", (session_id,))
