"""``Tables``: the storage primitives one store transaction works with.

The operations of :mod:`harness_kernel.store._operations` — every rule of spec §6.3 — are
written once, over this protocol; ``SqliteSessionStore`` implements it with SQL on its
connection inside ``BEGIN … COMMIT`` and ``MemorySessionStore`` with dictionaries and an
undo journal. Rows are tuples in the column order :data:`COLUMNS` names, decoded by
:mod:`harness_kernel.store._rows`. Orders and ties are part of the contract, so every
implementation answers every query identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, LiteralString, Protocol, TypeAlias

__all__ = ["COLUMNS", "EventColumns", "Row", "Tables"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _ColumnOrder:
    # Literal strings, so that a driver that accepts only literal SQL takes them.
    session: LiteralString
    checkpoint: LiteralString
    event: LiteralString


COLUMNS: Final = _ColumnOrder(
    session="session_id, task_id, status, created_at, closed_at, metadata, next_seq, checkpoint_revision",
    checkpoint="session_id, checkpoint_revision, checkpoint_seq, checkpoint_payload, checkpoint_updated_at",
    event="session_id, seq, global_seq, event_id, at, actor, type, payload",
)
"""The column order of each kind of row, as SQL column lists: ``COLUMNS.session`` (a
session row), ``COLUMNS.checkpoint`` (a session's checkpoint columns) and ``COLUMNS.event``
(an event row). A row a backend returns is a tuple in exactly this order."""

Row: TypeAlias = tuple[object, ...]
EventColumns: TypeAlias = tuple[str, int, str, str, "str | None", str, str]
"""An event to insert: ``(session_id, seq, event_id, at, actor, type, payload)``."""


class Tables(Protocol):
    """The reads and writes of one transaction; a failure anywhere undoes all of its writes."""

    def session_row(self, session_id: str) -> Row | None:
        """The session's row (``COLUMNS.session``), or ``None``."""
        ...

    def checkpoint_row(self, session_id: str) -> Row | None:
        """The session's checkpoint columns (``COLUMNS.checkpoint``), or ``None`` without a session."""
        ...

    def listing_rows(self) -> list[tuple[Row, int]]:
        """Every session row with its event count, by ``created_at`` then ``session_id``, descending."""
        ...

    def insert_session(self, session_id: str, task_id: str | None, created_at: str, metadata: str) -> None:
        """Add an active session with no events and no checkpoint."""
        ...

    def update_task(self, session_id: str, task_id: str) -> None:
        """Set the session's ``task_id``."""
        ...

    def update_metadata(self, session_id: str, metadata: str) -> None:
        """Replace the session's stored metadata text."""
        ...

    def update_status(self, session_id: str, status: str, closed_at: str) -> None:
        """Set the status; ``closed_at`` is set only if the session has none yet."""
        ...

    def reactivate_session(self, session_id: str) -> None:
        """Make the session active again, with no ``closed_at`` (the one way back from closed)."""
        ...

    def update_checkpoint(
        self, session_id: str, revision: int, after_seq: int, payload: str, updated_at: str
    ) -> None:
        """Replace the session's checkpoint columns."""
        ...

    def event_row(self, event_id: str) -> Row | None:
        """The row of the event with this id in any session (``COLUMNS.event``), or ``None``."""
        ...

    def insert_event(self, columns: EventColumns) -> int:
        """Store an event with the next global sequence number and return that number.

        The session's ``next_seq`` becomes the event's seq + 1, and the store-wide next global
        sequence number moves on by one.
        """
        ...

    def session_event_rows(self, session_id: str, after_seq: int, count: int) -> list[Row]:
        """At most ``count`` of the session's event rows with ``seq > after_seq``, ascending."""
        ...

    def slice_rows(self, session_id: str, start: int, stop: int | None) -> list[Row]:
        """The session's event rows with ``start <= seq`` (and ``seq < stop``), ascending."""
        ...

    def audit_rows(self, after_global_seq: int, count: int) -> list[Row]:
        """At most ``count`` event rows of every session with ``global_seq > after_global_seq``, ascending."""
        ...

    def event_count(self, session_id: str) -> int:
        """How many events the session holds."""
        ...

    def closed_candidates(self, before: str, count: int) -> list[tuple[object, object]]:
        """``(session_id, closed_at)`` of at most ``count`` sessions that are not active, whose
        ``closed_at`` sorts (as text, by code point) before ``before``; by ``closed_at``, then
        ``session_id``."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Remove the session with its events and checkpoint."""
        ...
