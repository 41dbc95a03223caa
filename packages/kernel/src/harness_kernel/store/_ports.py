"""The store's ports (spec §6.1): ``EventStore``, ``SessionStore``, and the one per-session log.

``EventStore`` is what the runtime appends to; ``SessionStore`` is what a server keeps its
sessions in. :class:`SessionEventLog` binds one session (and owner) of any ``SessionStore``
and is an ``EventStore``, so a runtime writes into a session without knowing the store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import trio
from msgspec import UNSET

from harness_kernel._json import FrozenDict, JsonValue
from harness_kernel.events._codec import validate_event
from harness_kernel.events._model import Event
from harness_kernel.store._records import (
    PAGE_MAX_LIMIT,
    SESS_INVALID_RECORD,
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
    check_id,
)

__all__ = ["BatchEventStore", "EventStore", "MemoryEventStore", "SessionEventLog", "SessionStore"]


@runtime_checkable
class EventStore(Protocol):
    """Where the runtime appends its events; ``read_session`` yields one session's events in order."""

    async def append(self, event: Event) -> object:
        """Store ``event`` durably before returning (what it returns is not used)."""
        ...

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        """The stored events whose ``data.sessionId`` is ``session_id``, in append order."""
        ...


@runtime_checkable
class BatchEventStore(EventStore, Protocol):
    """An :class:`EventStore` that can also store several events with one durable commit.

    The runtime uses ``append_many`` for the events the spec publishes without an
    acknowledgement wait between them (the three admission events, the terminal pair); a
    plain ``EventStore`` gets them one ``append`` at a time.
    """

    async def append_many(self, events: Sequence[Event]) -> object:
        """Store ``events`` in order, all or none, durably before returning (the value is not used)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Sessions and their event logs: what a server keeps its sessions in (spec §6.3).

    Every implementation has the same semantics, pinned by
    :mod:`harness_kernel.store.conformance`: contiguous per-session ``seq`` from 0, a
    store-wide ``global_seq``, idempotent appends by event id, ownership leases judged by
    the store clock, paged reads, status transitions, checkpoints with revisions,
    recovery and reopening of interrupted sessions, retention, and every ``SESS_*`` code
    in the same situations. Each operation is atomic; a failure changes nothing.
    :class:`MemorySessionStore` and :class:`SqliteSessionStore` implement it.

    Leases: ``create(…, owner_id=…, lease_ms=…)`` takes a session's lease in the
    transaction that creates it (or finds it active); ``renew_lease`` extends the holder's live
    lease; every write given ``owner_id`` (append, close, transition, set_metadata) needs
    that owner's live lease, judged by :meth:`current_time`; ``recover_interrupted`` closes
    only a session whose lease has run out, and ``reopen`` takes a closed session up again
    under a new owner's lease. ``SessionRecord.lease`` shows the lease.
    """

    async def __aenter__(self) -> Self:
        """Open the store (and fail now if it cannot be opened)."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """:meth:`aclose`."""
        ...

    async def aclose(self) -> None:
        """Close the store; later operations raise ``SESS_INVALID_RECORD``."""
        ...

    async def current_time(self) -> datetime:
        """The store clock (an aware time) that judges leases and stamps default times."""
        ...

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
        """Create or reopen a session; with ``owner_id``, take its lease in the same transaction."""
        ...

    async def get(self, session_id: str) -> SessionRecord:
        """The session's record."""
        ...

    async def list(self) -> tuple[SessionListing, ...]:
        """Every session with its event count, newest first."""
        ...

    async def delete_closed(self, *, closed_before: datetime, limit: int = 100) -> tuple[str, ...]:
        """Delete up to ``limit`` sessions closed before ``closed_before``, with their events."""
        ...

    async def append(self, session_id: str, event: Event, *, owner_id: str | None = None) -> SequencedEvent:
        """Append ``event`` (a repeat of a stored event returns it)."""
        ...

    async def append_many(
        self, session_id: str, events: Sequence[Event], *, owner_id: str | None = None
    ) -> tuple[SequencedEvent, ...]:
        """Append ``events`` in order, atomically and with one durable commit (``append`` each, or none)."""
        ...

    async def read(self, session_id: str, *, after_seq: int = -1, limit: int = 100) -> SessionEventPage:
        """One page of the session's events after ``after_seq``."""
        ...

    async def read_audit_events(self, *, after_global_seq: int = -1, limit: int = 100) -> AuditEventPage:
        """One page of every session's events after ``after_global_seq``."""
        ...

    async def slice(self, session_id: str, start: int, stop: int | None = None) -> tuple[SequencedEvent, ...]:
        """The session's events with ``start <= seq < stop``."""
        ...

    async def size(self, session_id: str) -> int:
        """How many events the session holds."""
        ...

    def event_log(self, session_id: str, *, owner_id: str | None = None) -> SessionEventLog:
        """The session's :class:`SessionEventLog` (appends as ``owner_id``)."""
        ...

    async def transition(
        self,
        session_id: str,
        expected: SessionStatus,
        next: SessionStatus,
        *,
        at: str | None = None,
        owner_id: str | None = None,
    ) -> StatusTransitionResult:
        """Move the session from ``expected`` to ``next`` if it is in ``expected``."""
        ...

    async def close(
        self, session_id: str, *, at: str | None = None, owner_id: str | None = None
    ) -> StatusTransitionResult:
        """Close an active session."""
        ...

    async def set_metadata(
        self, session_id: str, metadata: dict[str, object] | FrozenDict, *, owner_id: str | None = None
    ) -> SessionRecord:
        """Replace an active session's metadata (its lease is kept unless the metadata names one)."""
        ...

    async def renew_lease(self, session_id: str, owner_id: str, *, lease_ms: int) -> SessionLease:
        """Extend ``owner_id``'s live lease to run ``lease_ms`` from the store clock."""
        ...

    async def get_checkpoint(self, session_id: str) -> SessionCheckpoint | None:
        """The session's latest checkpoint, ``None`` before the first save."""
        ...

    async def save_checkpoint(
        self,
        session_id: str,
        *,
        expected_revision: int,
        after_seq: int,
        payload: JsonValue | dict[str, object] | list[object],
        updated_at: str | None = None,
    ) -> SessionCheckpoint:
        """Save the next checkpoint revision."""
        ...

    async def recover_interrupted(
        self,
        session_id: str,
        event: Event,
        *,
        closed_at: str | None = None,
        expected_metadata: dict[str, object] | FrozenDict | None = None,
    ) -> RecoverInterruptedResult:
        """Close a session whose owner's lease expired, storing its ``session.restored`` event."""
        ...

    async def reopen(
        self,
        session_id: str,
        *,
        owner_id: str,
        lease_ms: int,
        expected_metadata: dict[str, object] | FrozenDict | None = None,
    ) -> SessionRecord:
        """Make a closed (or active) session active under ``owner_id``'s new lease (not an archived one)."""
        ...


def _event_session_id(event: Event) -> object:
    return getattr(event.data, "session_id", UNSET)


class _EventsOf:
    """An async iterator over a snapshot of events (a checkpoint per item, like real I/O)."""

    def __init__(self, events: tuple[Event, ...]) -> None:
        self._events = deque(events)

    def __aiter__(self) -> _EventsOf:
        return self

    async def __anext__(self) -> Event:
        await trio.lowlevel.checkpoint()
        if not self._events:
            raise StopAsyncIteration
        return self._events.popleft()


class MemoryEventStore:
    """An in-memory :class:`EventStore` for tests: every appended event, in append order.

    It has no ``append_many`` (a test double that overrides ``append`` sees every event);
    ``MemorySessionStore().event_log(…)`` is the in-memory :class:`BatchEventStore`.
    """

    def __init__(self) -> None:
        self._events: list[Event] = []

    @property
    def events(self) -> tuple[Event, ...]:
        """Every appended event, in append order."""
        return tuple(self._events)

    async def append(self, event: Event) -> None:
        """Validate and keep ``event``.

        Raises:
            TypeError: ``event`` is not exactly an ``Event``.
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: the
                event is not valid; nothing is kept.
        """
        valid = validate_event(event)
        await trio.lowlevel.checkpoint()
        self._events.append(valid)

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        """The kept events whose ``data.session_id`` is ``session_id``, in append order."""
        return _EventsOf(tuple(event for event in self._events if _event_session_id(event) == session_id))


class _SessionPages:
    """Pages through ``SessionStore.read`` lazily, one page at a time."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._buffer: deque[Event] = deque()
        self._after_seq = -1
        self._exhausted = False

    def __aiter__(self) -> _SessionPages:
        return self

    async def __anext__(self) -> Event:
        while not self._buffer:
            if self._exhausted:
                raise StopAsyncIteration
            page = await self._store.read(self._session_id, after_seq=self._after_seq, limit=PAGE_MAX_LIMIT)
            self._buffer.extend(sequenced.event for sequenced in page.events)
            self._after_seq = page.next_after_seq
            self._exhausted = not page.has_more
        return self._buffer.popleft()


class SessionEventLog:
    """One session of a :class:`SessionStore`, bound with its owner: the runtime's :class:`EventStore`.

    Every append goes to the bound session as the bound owner (so a lost lease stops the
    writer); an event naming another session is refused. ``store.event_log(session_id,
    owner_id=…)`` returns one; ``SqliteEventStore`` is another name for this class.

    Args:
        store: The session store (its owner opens and closes it).
        session_id: The session every append goes to (it must exist when appending).
        owner_id: Passed to every append.

    Raises:
        TypeError: ``store`` is not a :class:`SessionStore`.
        SessionStoreError: ``SESS_INVALID_RECORD`` — an invalid id.
    """

    __slots__ = ("_owner_id", "_session_id", "_store")

    def __init__(self, store: SessionStore, session_id: str, *, owner_id: str | None = None) -> None:
        if not isinstance(store, SessionStore):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"store must be a SessionStore, not {type(store).__name__}")
        self._store = store
        self._session_id = check_id(session_id, "session_id")
        self._owner_id = None if owner_id is None else check_id(owner_id, "owner_id")

    @property
    def session_id(self) -> str:
        """The session this log is bound to."""
        return self._session_id

    @property
    def owner_id(self) -> str | None:
        """The owner every append is made as (``None``: appends check no lease)."""
        return self._owner_id

    async def append(self, event: Event) -> SequencedEvent:
        """Append ``event`` to the bound session (see ``SessionStore.append``).

        Raises:
            TypeError: ``event`` is not exactly an ``Event``.
            SessionStoreError: ``SESS_INVALID_RECORD`` when the event names another session,
                and every error of ``SessionStore.append``.
        """
        self._check_session(event)
        return await self._store.append(self._session_id, event, owner_id=self._owner_id)

    def _check_session(self, event: Event) -> None:
        if type(event) is not Event:
            raise TypeError(f"append expects an Event, not {type(event).__name__}")
        named = _event_session_id(event)
        if named is not UNSET and named != self._session_id:
            raise SessionStoreError(
                SESS_INVALID_RECORD, f'event names session "{named}", not "{self._session_id}"'
            )

    async def append_many(self, events: Sequence[Event]) -> tuple[SequencedEvent, ...]:
        """Append ``events`` to the bound session with one commit (see ``SessionStore.append_many``).

        Raises:
            TypeError: an item is not exactly an ``Event``.
            SessionStoreError: ``SESS_INVALID_RECORD`` when an event names another session,
                and every error of ``SessionStore.append_many``; nothing is stored.
        """
        kind: type = type(events)
        if kind is list or kind is tuple:  # anything else: the store's TypeError
            for event in events:
                self._check_session(event)
        return await self._store.append_many(self._session_id, events, owner_id=self._owner_id)

    async def read(self, *, after_seq: int = -1, limit: int = 100) -> SessionEventPage:
        """One page of the session's events (see ``SessionStore.read``)."""
        return await self._store.read(self._session_id, after_seq=after_seq, limit=limit)

    async def slice(self, start: int, stop: int | None = None) -> tuple[SequencedEvent, ...]:
        """The events with ``start <= seq < stop`` (see ``SessionStore.slice``)."""
        return await self._store.slice(self._session_id, start, stop)

    async def size(self) -> int:
        """How many events the session holds."""
        return await self._store.size(self._session_id)

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        """The bound session's events in seq order, read page by page.

        Raises:
            SessionStoreError: ``SESS_INVALID_RECORD`` — ``session_id`` is not the bound
                session (a log reads only its own).
        """
        if session_id != self._session_id:
            raise SessionStoreError(
                SESS_INVALID_RECORD, f'this event log is bound to session "{self._session_id}"'
            )
        return _SessionPages(self._store, session_id)
