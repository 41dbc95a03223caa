"""The event and session store (spec §6).

Two ports. :class:`EventStore` is what the runtime appends to; :class:`MemoryEventStore` is
its in-memory fake. :class:`SessionStore` is what a server keeps its sessions in: event logs
with a per-session ``seq`` and a store-wide ``global_seq``, idempotent appends, ownership
leases the store takes, renews and judges by its own clock (:class:`SessionLease`), status
transitions, checkpoints, recovery of interrupted sessions and retention.

Two session stores with one semantics: :class:`SqliteSessionStore` keeps everything durably
in one SQLite file (schema version 2, WAL, one transaction per append);
:class:`MemorySessionStore` keeps it in memory, for tests and for servers that need no
persistence. :mod:`harness_kernel.store.conformance` is the suite any implementation must
pass (both of these do). :class:`SessionEventLog` binds one session and owner of any
``SessionStore`` as an ``EventStore`` (``SqliteEventStore`` is its former name). Failures
raise :class:`SessionStoreError` with one of the ``SESS_*`` codes, or the typed event
errors for invalid or corrupt events.
"""

from __future__ import annotations

from harness_kernel.store._memory import MemorySessionStore
from harness_kernel.store._ports import (
    BatchEventStore,
    EventStore,
    MemoryEventStore,
    SessionEventLog,
    SessionStore,
)
from harness_kernel.store._records import (
    SESS_CLOSED,
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SESS_NOT_FOUND,
    SESS_OWNERSHIP_LOST,
    SESS_RECOVERY_CONFLICT,
    SESS_SCHEMA_VERSION,
    AuditEventPage,
    RecoverInterruptedResult,
    SequencedEvent,
    SessionCheckpoint,
    SessionEventPage,
    SessionLease,
    SessionListing,
    SessionRecord,
    SessionStatus,
    SessionStoreError,
    StatusTransitionResult,
)
from harness_kernel.store._schema import SCHEMA_VERSION
from harness_kernel.store._sqlite import SqliteSessionStore

SqliteEventStore = SessionEventLog
"""The former name of :class:`SessionEventLog` (when it worked over SQLite only)."""

__all__ = [
    "SCHEMA_VERSION",
    "SESS_CLOSED",
    "SESS_INVALID_CURSOR",
    "SESS_INVALID_RECORD",
    "SESS_NOT_FOUND",
    "SESS_OWNERSHIP_LOST",
    "SESS_RECOVERY_CONFLICT",
    "SESS_SCHEMA_VERSION",
    "AuditEventPage",
    "BatchEventStore",
    "EventStore",
    "MemoryEventStore",
    "MemorySessionStore",
    "RecoverInterruptedResult",
    "SequencedEvent",
    "SessionCheckpoint",
    "SessionEventLog",
    "SessionEventPage",
    "SessionLease",
    "SessionListing",
    "SessionRecord",
    "SessionStatus",
    "SessionStore",
    "SessionStoreError",
    "SqliteEventStore",
    "SqliteSessionStore",
    "StatusTransitionResult",
]
