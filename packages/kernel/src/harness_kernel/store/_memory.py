"""``MemorySessionStore``: the ``SessionStore`` semantics of SQLite, kept in dictionaries.

It runs the very operation bodies ``SqliteSessionStore`` runs (``_operations``), over
:class:`_MemoryTables`, which hold the rows SQLite would hold — the same tuples, decoded by
the same code — so every result, every record and every error is the one SQLite gives.
A write that fails half-way is undone from a journal, as a rolled-back transaction would be.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

import trio

from harness_kernel.store._records import SESS_INVALID_RECORD, SessionStoreError
from harness_kernel.store._tables import EventColumns, Row, Tables
from harness_kernel.store._transactional import TransactionalStore

__all__ = ["MemorySessionStore"]

_T = TypeVar("_T")


def _store_closed() -> SessionStoreError:
    return SessionStoreError(SESS_INVALID_RECORD, "session store is closed")


@dataclass(frozen=True, slots=True)
class _Session:
    """One row of the ``sessions`` table, with its session's event rows in seq order.

    A change replaces the whole row (sharing the event list), so undoing it puts the old
    row back.
    """

    session_id: str
    task_id: str | None
    created_at: str
    metadata: str
    status: str = "active"
    closed_at: str | None = None
    next_seq: int = 0
    checkpoint_revision: int = 0
    checkpoint_seq: int | None = None
    checkpoint_payload: str | None = None
    checkpoint_updated_at: str | None = None
    events: list[Row] = field(default_factory=list[Row])

    def row(self) -> Row:
        return (
            self.session_id,
            self.task_id,
            self.status,
            self.created_at,
            self.closed_at,
            self.metadata,
            self.next_seq,
            self.checkpoint_revision,
        )

    def checkpoint_row(self) -> Row:
        return (
            self.session_id,
            self.checkpoint_revision,
            self.checkpoint_seq,
            self.checkpoint_payload,
            self.checkpoint_updated_at,
        )


def _seq(row: Row) -> int:
    value = row[1]
    assert type(value) is int
    return value


def _global_seq(row: Row) -> int:
    value = row[2]
    assert type(value) is int
    return value


class _MemoryTables:
    """:class:`Tables` over dictionaries; every write records how to undo it until :meth:`commit`."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._events_by_id: dict[str, Row] = {}
        self._audit: list[Row] = []  # every event row, by global_seq
        self._next_global_seq = 0
        self._undo: list[Callable[[], None]] = []

    def commit(self) -> None:
        self._undo.clear()

    def rollback(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _session(self, session_id: str) -> _Session:
        return self._sessions[session_id]

    def _put(self, changed: _Session) -> None:
        session_id = changed.session_id
        previous = self._sessions[session_id]
        self._sessions[session_id] = changed
        self._undo.append(lambda: self._sessions.__setitem__(session_id, previous))

    def session_row(self, session_id: str) -> Row | None:
        session = self._sessions.get(session_id)
        return None if session is None else session.row()

    def checkpoint_row(self, session_id: str) -> Row | None:
        session = self._sessions.get(session_id)
        return None if session is None else session.checkpoint_row()

    def listing_rows(self) -> list[tuple[Row, int]]:
        ordered = sorted(
            self._sessions.values(),
            key=lambda session: (session.created_at, session.session_id),
            reverse=True,
        )
        return [(session.row(), len(session.events)) for session in ordered]

    def insert_session(self, session_id: str, task_id: str | None, created_at: str, metadata: str) -> None:
        self._sessions[session_id] = _Session(
            session_id=session_id, task_id=task_id, created_at=created_at, metadata=metadata
        )
        self._undo.append(lambda: self._sessions.__delitem__(session_id))

    def update_task(self, session_id: str, task_id: str) -> None:
        self._put(replace(self._session(session_id), task_id=task_id))

    def update_metadata(self, session_id: str, metadata: str) -> None:
        self._put(replace(self._session(session_id), metadata=metadata))

    def update_status(self, session_id: str, status: str, closed_at: str) -> None:
        session = self._session(session_id)
        kept = session.closed_at if session.closed_at is not None else closed_at
        self._put(replace(session, status=status, closed_at=kept))

    def reactivate_session(self, session_id: str) -> None:
        self._put(replace(self._session(session_id), status="active", closed_at=None))

    def update_checkpoint(
        self, session_id: str, revision: int, after_seq: int, payload: str, updated_at: str
    ) -> None:
        self._put(
            replace(
                self._session(session_id),
                checkpoint_revision=revision,
                checkpoint_seq=after_seq,
                checkpoint_payload=payload,
                checkpoint_updated_at=updated_at,
            )
        )

    def event_row(self, event_id: str) -> Row | None:
        return self._events_by_id.get(event_id)

    def insert_event(self, columns: EventColumns) -> int:
        session_id, seq, event_id, at, actor, event_type, payload = columns
        session = self._session(session_id)
        global_seq = self._next_global_seq
        row: Row = (session_id, seq, global_seq, event_id, at, actor, event_type, payload)
        session.events.append(row)
        self._events_by_id[event_id] = row
        self._audit.append(row)
        self._next_global_seq = global_seq + 1
        self._put(replace(session, next_seq=seq + 1))

        def undo() -> None:
            session.events.pop()
            del self._events_by_id[event_id]
            self._audit.pop()
            self._next_global_seq = global_seq

        self._undo.append(undo)
        return global_seq

    def session_event_rows(self, session_id: str, after_seq: int, count: int) -> list[Row]:
        events = self._session(session_id).events
        first = bisect_right(events, after_seq, key=_seq)
        return events[first : first + count]

    def slice_rows(self, session_id: str, start: int, stop: int | None) -> list[Row]:
        events = self._session(session_id).events
        first = bisect_right(events, start - 1, key=_seq)
        end = len(events) if stop is None else max(first, bisect_right(events, stop - 1, key=_seq))
        return events[first:end]

    def audit_rows(self, after_global_seq: int, count: int) -> list[Row]:
        first = bisect_right(self._audit, after_global_seq, key=_global_seq)
        return self._audit[first : first + count]

    def event_count(self, session_id: str) -> int:
        return len(self._session(session_id).events)

    def closed_candidates(self, before: str, count: int) -> list[tuple[object, object]]:
        closed = sorted(
            (session.closed_at, session.session_id)
            for session in self._sessions.values()
            if session.status != "active" and session.closed_at is not None and session.closed_at < before
        )
        return [(session_id, closed_at) for closed_at, session_id in closed[:count]]

    def delete_session(self, session_id: str) -> None:
        session = self._sessions.pop(session_id)
        audit = self._audit
        self._audit = [row for row in audit if row[0] != session_id]
        for row in session.events:
            del self._events_by_id[str(row[3])]

        def undo() -> None:
            self._sessions[session_id] = session
            self._audit = audit
            for row in session.events:
                self._events_by_id[str(row[3])] = row

        self._undo.append(undo)


class MemorySessionStore(TransactionalStore):
    """A :class:`SessionStore` in memory, with exactly the semantics of :class:`SqliteSessionStore`.

    Sequence numbers, idempotent appends, leases judged by the injected clock, pages and
    their limits, checkpoints, recovery, retention and every ``SESS_*`` error are those of
    the SQLite store (both run the same operations, and a shared conformance suite and a
    differential test hold them to it); events are validated and canonicalised as SQLite
    stores them, so what reads back is byte-identical. Each operation is one trio checkpoint
    and then happens at once, atomically.

    **Not durable**: everything is lost with the process, and nothing is shared between two
    instances. Use it for tests, for demos, and for a server that needs no persistence.

    Args:
        now: The store clock (leases, default timestamps); defaults to the system clock in
            UTC. A naive time is taken as UTC.
    """

    def __init__(self, *, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(now=now)
        self._tables = _MemoryTables()
        self._closed = False

    async def _open(self) -> None:
        if self._closed:
            raise _store_closed()
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Close the store: later operations raise ``SESS_INVALID_RECORD`` (the sessions are dropped)."""
        self._closed = True
        self._tables = _MemoryTables()
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def _transact(self, work: Callable[[Tables], _T], *, write: bool) -> _T:
        if self._closed:
            raise _store_closed()
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise _store_closed()
        tables = self._tables
        try:
            result = work(tables)
        except BaseException:
            tables.rollback()
            raise
        tables.commit()
        return result
