"""The store's records, its typed error and the checks made at its edge (spec §6)."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import msgspec

from harness_kernel._errors import HarnessError
from harness_kernel._ids import format_timestamp as format_time
from harness_kernel._json import (
    MAX_SAFE_INTEGER,
    FrozenDict,
    JsonDataError,
    JsonValue,
    encode_json,
    freeze_json,
)
from harness_kernel.events._model import Event

__all__ = [
    "ID_MAX_CHARS",
    "JSON_MAX_BYTES",
    "PAGE_MAX_LIMIT",
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
    "RecoverInterruptedResult",
    "SequencedEvent",
    "SessionCheckpoint",
    "SessionEventPage",
    "SessionListing",
    "SessionRecord",
    "SessionStatus",
    "SessionStoreError",
    "StatusTransitionResult",
    "check_cursor",
    "check_id",
    "check_limit",
    "check_timestamp",
    "format_time",
    "frozen_json_text",
]

SESS_NOT_FOUND: Final = "SESS_NOT_FOUND"
SESS_INVALID_RECORD: Final = "SESS_INVALID_RECORD"
SESS_CLOSED: Final = "SESS_CLOSED"
SESS_EVENT_CONFLICT: Final = "SESS_EVENT_CONFLICT"
SESS_INVALID_CURSOR: Final = "SESS_INVALID_CURSOR"
SESS_INVALID_TRANSITION: Final = "SESS_INVALID_TRANSITION"
SESS_CHECKPOINT_CONFLICT: Final = "SESS_CHECKPOINT_CONFLICT"
SESS_RECOVERY_CONFLICT: Final = "SESS_RECOVERY_CONFLICT"
SESS_OWNERSHIP_LOST: Final = "SESS_OWNERSHIP_LOST"
SESS_SCHEMA_VERSION: Final = "SESS_SCHEMA_VERSION"

ID_MAX_CHARS: Final = 256
JSON_MAX_BYTES: Final = 16 * 1_048_576
"""Largest compact JSON encoding of session metadata or a checkpoint payload (16 MiB)."""
PAGE_MAX_LIMIT: Final = 1000

SessionStatus: TypeAlias = Literal["active", "closed", "archived"]


class SessionStoreError(HarnessError):
    """A session store operation failed; ``code`` is one of the ten ``SESS_*`` codes."""


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One session as stored.

    ``next_seq`` is the seq the next appended event gets; ``checkpoint_revision`` is 0
    until the first checkpoint is saved.
    """

    session_id: str
    task_id: str | None
    status: SessionStatus
    created_at: str
    closed_at: str | None
    metadata: FrozenDict
    next_seq: int
    checkpoint_revision: int


class SessionListing(msgspec.Struct, frozen=True, kw_only=True):
    """A session and how many events it holds, as :meth:`SqliteSessionStore.list` returns it."""

    record: SessionRecord
    event_count: int


class SequencedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A stored event with its per-session ``seq`` and store-wide ``global_seq``."""

    session_id: str
    seq: int
    global_seq: int
    event: Event


class SessionEventPage(msgspec.Struct, frozen=True, kw_only=True):
    """One page of a session's events; pass ``next_after_seq`` back to read on."""

    events: tuple[SequencedEvent, ...]
    next_after_seq: int
    has_more: bool


class AuditEventPage(msgspec.Struct, frozen=True, kw_only=True):
    """One page of events across sessions in ``global_seq`` order."""

    events: tuple[SequencedEvent, ...]
    next_after_global_seq: int
    has_more: bool


class StatusTransitionResult(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a status transition changed the session, and the record afterwards."""

    changed: bool
    record: SessionRecord


class SessionCheckpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A session's latest checkpoint: ``payload`` covers the events up to ``after_seq``."""

    session_id: str
    revision: int
    after_seq: int
    payload: JsonValue
    updated_at: str


class RecoverInterruptedResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :meth:`SqliteSessionStore.recover_interrupted`.

    ``recovered`` is true only for the caller that closed the session; ``event`` is the
    stored ``session.restored`` event when there is one.
    """

    recovered: bool
    record: SessionRecord
    event: SequencedEvent | None


def check_id(value: object, name: str) -> str:
    """``value`` if it is an exact ``str`` of 1..256 code points, else ``SESS_INVALID_RECORD``."""
    if type(value) is not str or not 1 <= len(value) <= ID_MAX_CHARS:
        raise SessionStoreError(
            SESS_INVALID_RECORD, f"{name} must be a string of 1..{ID_MAX_CHARS} characters"
        )
    return value


def check_cursor(value: object, name: str) -> int:
    """``value`` if it is an exact ``int`` in -1..2**53-1, else ``SESS_INVALID_CURSOR``."""
    if type(value) is not int or not -1 <= value <= MAX_SAFE_INTEGER:
        raise SessionStoreError(SESS_INVALID_CURSOR, f"{name} must be an integer >= -1")
    return value


def check_limit(value: object) -> int:
    """``value`` if it is an exact ``int`` in 1..1000, else ``SESS_INVALID_CURSOR``."""
    if type(value) is not int or not 1 <= value <= PAGE_MAX_LIMIT:
        raise SessionStoreError(SESS_INVALID_CURSOR, f"limit must be an integer from 1 to {PAGE_MAX_LIMIT}")
    return value


def check_timestamp(value: object, name: str) -> str:
    """``value`` if it is a non-empty exact ``str`` of at most 256 code points."""
    if type(value) is not str or not 1 <= len(value) <= ID_MAX_CHARS:
        raise SessionStoreError(SESS_INVALID_RECORD, f"{name} must be a timestamp string")
    return value


def frozen_json_text(value: object, name: str, *, object_only: bool) -> tuple[JsonValue, str]:
    """Validate JSON data for storage: its frozen copy and compact text (≤ 16 MiB).

    Raises:
        SessionStoreError: ``SESS_INVALID_RECORD`` — not JSON data, not an object when
            ``object_only``, or encoding to more than 16 MiB.
    """
    try:
        frozen = freeze_json(value, max_nodes=None)
    except JsonDataError as error:
        raise SessionStoreError(SESS_INVALID_RECORD, f"{name} is not JSON data: {error}") from None
    if object_only and type(frozen) is not FrozenDict:
        raise SessionStoreError(SESS_INVALID_RECORD, f"{name} must be a JSON object")
    encoded = encode_json(frozen)
    if len(encoded) > JSON_MAX_BYTES:
        raise SessionStoreError(SESS_INVALID_RECORD, f"{name} encodes to more than 16 MiB")
    return frozen, encoded.decode()
