"""The ``EventStore`` port the runtime appends to, and its two implementations (spec §6.1)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

import trio
from msgspec import UNSET

from harness_kernel.events._codec import validate_event
from harness_kernel.events._model import Event
from harness_kernel.store._records import (
    PAGE_MAX_LIMIT,
    SESS_INVALID_RECORD,
    SessionStoreError,
    check_id,
)
from harness_kernel.store._sqlite import SqliteSessionStore

__all__ = ["EventStore", "MemoryEventStore", "SqliteEventStore"]


@runtime_checkable
class EventStore(Protocol):
    """Where the runtime appends its events; ``read_session`` yields one session's events in order."""

    async def append(self, event: Event) -> None:
        """Store ``event`` durably before returning."""
        ...

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        """The stored events whose ``data.sessionId`` is ``session_id``, in append order."""
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
    """An in-memory :class:`EventStore` for tests: every appended event, in append order."""

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
    """Pages through ``SqliteSessionStore.read`` lazily, one page at a time."""

    def __init__(self, store: SqliteSessionStore, session_id: str) -> None:
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


class SqliteEventStore:
    """The :class:`EventStore` port over one existing session of a :class:`SqliteSessionStore`.

    Args:
        store: The session store (its owner opens and closes it).
        session_id: The session every append goes to.
        owner_id: Passed to every append, so a lost lease stops the writer.

    Raises:
        SessionStoreError: ``SESS_INVALID_RECORD`` — an invalid id.
    """

    def __init__(self, store: SqliteSessionStore, session_id: str, *, owner_id: str | None = None) -> None:
        self._store = store
        self._session_id = check_id(session_id, "session_id")
        self._owner_id = None if owner_id is None else check_id(owner_id, "owner_id")

    async def append(self, event: Event) -> None:
        """``store.append(session_id, event, owner_id=…)``.

        Raises:
            TypeError: ``event`` is not exactly an ``Event``.
            SessionStoreError: ``SESS_INVALID_RECORD`` when the event names another session,
                and every error of :meth:`SqliteSessionStore.append`.
        """
        if type(event) is not Event:
            raise TypeError(f"append expects an Event, not {type(event).__name__}")
        named = _event_session_id(event)
        if named is not UNSET and named != self._session_id:
            raise SessionStoreError(
                SESS_INVALID_RECORD, f'event names session "{named}", not "{self._session_id}"'
            )
        await self._store.append(self._session_id, event, owner_id=self._owner_id)

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        """The session's stored events in seq order, read page by page."""
        return _SessionPages(self._store, session_id)
