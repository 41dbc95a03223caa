"""``TransactionalStore``: the ``SessionStore`` operations, once, for every store built on ``Tables``.

Each public operation checks its arguments and reads the clock in the calling task (so no
user callable runs elsewhere and bad input fails before any effect), then runs its body from
:mod:`harness_kernel.store._operations` as one transaction of the subclass:
``SqliteSessionStore`` on its connection in a worker thread, ``MemorySessionStore`` on its
dictionaries after a trio checkpoint.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Final, Self, TypeVar

from msgspec import UNSET

from harness_kernel._ids import random_id
from harness_kernel._json import FrozenDict, JsonValue, encode_json
from harness_kernel.events._codec import validate_event
from harness_kernel.events._model import Event
from harness_kernel.store import _operations as operations
from harness_kernel.store._leases import caller_metadata, lease_entries
from harness_kernel.store._ports import SessionEventLog
from harness_kernel.store._records import (
    APPEND_MANY_MAX,
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SESS_INVALID_TRANSITION,
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
    check_cursor,
    check_id,
    check_lease_ms,
    check_limit,
    check_timestamp,
    format_time,
    frozen_json_text,
)
from harness_kernel.store._tables import Tables

__all__ = ["TransactionalStore", "system_now"]

_T = TypeVar("_T")
_STATUSES: Final = frozenset({"active", "closed", "archived"})


def system_now() -> datetime:
    """The system clock in UTC (the default store clock)."""
    return datetime.now(UTC)


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _canonicalize(event: Event) -> tuple[Event, str]:
    """The event as it will read back, and its stored text.

    This is serialize → deserialize → serialize with one validation instead of three:
    ``validate_event`` rebuilds the event exactly as decoding its wire form would, and
    encoding a validated event is byte-stable, so the two extra passes add nothing.
    """
    decoded = validate_event(event)
    return decoded, encode_json(decoded).decode()


def _canonical_batch(events: Sequence[Event]) -> tuple[tuple[Event, str], ...]:
    """Every event of an ``append_many`` batch canonicalized, before anything is stored."""
    kind: type = type(events)  # compared through a name: no narrowing to list[Unknown]
    if kind is not list and kind is not tuple:
        raise TypeError(f"append_many expects a list or tuple of Events, not {kind.__name__}")
    if not 1 <= len(events) <= APPEND_MANY_MAX:
        raise SessionStoreError(
            SESS_INVALID_RECORD, f"append_many takes 1 to {APPEND_MANY_MAX} events, not {len(events)}"
        )
    return tuple(_canonicalize(event) for event in events)


def _optional_owner(owner_id: str | None) -> str | None:
    return None if owner_id is None else check_id(owner_id, "owner_id")


def _expected_metadata(value: dict[str, object] | FrozenDict | None) -> FrozenDict | None:
    return None if value is None else caller_metadata(value, "expected_metadata")[0]


class TransactionalStore(abc.ABC):
    """The operations of a ``SessionStore`` over ``Tables``; subclasses supply the transaction.

    Args:
        now: The store clock (leases, default timestamps); defaults to the system clock in
            UTC. A naive time is taken as UTC.
    """

    def __init__(self, *, now: Callable[[], datetime] | None = None) -> None:
        self._now = system_now if now is None else now

    @abc.abstractmethod
    async def _transact(self, work: Callable[[Tables], _T], *, write: bool) -> _T:
        """Run ``work`` as one transaction (all of its writes or none) and return its result."""

    @abc.abstractmethod
    async def _open(self) -> None:
        """Open the store, or raise why it cannot be."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close the store: operations already running finish, later ones raise ``SESS_INVALID_RECORD``."""

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _clock(self) -> datetime:
        return _aware(self._now())

    async def current_time(self) -> datetime:
        """The store clock: the injected ``now`` (a naive time taken as UTC), else the system clock."""
        return self._clock()

    # ------------------------------------------------------------ sessions

    async def create(
        self,
        session_id: str | None = None,
        *,
        task_id: str | None = None,
        created_at: str | None = None,
        metadata: dict[str, object] | FrozenDict | None = None,
        owner_id: str | None = None,
        lease_ms: int | None = None,
    ) -> SessionRecord:
        """Create a session, or reopen it (keeping its ``created_at``, filling a missing ``task_id``).

        Args:
            session_id: Defaults to ``sess-<uuid4>``.
            task_id: The task the session serves.
            created_at: Defaults to the store clock.
            metadata: A JSON object encoding to at most 16 MiB (default ``{}``); a reopen
                keeps the stored one. Naming ``ownerId`` and ``leaseExpiresAt`` in it is the
                legacy way to write a lease (prefer ``owner_id``; not both).
            owner_id: Take the session's lease for this owner, in the same transaction (a
                reopen takes it over unless another owner's lease is live); needs ``lease_ms``.
            lease_ms: How long the lease runs from the store clock (1 to 86 400 000).

        Raises:
            SessionStoreError: ``SESS_INVALID_RECORD`` — an invalid id, timestamp, metadata or
                lease length, only one of ``owner_id`` and ``lease_ms``, or ``owner_id`` with
                metadata naming a lease key; ``SESS_OWNERSHIP_LOST`` — reopening with
                ``owner_id`` a session that is not active or whose live lease another owner
                holds.
        """
        sid = random_id("sess") if session_id is None else check_id(session_id, "session_id")
        task = None if task_id is None else check_id(task_id, "task_id")
        created = None if created_at is None else check_timestamp(created_at, "created_at")
        frozen, names_lease = caller_metadata({} if metadata is None else metadata, "metadata")
        owner = _optional_owner(owner_id)
        if (owner is None) != (lease_ms is None):
            raise SessionStoreError(SESS_INVALID_RECORD, "owner_id and lease_ms go together")
        if owner is not None and names_lease:
            raise SessionStoreError(
                SESS_INVALID_RECORD, "metadata may not name ownerId or leaseExpiresAt with owner_id"
            )
        now = self._clock()
        lease = None if owner is None else lease_entries(owner, now, check_lease_ms(lease_ms))
        stamp = format_time(now) if created is None else created
        return await self._transact(
            lambda tables: operations.create_session(
                tables,
                sid,
                task_id=task,
                created_at=stamp,
                metadata=frozen,
                owner_id=owner,
                now=now,
                lease=lease,
            ),
            write=True,
        )

    async def get(self, session_id: str) -> SessionRecord:
        """The session's record.

        Raises:
            SessionStoreError: ``SESS_NOT_FOUND``; ``SESS_INVALID_RECORD`` for a bad id.
        """
        sid = check_id(session_id, "session_id")
        return await self._transact(lambda tables: operations.require_session(tables, sid), write=False)

    async def list(self) -> tuple[SessionListing, ...]:
        """Every session with its event count, newest first (``created_at``, then ``session_id``)."""
        return await self._transact(operations.list_sessions, write=False)

    async def delete_closed(self, *, closed_before: datetime, limit: int = 100) -> tuple[str, ...]:
        """Delete up to ``limit`` closed or archived sessions closed before ``closed_before``.

        The retention step of a long-running server: each session goes with its events and
        checkpoint, all in one transaction, so a session is either wholly kept or wholly gone.
        Active sessions are never touched, nor is a session whose ``closed_at`` does not
        parse as an ISO 8601 time with an offset. Candidates are taken by ``closed_at`` as
        text, then ``session_id``. Audit readers see a gap in ``global_seq`` where deleted
        events were; a deleted event's id may be used again.

        Args:
            closed_before: The cutoff (a naive time is taken as UTC).
            limit: At most this many sessions in one call (1 to 1000).

        Returns:
            The ids of the deleted sessions, oldest first.

        Raises:
            SessionStoreError: ``SESS_INVALID_CURSOR`` for a bad limit; ``SESS_INVALID_RECORD``
                when ``closed_before`` is not a ``datetime``.
        """
        if not isinstance(closed_before, datetime):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SessionStoreError(SESS_INVALID_RECORD, "closed_before must be a datetime")
        cutoff = _aware(closed_before)
        count = check_limit(limit)
        return await self._transact(
            lambda tables: operations.delete_closed(tables, cutoff, count), write=True
        )

    # ------------------------------------------------------------ events

    async def append(self, session_id: str, event: Event, *, owner_id: str | None = None) -> SequencedEvent:
        """Append ``event`` to the session in one transaction; a repeat of a stored event returns it.

        Args:
            session_id: The session.
            event: The event; it is stored in canonical form.
            owner_id: With it, the session's lease must be this owner's and live under the
                store clock (checked before the duplicate rule).

        Raises:
            TypeError: ``event`` is not exactly an ``Event``.
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: the
                event is not valid; nothing is stored.
            SessionStoreError: ``SESS_NOT_FOUND``, ``SESS_OWNERSHIP_LOST``,
                ``SESS_EVENT_CONFLICT`` (the eventId is stored elsewhere or differently),
                ``SESS_CLOSED``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        owner = _optional_owner(owner_id)
        decoded, payload = _canonicalize(event)
        now = self._clock() if owner is not None else None
        return await self._transact(
            lambda tables: operations.append_event(tables, sid, decoded, payload, owner_id=owner, now=now),
            write=True,
        )

    async def append_many(
        self, session_id: str, events: Sequence[Event], *, owner_id: str | None = None
    ) -> tuple[SequencedEvent, ...]:
        """Append ``events`` in order in one transaction: all of them, or none.

        The result is what :meth:`append` would return for each event in turn inside that
        transaction (a repeat of a stored event, or of an earlier one in the batch, returns
        the stored event); one durable commit covers the batch.

        Args:
            session_id: The session.
            events: 1 to :data:`APPEND_MANY_MAX` events, each stored in canonical form.
            owner_id: With it, the session's lease must be this owner's and live.

        Raises:
            TypeError: ``events`` is not a list or tuple, or an item is not exactly an ``Event``.
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: an
                event is not valid; nothing is stored.
            SessionStoreError: ``SESS_INVALID_RECORD`` (no events, or more than
                :data:`APPEND_MANY_MAX`), and every error of :meth:`append`; nothing is stored.
        """
        sid = check_id(session_id, "session_id")
        owner = _optional_owner(owner_id)
        batch = _canonical_batch(events)
        now = self._clock() if owner is not None else None
        return await self._transact(
            lambda tables: tuple(
                operations.append_event(tables, sid, decoded, payload, owner_id=owner, now=now)
                for decoded, payload in batch
            ),
            write=True,
        )

    async def read(self, session_id: str, *, after_seq: int = -1, limit: int = 100) -> SessionEventPage:
        """The session's events with ``seq > after_seq``, ascending, at most ``limit``.

        Raises:
            SessionStoreError: ``SESS_INVALID_CURSOR`` (cursor not an int >= -1, limit not
                1..1000), ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: a
                stored payload is corrupt.
        """
        sid = check_id(session_id, "session_id")
        after = check_cursor(after_seq, "after_seq")
        count = check_limit(limit)
        return await self._transact(
            lambda tables: operations.read_page(tables, sid, after, count), write=False
        )

    async def read_audit_events(self, *, after_global_seq: int = -1, limit: int = 100) -> AuditEventPage:
        """Events of every session with ``global_seq > after_global_seq``, ascending (gaps possible).

        Raises:
            SessionStoreError: ``SESS_INVALID_CURSOR``, ``SESS_INVALID_RECORD``.
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: a
                stored payload is corrupt.
        """
        after = check_cursor(after_global_seq, "after_global_seq")
        count = check_limit(limit)
        return await self._transact(lambda tables: operations.read_audit(tables, after, count), write=False)

    async def slice(self, session_id: str, start: int, stop: int | None = None) -> tuple[SequencedEvent, ...]:
        """The session's events with ``start <= seq < stop`` (to the end when ``stop`` is None).

        Raises:
            SessionStoreError: ``SESS_INVALID_CURSOR`` (bounds not ints ≥ 0),
                ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        first = check_cursor(start, "start")
        end = None if stop is None else check_cursor(stop, "stop")
        if first < 0 or (end is not None and end < 0):
            raise SessionStoreError(SESS_INVALID_CURSOR, "slice bounds must be integers >= 0")
        return await self._transact(
            lambda tables: operations.slice_events(tables, sid, first, end), write=False
        )

    async def size(self, session_id: str) -> int:
        """How many events the session holds.

        Raises:
            SessionStoreError: ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        return await self._transact(lambda tables: operations.count_events(tables, sid), write=False)

    def event_log(self, session_id: str, *, owner_id: str | None = None) -> SessionEventLog:
        """The session's :class:`SessionEventLog`: the runtime's ``EventStore``, appending as ``owner_id``.

        Raises:
            SessionStoreError: ``SESS_INVALID_RECORD`` — an invalid id.
        """
        return SessionEventLog(self, session_id, owner_id=owner_id)

    # ------------------------------------------------------------ status, metadata and lease

    async def transition(
        self,
        session_id: str,
        expected: SessionStatus,
        next: SessionStatus,
        *,
        at: str | None = None,
        owner_id: str | None = None,
    ) -> StatusTransitionResult:
        """Move the session from ``expected`` to ``next`` if it is in ``expected``.

        Allowed: the same status (no change), active → closed, closed → archived. A session
        not in ``expected`` is left unchanged. Closing sets ``closed_at`` once (``at``, else
        the store clock).

        Raises:
            SessionStoreError: ``SESS_INVALID_TRANSITION``, ``SESS_OWNERSHIP_LOST`` (checked
                only when a change would happen), ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        if expected not in _STATUSES or next not in _STATUSES:
            raise SessionStoreError(
                SESS_INVALID_TRANSITION, f"unknown session status {expected!r} or {next!r}"
            )
        owner = _optional_owner(owner_id)
        now = self._clock()
        closed_at = format_time(now) if at is None else check_timestamp(at, "at")
        return await self._transact(
            lambda tables: operations.transition(
                tables, sid, expected, next, owner_id=owner, now=now, closed_at=closed_at
            ),
            write=True,
        )

    async def close(
        self, session_id: str, *, at: str | None = None, owner_id: str | None = None
    ) -> StatusTransitionResult:
        """Close an active session: ``transition(session_id, "active", "closed", …)``."""
        return await self.transition(session_id, "active", "closed", at=at, owner_id=owner_id)

    async def set_metadata(
        self, session_id: str, metadata: dict[str, object] | FrozenDict, *, owner_id: str | None = None
    ) -> SessionRecord:
        """Replace an active session's metadata (a JSON object encoding to at most 16 MiB).

        The stored lease stays, unless ``metadata`` names ``ownerId`` or ``leaseExpiresAt``
        (the legacy way to renew a lease; prefer :meth:`renew_lease`): then it is written as
        given.

        Raises:
            SessionStoreError: ``SESS_OWNERSHIP_LOST`` (with ``owner_id``), ``SESS_CLOSED``,
                ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        owner = _optional_owner(owner_id)
        frozen, names_lease = caller_metadata(metadata, "metadata")
        now = self._clock()
        return await self._transact(
            lambda tables: operations.set_metadata(
                tables, sid, frozen, names_lease=names_lease, owner_id=owner, now=now
            ),
            write=True,
        )

    async def renew_lease(self, session_id: str, owner_id: str, *, lease_ms: int) -> SessionLease:
        """Renew ``owner_id``'s live lease: it then runs ``lease_ms`` from the store clock.

        Owner-fenced, like an owner's append: only the holder of a live lease of an active
        session renews it (a lease that ran out is lost; taking a session over is
        ``create(session_id, owner_id=…, lease_ms=…)``). A shorter ``lease_ms`` shortens it.

        Returns:
            The lease as stored (its expiry has millisecond precision).

        Raises:
            SessionStoreError: ``SESS_OWNERSHIP_LOST`` — the session is not active, or its
                lease is not ``owner_id``'s, or has expired; ``SESS_NOT_FOUND``;
                ``SESS_INVALID_RECORD`` — a bad id or a ``lease_ms`` outside 1 to 86 400 000.
        """
        sid = check_id(session_id, "session_id")
        owner = check_id(owner_id, "owner_id")
        length = check_lease_ms(lease_ms)
        now = self._clock()
        lease = lease_entries(owner, now, length)
        return await self._transact(
            lambda tables: operations.renew_lease(tables, sid, owner, now=now, lease=lease), write=True
        )

    # ------------------------------------------------------------ checkpoints and recovery

    async def get_checkpoint(self, session_id: str) -> SessionCheckpoint | None:
        """The session's latest checkpoint, or ``None`` before the first save.

        Raises:
            SessionStoreError: ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        return await self._transact(lambda tables: operations.get_checkpoint(tables, sid), write=False)

    async def save_checkpoint(
        self,
        session_id: str,
        *,
        expected_revision: int,
        after_seq: int,
        payload: JsonValue | dict[str, object] | list[object],
        updated_at: str | None = None,
    ) -> SessionCheckpoint:
        """Save a checkpoint covering events up to ``after_seq``, as revision ``expected_revision + 1``.

        An identical repeat of the previous save (same revision, ``after_seq`` and payload
        bytes) returns it.

        Raises:
            SessionStoreError: ``SESS_CHECKPOINT_CONFLICT`` (the revision moved on, or
                ``after_seq`` is behind the current checkpoint), ``SESS_INVALID_RECORD``
                (``after_seq`` not below ``next_seq``, payload not JSON), ``SESS_CLOSED``,
                ``SESS_INVALID_CURSOR``, ``SESS_NOT_FOUND``.
        """
        sid = check_id(session_id, "session_id")
        if type(expected_revision) is not int or expected_revision < 0:
            raise SessionStoreError(SESS_INVALID_RECORD, "expected_revision must be an integer >= 0")
        after = check_cursor(after_seq, "after_seq")
        frozen, text = frozen_json_text(payload, "checkpoint payload", object_only=False)
        stamp = (
            format_time(self._clock()) if updated_at is None else check_timestamp(updated_at, "updated_at")
        )
        return await self._transact(
            lambda tables: operations.save_checkpoint(
                tables,
                sid,
                expected_revision=expected_revision,
                after_seq=after,
                payload=frozen,
                text=text,
                updated_at=stamp,
            ),
            write=True,
        )

    async def recover_interrupted(
        self,
        session_id: str,
        event: Event,
        *,
        closed_at: str | None = None,
        expected_metadata: dict[str, object] | FrozenDict | None = None,
    ) -> RecoverInterruptedResult:
        """Close a session whose owner's lease expired, recording the ``session.restored`` event.

        One transaction; of concurrent callers only the one that closes the session gets
        ``recovered=True``.

        Args:
            session_id: The session.
            event: Its ``session.restored`` event (stored unless already there).
            closed_at: Defaults to the store clock.
            expected_metadata: With it, the session's stored metadata (lease keys included)
                must still equal it.

        Raises:
            SessionStoreError: ``SESS_RECOVERY_CONFLICT`` (metadata differs from
                ``expected_metadata``, or the lease is live or unreadable, or there is none),
                ``SESS_EVENT_CONFLICT``, ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD`` (the
                event is not a ``session.restored`` of this session).
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: the
                event is not valid.
        """
        sid = check_id(session_id, "session_id")
        decoded, payload = _canonicalize(event)
        if decoded.type != "session.restored" or getattr(decoded.data, "session_id", UNSET) != sid:
            raise SessionStoreError(
                SESS_INVALID_RECORD, f'recovery needs a session.restored event of session "{sid}"'
            )
        expected = _expected_metadata(expected_metadata)
        now = self._clock()
        stamp = format_time(now) if closed_at is None else check_timestamp(closed_at, "closed_at")
        return await self._transact(
            lambda tables: operations.recover_interrupted(
                tables, sid, decoded, payload, expected_metadata=expected, now=now, closed_at=stamp
            ),
            write=True,
        )

    async def reopen(
        self,
        session_id: str,
        *,
        owner_id: str,
        lease_ms: int,
        expected_metadata: dict[str, object] | FrozenDict | None = None,
    ) -> SessionRecord:
        """Take a session up again under a new lease: the way back from ``recover_interrupted``.

        One transaction. A closed session becomes active again (``closed_at`` cleared; its
        events, checkpoint and metadata kept) and its lease, whoever held it, is replaced by
        ``owner_id``'s; an active session's lease is taken as ``create(…, owner_id=…)``
        takes it (the owner's own lease is renewed, a lapsed one taken over). From then on
        only ``owner_id``'s owner-fenced writes pass. Of concurrent reopeners of one session
        exactly one wins; the others meet its live lease.

        Args:
            session_id: The session.
            owner_id: The new owner.
            lease_ms: How long the lease runs from the store clock (1 to 86 400 000).
            expected_metadata: With it, the session's stored metadata (lease keys included)
                must still equal it, as read before deciding to reopen.

        Returns:
            The reopened session's record.

        Raises:
            SessionStoreError: ``SESS_NOT_FOUND``; ``SESS_CLOSED`` — the session is archived
                (never reopened); ``SESS_RECOVERY_CONFLICT`` — the metadata differs from
                ``expected_metadata``; ``SESS_OWNERSHIP_LOST`` — the session is active and
                another owner's lease is live; ``SESS_INVALID_RECORD`` — a bad id, metadata
                or ``lease_ms``.
        """
        sid = check_id(session_id, "session_id")
        owner = check_id(owner_id, "owner_id")
        length = check_lease_ms(lease_ms)
        expected = _expected_metadata(expected_metadata)
        now = self._clock()
        lease = lease_entries(owner, now, length)
        return await self._transact(
            lambda tables: operations.reopen_session(
                tables, sid, owner_id=owner, expected_metadata=expected, now=now, lease=lease
            ),
            write=True,
        )
