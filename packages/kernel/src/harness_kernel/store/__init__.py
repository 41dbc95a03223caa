"""The event and session store (spec §6).

:class:`EventStore` is the port the runtime appends to; :class:`MemoryEventStore` is its
in-memory fake. :class:`SqliteSessionStore` keeps sessions and their event logs durably in
one SQLite file (schema version 2, WAL, one transaction per append), with idempotent
appends, ownership leases, status transitions, checkpoints and crash recovery;
:class:`SqliteEventStore` adapts one of its sessions to the port. Failures raise
:class:`SessionStoreError` with one of the ``SESS_*`` codes, or the typed event errors for
invalid or corrupt events.
"""

from __future__ import annotations

from harness_kernel.store._ports import EventStore, MemoryEventStore, SqliteEventStore
from harness_kernel.store._records import (
    SESS_CHECKPOINT_CONFLICT,
    SESS_CLOSED,
    SESS_EVENT_CONFLICT,
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SESS_INVALID_TRANSITION,
    SESS_NOT_FOUND,
    SESS_OWNERSHIP_LOST,
    SESS_RECOVERY_CONFLICT,
    SESS_SCHEMA_VERSION,
    AuditEventPage,
    RecoverInterruptedResult,
    SequencedEvent,
    SessionCheckpoint,
    SessionEventPage,
    SessionListing,
    SessionRecord,
    SessionStatus,
    SessionStoreError,
    StatusTransitionResult,
)
from harness_kernel.store._schema import SCHEMA_VERSION
from harness_kernel.store._sqlite import SessionEventLog, SqliteSessionStore

__all__ = [
    "SCHEMA_VERSION",
    "SESS_CHECKPOINT_CONFLICT",
    "SESS_CLOSED",
    "SESS_EVENT_CONFLICT",
    "SESS_INVALID_CURSOR",
    "SESS_INVALID_RECORD",
    "SESS_INVALID_TRANSITION",
    "SESS_NOT_FOUND",
    "SESS_OWNERSHIP_LOST",
    "SESS_RECOVERY_CONFLICT",
    "SESS_SCHEMA_VERSION",
    "AuditEventPage",
    "EventStore",
    "MemoryEventStore",
    "RecoverInterruptedResult",
    "SequencedEvent",
    "SessionCheckpoint",
    "SessionEventLog",
    "SessionEventPage",
    "SessionListing",
    "SessionRecord",
    "SessionStatus",
    "SessionStoreError",
    "SqliteEventStore",
    "SqliteSessionStore",
    "StatusTransitionResult",
]
