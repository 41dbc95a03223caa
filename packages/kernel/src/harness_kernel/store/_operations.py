"""What each store operation does inside its one transaction (spec §6.3), over :class:`Tables`.

Written once for every ``Tables`` implementation, so the SQLite store and the in-memory store
follow the very same rules in the very same order (which check comes first decides which
error a caller sees). Arguments arrive validated and the clock already read, in the calling
task; nothing here awaits.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from msgspec import UNSET

from harness_kernel._json import FrozenDict, JsonValue
from harness_kernel.events._model import Event
from harness_kernel.store._leases import (
    metadata_text,
    parse_offset_time,
    require_acquirable,
    require_expired_lease,
    require_owner,
    require_renewable,
    stored_lease_entries,
)
from harness_kernel.store._records import (
    SESS_CHECKPOINT_CONFLICT,
    SESS_CLOSED,
    SESS_EVENT_CONFLICT,
    SESS_INVALID_RECORD,
    SESS_INVALID_TRANSITION,
    SESS_NOT_FOUND,
    SESS_RECOVERY_CONFLICT,
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
    format_time,
)
from harness_kernel.store._rows import decode_checkpoint, decode_event_row, decode_session_row
from harness_kernel.store._tables import Row, Tables

__all__ = [
    "append_event",
    "count_events",
    "create_session",
    "delete_closed",
    "get_checkpoint",
    "list_sessions",
    "not_found",
    "read_audit",
    "read_page",
    "recover_interrupted",
    "renew_lease",
    "reopen_session",
    "require_session",
    "save_checkpoint",
    "set_metadata",
    "slice_events",
    "transition",
]

_ALLOWED_CHANGES: Final = frozenset({("active", "closed"), ("closed", "archived")})

Lease = dict[str, JsonValue]


def not_found(session_id: str) -> SessionStoreError:
    """The ``SESS_NOT_FOUND`` error for ``session_id``."""
    return SessionStoreError(SESS_NOT_FOUND, f'session "{session_id}" not found')


def _closed(record: SessionRecord) -> SessionStoreError:
    return SessionStoreError(SESS_CLOSED, f'session "{record.session_id}" is {record.status}')


def _require_metadata(record: SessionRecord, expected: FrozenDict | None) -> None:
    """With ``expected``, the stored metadata (lease keys included) must still equal it."""
    if expected is not None and record.metadata != expected:
        raise SessionStoreError(
            SESS_RECOVERY_CONFLICT, f'metadata of session "{record.session_id}" has changed'
        )


def require_session(tables: Tables, session_id: str) -> SessionRecord:
    """The session's record, else ``SESS_NOT_FOUND``."""
    row = tables.session_row(session_id)
    if row is None:
        raise not_found(session_id)
    return decode_session_row(row)


def _duplicate(row: Row, session_id: str, event_id: str, payload: str) -> SequencedEvent:
    """The duplicate rule: the stored event if it is the same one in the same session."""
    if row[0] != session_id or row[7] != payload:
        raise SessionStoreError(
            SESS_EVENT_CONFLICT, f'event "{event_id}" is already stored with different content'
        )
    return decode_event_row(row)


def _insert(tables: Tables, record: SessionRecord, event: Event, payload: str) -> SequencedEvent:
    seq = record.next_seq
    actor = None if event.actor is UNSET else event.actor
    global_seq = tables.insert_event(
        (record.session_id, seq, event.event_id, event.at, actor, event.type, payload)
    )
    return SequencedEvent(session_id=record.session_id, seq=seq, global_seq=global_seq, event=event)


# ---------------------------------------------------------------- sessions


def create_session(
    tables: Tables,
    session_id: str,
    *,
    task_id: str | None,
    created_at: str,
    metadata: FrozenDict,
    owner_id: str | None,
    now: datetime,
    lease: Lease | None,
) -> SessionRecord:
    """Create the session, or reopen it: fill a missing task id, take the lease for ``owner_id``."""
    row = tables.session_row(session_id)
    if row is None:
        tables.insert_session(session_id, task_id, created_at, metadata_text(metadata, lease or {}))
        return require_session(tables, session_id)
    record = decode_session_row(row)
    changed = False
    if owner_id is not None:
        assert lease is not None
        require_acquirable(record, owner_id, now)
        tables.update_metadata(session_id, metadata_text(record.metadata, lease))
        changed = True
    if record.task_id is None and task_id is not None:
        tables.update_task(session_id, task_id)
        changed = True
    return require_session(tables, session_id) if changed else record


def list_sessions(tables: Tables) -> tuple[SessionListing, ...]:
    """Every session with its event count, newest first."""
    return tuple(
        SessionListing(record=decode_session_row(row), event_count=count)
        for row, count in tables.listing_rows()
    )


def delete_closed(tables: Tables, cutoff: datetime, count: int) -> tuple[str, ...]:
    """Delete up to ``count`` sessions closed before ``cutoff``; their ids, oldest first."""
    # Canonical timestamps sort as text, which pre-selects; each one is then parsed, so a
    # foreign format is judged by its time or kept, never deleted by its spelling.
    doomed = tuple(
        str(session_id)
        for session_id, closed_at in tables.closed_candidates(format_time(cutoff), count)
        if (moment := parse_offset_time(closed_at)) is not None and moment < cutoff
    )
    for session_id in doomed:
        tables.delete_session(session_id)
    return doomed


# ---------------------------------------------------------------- events


def append_event(
    tables: Tables,
    session_id: str,
    event: Event,
    payload: str,
    *,
    owner_id: str | None,
    now: datetime | None,
) -> SequencedEvent:
    """Append ``event`` (validated, ``payload`` its canonical text), or return its stored twin."""
    existing = tables.event_row(event.event_id)
    record: SessionRecord | None = None
    if owner_id is not None or existing is None:
        record = require_session(tables, session_id)
        if owner_id is not None:
            # Ownership comes before the duplicate rule: a writer that lost its lease learns so.
            assert now is not None
            require_owner(record, owner_id, now)
    if existing is not None:
        return _duplicate(existing, session_id, event.event_id, payload)
    assert record is not None
    if record.status != "active":
        raise _closed(record)
    return _insert(tables, record, event, payload)


def read_page(tables: Tables, session_id: str, after_seq: int, count: int) -> SessionEventPage:
    """One page of the session's events after ``after_seq``."""
    require_session(tables, session_id)
    rows = tables.session_event_rows(session_id, after_seq, count + 1)
    events = tuple(decode_event_row(row) for row in rows[:count])
    return SessionEventPage(
        events=events,
        next_after_seq=events[-1].seq if events else after_seq,
        has_more=len(rows) > count,
    )


def read_audit(tables: Tables, after_global_seq: int, count: int) -> AuditEventPage:
    """One page of every session's events after ``after_global_seq``."""
    rows = tables.audit_rows(after_global_seq, count + 1)
    events = tuple(decode_event_row(row) for row in rows[:count])
    return AuditEventPage(
        events=events,
        next_after_global_seq=events[-1].global_seq if events else after_global_seq,
        has_more=len(rows) > count,
    )


def slice_events(tables: Tables, session_id: str, start: int, stop: int | None) -> tuple[SequencedEvent, ...]:
    """The session's events with ``start <= seq < stop``."""
    require_session(tables, session_id)
    return tuple(decode_event_row(row) for row in tables.slice_rows(session_id, start, stop))


def count_events(tables: Tables, session_id: str) -> int:
    """How many events the session holds."""
    require_session(tables, session_id)
    return tables.event_count(session_id)


# ---------------------------------------------------------------- status, metadata, lease


def transition(
    tables: Tables,
    session_id: str,
    expected: SessionStatus,
    next: SessionStatus,
    *,
    owner_id: str | None,
    now: datetime,
    closed_at: str,
) -> StatusTransitionResult:
    """Move the session from ``expected`` to ``next`` if it is there and the move is allowed."""
    record = require_session(tables, session_id)
    if record.status != expected or expected == next:
        return StatusTransitionResult(changed=False, record=record)
    if (expected, next) not in _ALLOWED_CHANGES:
        raise SessionStoreError(
            SESS_INVALID_TRANSITION, f'session "{session_id}" cannot move from {expected} to {next}'
        )
    if owner_id is not None:
        require_owner(record, owner_id, now)
    tables.update_status(session_id, next, closed_at)
    return StatusTransitionResult(changed=True, record=require_session(tables, session_id))


def set_metadata(
    tables: Tables,
    session_id: str,
    metadata: FrozenDict,
    *,
    names_lease: bool,
    owner_id: str | None,
    now: datetime,
) -> SessionRecord:
    """Replace an active session's metadata; the stored lease stays unless ``metadata`` names one."""
    record = require_session(tables, session_id)
    if owner_id is not None:
        require_owner(record, owner_id, now)
    if record.status != "active":
        raise _closed(record)
    kept = {} if names_lease else stored_lease_entries(record.metadata)
    tables.update_metadata(session_id, metadata_text(metadata, kept))
    return require_session(tables, session_id)


def renew_lease(
    tables: Tables, session_id: str, owner_id: str, *, now: datetime, lease: Lease
) -> SessionLease:
    """Extend ``owner_id``'s live lease of an active session to ``lease``."""
    record = require_session(tables, session_id)
    require_renewable(record, owner_id, now)
    tables.update_metadata(session_id, metadata_text(record.metadata, lease))
    renewed = require_session(tables, session_id).lease
    assert renewed is not None
    return renewed


# ---------------------------------------------------------------- checkpoints, recovery and reopening


def get_checkpoint(tables: Tables, session_id: str) -> SessionCheckpoint | None:
    """The session's checkpoint, ``None`` before the first save."""
    row = tables.checkpoint_row(session_id)
    if row is None:
        raise not_found(session_id)
    return decode_checkpoint(row)


def save_checkpoint(
    tables: Tables,
    session_id: str,
    *,
    expected_revision: int,
    after_seq: int,
    payload: JsonValue,
    text: str,
    updated_at: str,
) -> SessionCheckpoint:
    """Save revision ``expected_revision + 1``, or return it if this very save was the last one."""
    record = require_session(tables, session_id)
    row = tables.checkpoint_row(session_id)
    assert row is not None
    current_seq, current_payload = row[2], row[3]
    if (
        record.checkpoint_revision == expected_revision + 1
        and current_seq == after_seq
        and current_payload == text
    ):
        repeated = decode_checkpoint(row)
        assert repeated is not None
        return repeated
    if record.status != "active":
        raise _closed(record)
    if record.checkpoint_revision != expected_revision:
        raise SessionStoreError(
            SESS_CHECKPOINT_CONFLICT,
            f'checkpoint of session "{session_id}" is at revision {record.checkpoint_revision},'
            f" not {expected_revision}",
        )
    if type(current_seq) is int and after_seq < current_seq:
        raise SessionStoreError(
            SESS_CHECKPOINT_CONFLICT,
            f"checkpoint after_seq {after_seq} is behind the current checkpoint at {current_seq}",
        )
    if after_seq >= record.next_seq:
        raise SessionStoreError(
            SESS_INVALID_RECORD,
            f"checkpoint after_seq {after_seq} is not below next_seq {record.next_seq}",
        )
    revision = expected_revision + 1
    tables.update_checkpoint(session_id, revision, after_seq, text, updated_at)
    return SessionCheckpoint(
        session_id=session_id, revision=revision, after_seq=after_seq, payload=payload, updated_at=updated_at
    )


def recover_interrupted(
    tables: Tables,
    session_id: str,
    event: Event,
    payload: str,
    *,
    expected_metadata: FrozenDict | None,
    now: datetime,
    closed_at: str,
) -> RecoverInterruptedResult:
    """Close a session whose lease expired, storing its ``session.restored`` event once."""
    record = require_session(tables, session_id)
    _require_metadata(record, expected_metadata)
    require_expired_lease(record, now)
    existing = tables.event_row(event.event_id)
    stored = None if existing is None else _duplicate(existing, session_id, event.event_id, payload)
    if record.status != "active":
        return RecoverInterruptedResult(recovered=False, record=record, event=stored)
    if stored is None:
        stored = _insert(tables, record, event, payload)
    tables.update_status(session_id, "closed", closed_at)
    return RecoverInterruptedResult(recovered=True, record=require_session(tables, session_id), event=stored)


def reopen_session(
    tables: Tables,
    session_id: str,
    *,
    owner_id: str,
    expected_metadata: FrozenDict | None,
    now: datetime,
    lease: Lease,
) -> SessionRecord:
    """Take a closed (or active) session up again under ``owner_id``'s new lease."""
    record = require_session(tables, session_id)
    if record.status == "archived":
        raise _closed(record)
    _require_metadata(record, expected_metadata)
    if record.status == "active":
        require_acquirable(record, owner_id, now)
    else:
        # A closed session takes no writes, so its old lease fences nothing and is replaced.
        tables.reactivate_session(session_id)
    tables.update_metadata(session_id, metadata_text(record.metadata, lease))
    return require_session(tables, session_id)
