"""The store's records, its typed error and the checks made at its edge (spec §6)."""

from __future__ import annotations

from datetime import datetime
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
    has_lone_surrogate,
)
from harness_kernel.events._model import Event

__all__ = [
    "APPEND_MANY_MAX",
    "ID_MAX_CHARS",
    "JSON_MAX_BYTES",
    "LEASE_MAX_MS",
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
    "SessionLease",
    "SessionListing",
    "SessionRecord",
    "SessionStatus",
    "SessionStoreError",
    "StatusTransitionResult",
    "check_cursor",
    "check_id",
    "check_lease_ms",
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
APPEND_MANY_MAX: Final = 1000
"""The most events one ``SessionStore.append_many`` call takes."""
LEASE_MAX_MS: Final = 86_400_000
"""Longest lease one ``create`` or ``renew_lease`` grants (one day); owners renew well before."""

SessionStatus: TypeAlias = Literal["active", "closed", "archived"]


class SessionStoreError(HarnessError):
    """A session store operation failed; ``code`` is one of the ten ``SESS_*`` codes."""


class SessionLease(msgspec.Struct, frozen=True, kw_only=True):
    """Who owns a session's writes, and until when (the store clock decides).

    ``expires_at`` is ``None`` when the stored expiry cannot be read (a database written by
    other code): such a lease is never live, so its owner's writes are refused, and never
    expired, so it cannot be recovered either; any owner may take it over.
    """

    owner_id: str
    expires_at: datetime | None

    def live_at(self, now: datetime) -> bool:
        """Whether the lease still holds at ``now`` (an aware time): its expiry is strictly later."""
        return self.expires_at is not None and self.expires_at > now

    def expired_at(self, now: datetime) -> bool:
        """Whether the lease has run out by ``now`` (an aware time), so the session may be recovered."""
        return self.expires_at is not None and self.expires_at <= now


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One session as stored.

    ``next_seq`` is the seq the next appended event gets; ``checkpoint_revision`` is 0
    until the first checkpoint is saved. ``metadata`` is the stored metadata object, and
    ``lease`` the ownership lease it holds, read (``None`` while nobody has taken one).
    """

    session_id: str
    task_id: str | None
    status: SessionStatus
    created_at: str
    closed_at: str | None
    metadata: FrozenDict
    next_seq: int
    checkpoint_revision: int
    lease: SessionLease | None = None


class SessionListing(msgspec.Struct, frozen=True, kw_only=True):
    """A session and how many events it holds, as ``SessionStore.list`` returns it."""

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
    """The outcome of ``SessionStore.recover_interrupted``.

    ``recovered`` is true only for the caller that closed the session; ``event`` is the
    stored ``session.restored`` event when there is one.
    """

    recovered: bool
    record: SessionRecord
    event: SequencedEvent | None


def _storable_text(value: object) -> bool:
    # A lone surrogate cannot be encoded as UTF-8, so no database could store it.
    return type(value) is str and 1 <= len(value) <= ID_MAX_CHARS and not has_lone_surrogate(value)


def check_id(value: object, name: str) -> str:
    """``value`` if it is an exact ``str`` of 1..256 code points without a lone surrogate.

    Raises:
        SessionStoreError: ``SESS_INVALID_RECORD``.
    """
    if not _storable_text(value):
        raise SessionStoreError(
            SESS_INVALID_RECORD, f"{name} must be a string of 1..{ID_MAX_CHARS} characters"
        )
    assert isinstance(value, str)
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
    """``value`` if it is a non-empty exact ``str`` of at most 256 code points (no lone surrogate)."""
    if not _storable_text(value):
        raise SessionStoreError(SESS_INVALID_RECORD, f"{name} must be a timestamp string")
    assert isinstance(value, str)
    return value


def check_lease_ms(value: object) -> int:
    """``value`` if it is an exact ``int`` in 1..86 400 000 (one day), else ``SESS_INVALID_RECORD``."""
    if type(value) is not int or not 1 <= value <= LEASE_MAX_MS:
        raise SessionStoreError(SESS_INVALID_RECORD, f"lease_ms must be an integer from 1 to {LEASE_MAX_MS}")
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
