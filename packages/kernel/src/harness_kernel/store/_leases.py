"""Ownership leases: how a session's lease is kept, read and checked — the one place that knows.

A lease is a session's ``ownerId`` and ``leaseExpiresAt`` (ISO 8601 with an offset), kept
in the stored metadata object, where the SQLite schema has always held them (so databases
written by other implementations, and by earlier servers, keep their meaning). The store
writes them: callers take a lease with ``create(owner_id=…, lease_ms=…)`` and renew it with
``renew_lease``, and the store clock alone judges whether it is live. Metadata a caller
passes may still name the two keys — the way leases were written before the store owned
them, kept while callers move over — and then they replace the stored lease; metadata that
names neither keeps it. ``SessionRecord.metadata`` is the stored object as it is (lease keys
included) and ``SessionRecord.lease`` its lease, read.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from harness_kernel._json import FrozenDict, JsonValue, encode_json, freeze_json
from harness_kernel.store._records import (
    SESS_OWNERSHIP_LOST,
    SESS_RECOVERY_CONFLICT,
    SessionLease,
    SessionRecord,
    SessionStoreError,
    format_time,
    frozen_json_text,
)

__all__ = [
    "LEASE_KEYS",
    "caller_metadata",
    "lease_entries",
    "metadata_text",
    "parse_offset_time",
    "read_lease",
    "require_acquirable",
    "require_expired_lease",
    "require_owner",
    "require_renewable",
    "stored_lease_entries",
    "without_lease",
]

OWNER_KEY: Final = "ownerId"
EXPIRY_KEY: Final = "leaseExpiresAt"
LEASE_KEYS: Final = (OWNER_KEY, EXPIRY_KEY)


def parse_offset_time(value: object) -> datetime | None:
    """The time an ISO 8601 text with an offset names (a lease expiry, a ``closed_at``), else ``None``."""
    if type(value) is not str:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def caller_metadata(value: object, name: str) -> tuple[FrozenDict, bool]:
    """Validate metadata a caller passes: a JSON object (≤ 16 MiB); and whether it names a lease key.

    Raises:
        SessionStoreError: ``SESS_INVALID_RECORD`` — not a JSON object, or too large.
    """
    frozen, _ = frozen_json_text(value, name, object_only=True)
    assert type(frozen) is FrozenDict
    return frozen, any(key in frozen for key in LEASE_KEYS)


def without_lease(stored: FrozenDict) -> FrozenDict:
    """``stored`` without its lease keys (the caller's part of the metadata)."""
    if not any(key in stored for key in LEASE_KEYS):
        return stored
    caller = freeze_json(
        {key: value for key, value in stored.items() if key not in LEASE_KEYS}, max_nodes=None
    )
    assert type(caller) is FrozenDict
    return caller


def read_lease(stored: FrozenDict) -> SessionLease | None:
    """The lease stored metadata holds: ``None`` without an owner (an ``ownerId`` that is not a
    non-empty string is none); an expiry that does not parse gives ``expires_at=None``."""
    owner = stored.get(OWNER_KEY)
    if type(owner) is not str or not owner:
        return None
    return SessionLease(owner_id=owner, expires_at=parse_offset_time(stored.get(EXPIRY_KEY)))


def stored_lease_entries(stored: FrozenDict) -> dict[str, JsonValue]:
    """The lease keys of stored metadata exactly as stored, so rewriting the rest keeps them."""
    return {key: stored[key] for key in LEASE_KEYS if key in stored}


def lease_entries(owner_id: str, now: datetime, lease_ms: int) -> dict[str, JsonValue]:
    """The metadata entries of a lease for ``owner_id`` running ``lease_ms`` from ``now``."""
    return {OWNER_KEY: owner_id, EXPIRY_KEY: format_time(now + timedelta(milliseconds=lease_ms))}


def metadata_text(metadata: FrozenDict, lease: dict[str, JsonValue]) -> str:
    """The stored text of ``metadata`` with ``lease`` written over its lease keys (if any)."""
    return encode_json({**without_lease(metadata), **lease} if lease else metadata).decode()


def _lost(record: SessionRecord, owner_id: str, why: str) -> SessionStoreError:
    return SessionStoreError(
        SESS_OWNERSHIP_LOST, f'session "{record.session_id}" is not leased to "{owner_id}" ({why})'
    )


def require_owner(record: SessionRecord, owner_id: str, now: datetime) -> None:
    """A write by ``owner_id`` needs its live lease: same owner, expiry strictly after ``now``.

    Raises:
        SessionStoreError: ``SESS_OWNERSHIP_LOST``.
    """
    lease = record.lease
    if lease is None or lease.owner_id != owner_id or not lease.live_at(now):
        raise _lost(record, owner_id, "owner changed or lease expired")


def require_acquirable(record: SessionRecord, owner_id: str, now: datetime) -> None:
    """``owner_id`` may take the lease: the session is active and no other owner's lease is live.

    Raises:
        SessionStoreError: ``SESS_OWNERSHIP_LOST``.
    """
    if record.status != "active":
        raise _lost(record, owner_id, f"the session is {record.status}")
    lease = record.lease
    if lease is not None and lease.owner_id != owner_id and lease.live_at(now):
        raise _lost(record, owner_id, f'"{lease.owner_id}" holds a live lease')


def require_renewable(record: SessionRecord, owner_id: str, now: datetime) -> None:
    """``owner_id`` may renew its lease: the session is active and ``owner_id`` holds it, live.

    Raises:
        SessionStoreError: ``SESS_OWNERSHIP_LOST``.
    """
    if record.status != "active":
        raise _lost(record, owner_id, f"the session is {record.status}")
    require_owner(record, owner_id, now)


def require_expired_lease(record: SessionRecord, now: datetime) -> None:
    """Recovery needs an owner whose lease has run out by ``now`` (a readable expiry at or before it).

    Raises:
        SessionStoreError: ``SESS_RECOVERY_CONFLICT``.
    """
    lease = record.lease
    if lease is None or not lease.expired_at(now):
        raise SessionStoreError(
            SESS_RECOVERY_CONFLICT, f'session "{record.session_id}" has no expired owner lease to recover'
        )
