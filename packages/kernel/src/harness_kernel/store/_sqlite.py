"""``SqliteSessionStore``: durable sessions and their event logs in one SQLite file (spec §6.2 to §6.4).

Every operation runs in a worker thread behind a one-slot limiter, on the store's single
connection, and each write is one explicit ``BEGIN IMMEDIATE … COMMIT``. The thread is never
abandoned: a started transaction always finishes, and a cancellation that arrived meanwhile
is delivered right after it. Arguments are validated in the calling task, before any thread.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import PurePath
from types import TracebackType
from typing import Final, Self, TypeVar

import trio
from msgspec import UNSET

from harness_kernel._json import FrozenDict, JsonValue, encode_json
from harness_kernel.events._codec import validate_event
from harness_kernel.events._model import Event
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
    check_cursor,
    check_id,
    check_limit,
    check_timestamp,
    format_time,
    frozen_json_text,
)
from harness_kernel.store._rows import (
    CHECKPOINT_COLUMNS,
    EVENT_COLUMNS,
    SESSION_COLUMNS,
    decode_checkpoint,
    decode_event_row,
    decode_session_row,
)
from harness_kernel.store._schema import Synchronous, connect_store

__all__ = ["SessionEventLog", "SqliteSessionStore"]

_T = TypeVar("_T")
_Work = Callable[[sqlite3.Connection], _T]

_STATUSES: Final = frozenset({"active", "closed", "archived"})
_ALLOWED_CHANGES: Final = frozenset({("active", "closed"), ("closed", "archived")})


def _system_now() -> datetime:
    return datetime.now(UTC)


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _offset_time(value: object) -> datetime | None:
    """The time an ISO 8601 timestamp with an offset names (a lease expiry, ``closed_at``), else ``None``."""
    if type(value) is not str:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _canonicalize(event: Event) -> tuple[Event, str]:
    """The event as it will read back, and its stored text.

    This is serialize → deserialize → serialize with one validation instead of three:
    ``validate_event`` rebuilds the event exactly as decoding its wire form would, and
    encoding a validated event is byte-stable, so the two extra passes add nothing.
    """
    decoded = validate_event(event)
    return decoded, encode_json(decoded).decode()


def _not_found(session_id: str) -> SessionStoreError:
    return SessionStoreError(SESS_NOT_FOUND, f'session "{session_id}" not found')


def _closed(record: SessionRecord) -> SessionStoreError:
    return SessionStoreError(SESS_CLOSED, f'session "{record.session_id}" is {record.status}')


def _check_ownership(record: SessionRecord, owner_id: str, now: datetime) -> None:
    expiry = _offset_time(record.metadata.get("leaseExpiresAt"))
    if record.metadata.get("ownerId") != owner_id or expiry is None or not expiry > now:
        raise SessionStoreError(
            SESS_OWNERSHIP_LOST,
            f'session "{record.session_id}" is not leased to "{owner_id}" (owner changed or lease expired)',
        )


# ---------------------------------------------------------------- work done on the connection


def _transaction(connection: sqlite3.Connection, work: _Work[_T], *, write: bool) -> _T:
    connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


def _find_session(connection: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    row = connection.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else decode_session_row(row)


def _require_session(connection: sqlite3.Connection, session_id: str) -> SessionRecord:
    record = _find_session(connection, session_id)
    if record is None:
        raise _not_found(session_id)
    return record


def _stored_duplicate(
    connection: sqlite3.Connection, session_id: str, event_id: str, canonical: str
) -> SequencedEvent | None:
    """The duplicate rule: the stored row for ``event_id`` if identical, ``None`` if absent."""
    row = connection.execute(f"SELECT {EVENT_COLUMNS} FROM events WHERE event_id = ?", (event_id,)).fetchone()
    if row is None:
        return None
    if row[0] != session_id or row[7] != canonical:
        raise SessionStoreError(
            SESS_EVENT_CONFLICT, f'event "{event_id}" is already stored with different content'
        )
    return decode_event_row(row)


def _insert_event(
    connection: sqlite3.Connection, record: SessionRecord, event: Event, canonical: str
) -> SequencedEvent:
    row = connection.execute("SELECT value FROM meta WHERE key = 'next_global_seq'").fetchone()
    text: object = None if row is None else row[0]
    if type(text) is not str or not text.isdigit():
        raise SessionStoreError(SESS_INVALID_RECORD, "stored next_global_seq is not a non-negative integer")
    global_seq = int(text)
    seq = record.next_seq
    connection.execute(
        f"INSERT INTO events({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.session_id,
            seq,
            global_seq,
            event.event_id,
            event.at,
            None if event.actor is UNSET else event.actor,
            event.type,
            canonical,
        ),
    )
    connection.execute("UPDATE sessions SET next_seq = ? WHERE session_id = ?", (seq + 1, record.session_id))
    connection.execute("UPDATE meta SET value = ? WHERE key = 'next_global_seq'", (str(global_seq + 1),))
    return SequencedEvent(session_id=record.session_id, seq=seq, global_seq=global_seq, event=event)


class SessionEventLog:
    """One session's event log: append, read, slice and size bound to a session (and owner).

    Get one from :meth:`SqliteSessionStore.event_log`.
    """

    __slots__ = ("_owner_id", "_session_id", "_store")

    def __init__(self, store: SqliteSessionStore, session_id: str, owner_id: str | None) -> None:
        self._store = store
        self._session_id = session_id
        self._owner_id = owner_id

    @property
    def session_id(self) -> str:
        """The session this log is bound to."""
        return self._session_id

    async def append(self, event: Event) -> SequencedEvent:
        """Append ``event`` to the session (see :meth:`SqliteSessionStore.append`)."""
        return await self._store.append(self._session_id, event, owner_id=self._owner_id)

    async def read(self, *, after_seq: int = -1, limit: int = 100) -> SessionEventPage:
        """One page of the session's events (see :meth:`SqliteSessionStore.read`)."""
        return await self._store.read(self._session_id, after_seq=after_seq, limit=limit)

    async def slice(self, start: int, stop: int | None = None) -> tuple[SequencedEvent, ...]:
        """The events with ``start <= seq < stop`` (see :meth:`SqliteSessionStore.slice`)."""
        return await self._store.slice(self._session_id, start, stop)

    async def size(self) -> int:
        """How many events the session holds."""
        return await self._store.size(self._session_id)


class SqliteSessionStore:
    """Sessions and their event logs in one SQLite database file (schema version 2).

    Opened by the first operation or ``async with``; closed by :meth:`aclose`.

    Args:
        path: The database file, handed unchanged to ``sqlite3.connect``; its directory must
            exist.
        now: The store clock (leases, default timestamps); defaults to the system clock in UTC.
            A naive time is taken as UTC.
        synchronous: ``"FULL"`` (every commit survives power loss) or ``"NORMAL"`` (survives
            a process crash; the latest commits may be lost on power loss).

    Raises:
        TypeError: ``path`` is neither a ``str`` nor a ``PurePath``.
        SessionStoreError: ``SESS_INVALID_RECORD`` — ``synchronous`` is not FULL or NORMAL.
    """

    def __init__(
        self,
        path: str | PurePath,
        *,
        now: Callable[[], datetime] | None = None,
        synchronous: Synchronous = "FULL",
    ) -> None:
        if type(path) is not str and not isinstance(path, PurePath):
            raise TypeError(f"path must be a str or PurePath, not {type(path).__name__}")
        if synchronous not in ("FULL", "NORMAL"):
            raise SessionStoreError(SESS_INVALID_RECORD, 'synchronous must be "FULL" or "NORMAL"')
        self._path = path
        self._now = _system_now if now is None else now
        self._synchronous: Synchronous = synchronous
        self._limiter = trio.CapacityLimiter(1)
        self._connection: sqlite3.Connection | None = None
        self._closed = False

    @property
    def path(self) -> str | PurePath:
        """The database file, as given."""
        return self._path

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        await self._call(lambda _connection: None)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the store: operations already running finish, later ones raise ``SESS_INVALID_RECORD``."""
        self._closed = True
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self._close_connection, limiter=self._limiter)

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _run_in_thread(self, work: _Work[_T]) -> _T:
        if self._closed:
            raise SessionStoreError(SESS_INVALID_RECORD, "session store is closed")
        if self._connection is None:
            self._connection = connect_store(self._path, self._synchronous)
        return work(self._connection)

    async def _call(self, work: _Work[_T]) -> _T:
        if self._closed:
            raise SessionStoreError(SESS_INVALID_RECORD, "session store is closed")
        result = await trio.to_thread.run_sync(
            self._run_in_thread, work, limiter=self._limiter, abandon_on_cancel=False
        )
        # The work has committed; a cancellation that arrived meanwhile lands now.
        await trio.lowlevel.checkpoint_if_cancelled()
        return result

    async def _write(self, work: _Work[_T]) -> _T:
        return await self._call(lambda connection: _transaction(connection, work, write=True))

    async def _read(self, work: _Work[_T]) -> _T:
        return await self._call(lambda connection: _transaction(connection, work, write=False))

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
    ) -> SessionRecord:
        """Create a session, or reopen it (keeping its ``created_at``, filling a missing ``task_id``).

        Args:
            session_id: Defaults to ``sess-<uuid4>``.
            task_id: The task the session serves.
            created_at: Defaults to the store clock.
            metadata: A JSON object encoding to at most 16 MiB (default ``{}``).

        Raises:
            SessionStoreError: ``SESS_INVALID_RECORD`` — an invalid id, timestamp or metadata.
        """
        sid = f"sess-{uuid.uuid4()}" if session_id is None else check_id(session_id, "session_id")
        task = None if task_id is None else check_id(task_id, "task_id")
        created = (
            format_time(self._clock()) if created_at is None else check_timestamp(created_at, "created_at")
        )
        _, metadata_text = frozen_json_text(
            {} if metadata is None else metadata, "metadata", object_only=True
        )

        def work(connection: sqlite3.Connection) -> SessionRecord:
            record = _find_session(connection, sid)
            if record is None:
                connection.execute(
                    "INSERT INTO sessions(session_id, task_id, status, created_at, metadata)"
                    " VALUES (?, ?, 'active', ?, ?)",
                    (sid, task, created, metadata_text),
                )
            elif record.task_id is None and task is not None:
                connection.execute("UPDATE sessions SET task_id = ? WHERE session_id = ?", (task, sid))
            else:
                return record
            return _require_session(connection, sid)

        return await self._write(work)

    async def get(self, session_id: str) -> SessionRecord:
        """The session's record.

        Raises:
            SessionStoreError: ``SESS_NOT_FOUND``; ``SESS_INVALID_RECORD`` for a bad id.
        """
        sid = check_id(session_id, "session_id")
        return await self._read(lambda connection: _require_session(connection, sid))

    async def list(self) -> tuple[SessionListing, ...]:
        """Every session with its event count, newest first (``created_at``, then ``session_id``)."""

        def work(connection: sqlite3.Connection) -> tuple[SessionListing, ...]:
            rows = connection.execute(
                f"SELECT {SESSION_COLUMNS},"
                " (SELECT COUNT(*) FROM events WHERE events.session_id = sessions.session_id)"
                " FROM sessions ORDER BY created_at DESC, session_id DESC"
            ).fetchall()
            return tuple(
                SessionListing(record=decode_session_row(row[:-1]), event_count=row[-1]) for row in rows
            )

        return await self._read(work)

    async def delete_closed(self, *, closed_before: datetime, limit: int = 100) -> tuple[str, ...]:
        """Delete up to ``limit`` closed or archived sessions closed before ``closed_before``.

        The retention step of a long-running server: each session goes with its events and
        checkpoint, all in one transaction, so a session is either wholly kept or wholly gone.
        Active sessions are never touched, nor is a session whose ``closed_at`` does not
        parse as an ISO 8601 time. SQLite reuses the freed pages, so a store under a retention
        policy stops growing (the file does not shrink; ``VACUUM`` would rewrite it whole).
        Audit readers see a gap in ``global_seq`` where deleted events were.

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

        def work(connection: sqlite3.Connection) -> tuple[str, ...]:
            # Canonical timestamps sort as text, which pre-selects; each one is then parsed,
            # so a foreign format is judged by its time or kept, never deleted by its spelling.
            rows = connection.execute(
                "SELECT session_id, closed_at FROM sessions WHERE status != 'active'"
                " AND closed_at IS NOT NULL AND closed_at < ? ORDER BY closed_at LIMIT ?",
                (format_time(cutoff), count),
            ).fetchall()
            doomed = tuple(
                str(session_id)
                for session_id, closed_at in rows
                if (moment := _offset_time(closed_at)) is not None and moment < cutoff
            )
            for session_id in doomed:
                connection.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
                connection.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            return doomed

        return await self._write(work)

    # ------------------------------------------------------------ events

    async def append(self, session_id: str, event: Event, *, owner_id: str | None = None) -> SequencedEvent:
        """Append ``event`` to the session in one transaction; a repeat of a stored event returns it.

        Args:
            session_id: The session.
            event: The event; it is stored in canonical form.
            owner_id: With it, the session's ``ownerId`` must equal it and its
                ``leaseExpiresAt`` must be later than the store clock.

        Raises:
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: the
                event is not valid; nothing is stored.
            SessionStoreError: ``SESS_NOT_FOUND``, ``SESS_OWNERSHIP_LOST``,
                ``SESS_EVENT_CONFLICT`` (the eventId is stored elsewhere or differently),
                ``SESS_CLOSED``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        owner = None if owner_id is None else check_id(owner_id, "owner_id")
        decoded, canonical = _canonicalize(event)
        now = self._clock() if owner is not None else None

        def work(connection: sqlite3.Connection) -> SequencedEvent:
            exists = connection.execute(
                "SELECT 1 FROM events WHERE event_id = ?", (decoded.event_id,)
            ).fetchone()
            record: SessionRecord | None = None
            if owner is not None or exists is None:
                record = _require_session(connection, sid)
                if owner is not None:
                    assert now is not None
                    _check_ownership(record, owner, now)
            stored = _stored_duplicate(connection, sid, decoded.event_id, canonical) if exists else None
            if stored is not None:
                return stored
            assert record is not None
            if record.status != "active":
                raise _closed(record)
            return _insert_event(connection, record, decoded, canonical)

        return await self._write(work)

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

        def work(connection: sqlite3.Connection) -> SessionEventPage:
            _require_session(connection, sid)
            rows = connection.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (sid, after, count + 1),
            ).fetchall()
            events = tuple(decode_event_row(row) for row in rows[:count])
            return SessionEventPage(
                events=events,
                next_after_seq=events[-1].seq if events else after,
                has_more=len(rows) > count,
            )

        return await self._read(work)

    async def read_audit_events(self, *, after_global_seq: int = -1, limit: int = 100) -> AuditEventPage:
        """Events of every session with ``global_seq > after_global_seq``, ascending (gaps possible).

        Raises:
            SessionStoreError: ``SESS_INVALID_CURSOR``, ``SESS_INVALID_RECORD``.
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: a
                stored payload is corrupt.
        """
        after = check_cursor(after_global_seq, "after_global_seq")
        count = check_limit(limit)

        def work(connection: sqlite3.Connection) -> AuditEventPage:
            rows = connection.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE global_seq > ? ORDER BY global_seq LIMIT ?",
                (after, count + 1),
            ).fetchall()
            events = tuple(decode_event_row(row) for row in rows[:count])
            return AuditEventPage(
                events=events,
                next_after_global_seq=events[-1].global_seq if events else after,
                has_more=len(rows) > count,
            )

        return await self._read(work)

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

        def work(connection: sqlite3.Connection) -> tuple[SequencedEvent, ...]:
            _require_session(connection, sid)
            query = f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq >= ?"
            arguments: tuple[object, ...] = (sid, first)
            if end is not None:
                query += " AND seq < ?"
                arguments = (sid, first, end)
            rows = connection.execute(query + " ORDER BY seq", arguments).fetchall()
            return tuple(decode_event_row(row) for row in rows)

        return await self._read(work)

    async def size(self, session_id: str) -> int:
        """How many events the session holds.

        Raises:
            SessionStoreError: ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")

        def work(connection: sqlite3.Connection) -> int:
            _require_session(connection, sid)
            row = connection.execute("SELECT COUNT(*) FROM events WHERE session_id = ?", (sid,)).fetchone()
            return int(row[0])

        return await self._read(work)

    def event_log(self, session_id: str, *, owner_id: str | None = None) -> SessionEventLog:
        """``append``/``read``/``slice``/``size`` bound to one session (and owner, for appends).

        Raises:
            SessionStoreError: ``SESS_INVALID_RECORD`` — an invalid id.
        """
        sid = check_id(session_id, "session_id")
        owner = None if owner_id is None else check_id(owner_id, "owner_id")
        return SessionEventLog(self, sid, owner)

    # ------------------------------------------------------------ status and metadata

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
        owner = None if owner_id is None else check_id(owner_id, "owner_id")
        moment = self._clock()
        closed_at = format_time(moment) if at is None else check_timestamp(at, "at")

        def work(connection: sqlite3.Connection) -> StatusTransitionResult:
            record = _require_session(connection, sid)
            if record.status != expected or expected == next:
                return StatusTransitionResult(changed=False, record=record)
            if (expected, next) not in _ALLOWED_CHANGES:
                raise SessionStoreError(
                    SESS_INVALID_TRANSITION, f'session "{sid}" cannot move from {expected} to {next}'
                )
            if owner is not None:
                _check_ownership(record, owner, moment)
            connection.execute(
                "UPDATE sessions SET status = ?, closed_at = COALESCE(closed_at, ?) WHERE session_id = ?",
                (next, closed_at, sid),
            )
            return StatusTransitionResult(changed=True, record=_require_session(connection, sid))

        return await self._write(work)

    async def close(
        self, session_id: str, *, at: str | None = None, owner_id: str | None = None
    ) -> StatusTransitionResult:
        """Close an active session: ``transition(session_id, "active", "closed", …)``."""
        return await self.transition(session_id, "active", "closed", at=at, owner_id=owner_id)

    async def set_metadata(
        self, session_id: str, metadata: dict[str, object] | FrozenDict, *, owner_id: str | None = None
    ) -> SessionRecord:
        """Replace an active session's metadata (a JSON object encoding to at most 16 MiB).

        Raises:
            SessionStoreError: ``SESS_OWNERSHIP_LOST`` (with ``owner_id``), ``SESS_CLOSED``,
                ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")
        owner = None if owner_id is None else check_id(owner_id, "owner_id")
        _, text = frozen_json_text(metadata, "metadata", object_only=True)
        moment = self._clock()

        def work(connection: sqlite3.Connection) -> SessionRecord:
            record = _require_session(connection, sid)
            if owner is not None:
                _check_ownership(record, owner, moment)
            if record.status != "active":
                raise _closed(record)
            connection.execute("UPDATE sessions SET metadata = ? WHERE session_id = ?", (text, sid))
            return _require_session(connection, sid)

        return await self._write(work)

    # ------------------------------------------------------------ checkpoints

    async def get_checkpoint(self, session_id: str) -> SessionCheckpoint | None:
        """The session's latest checkpoint, or ``None`` before the first save.

        Raises:
            SessionStoreError: ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD``.
        """
        sid = check_id(session_id, "session_id")

        def work(connection: sqlite3.Connection) -> SessionCheckpoint | None:
            row = connection.execute(
                f"SELECT {CHECKPOINT_COLUMNS} FROM sessions WHERE session_id = ?", (sid,)
            ).fetchone()
            if row is None:
                raise _not_found(sid)
            return decode_checkpoint(row)

        return await self._read(work)

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

        def work(connection: sqlite3.Connection) -> SessionCheckpoint:
            record = _require_session(connection, sid)
            row = connection.execute(
                "SELECT checkpoint_seq, checkpoint_payload FROM sessions WHERE session_id = ?", (sid,)
            ).fetchone()
            current_seq, current_payload = row
            if (
                record.checkpoint_revision == expected_revision + 1
                and current_seq == after
                and current_payload == text
            ):
                checkpoint = decode_checkpoint(
                    connection.execute(
                        f"SELECT {CHECKPOINT_COLUMNS} FROM sessions WHERE session_id = ?", (sid,)
                    ).fetchone()
                )
                assert checkpoint is not None
                return checkpoint
            if record.status != "active":
                raise _closed(record)
            if record.checkpoint_revision != expected_revision:
                raise SessionStoreError(
                    SESS_CHECKPOINT_CONFLICT,
                    f'checkpoint of session "{sid}" is at revision {record.checkpoint_revision},'
                    f" not {expected_revision}",
                )
            if type(current_seq) is int and after < current_seq:
                raise SessionStoreError(
                    SESS_CHECKPOINT_CONFLICT,
                    f"checkpoint after_seq {after} is behind the current checkpoint at {current_seq}",
                )
            if after >= record.next_seq:
                raise SessionStoreError(
                    SESS_INVALID_RECORD,
                    f"checkpoint after_seq {after} is not below next_seq {record.next_seq}",
                )
            revision = expected_revision + 1
            connection.execute(
                "UPDATE sessions SET checkpoint_revision = ?, checkpoint_seq = ?, checkpoint_payload = ?,"
                " checkpoint_updated_at = ? WHERE session_id = ?",
                (revision, after, text, stamp, sid),
            )
            return SessionCheckpoint(
                session_id=sid, revision=revision, after_seq=after, payload=frozen, updated_at=stamp
            )

        return await self._write(work)

    # ------------------------------------------------------------ recovery

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

        Raises:
            SessionStoreError: ``SESS_RECOVERY_CONFLICT`` (metadata differs from
                ``expected_metadata``, or the lease is live or invalid),
                ``SESS_EVENT_CONFLICT``, ``SESS_NOT_FOUND``, ``SESS_INVALID_RECORD`` (the
                event is not a ``session.restored`` of this session).
            EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: the
                event is not valid.
        """
        sid = check_id(session_id, "session_id")
        decoded, canonical = _canonicalize(event)
        if decoded.type != "session.restored" or getattr(decoded.data, "session_id", UNSET) != sid:
            raise SessionStoreError(
                SESS_INVALID_RECORD, f'recovery needs a session.restored event of session "{sid}"'
            )
        expected = (
            None
            if expected_metadata is None
            else frozen_json_text(expected_metadata, "expected_metadata", object_only=True)[0]
        )
        moment = self._clock()
        stamp = format_time(moment) if closed_at is None else check_timestamp(closed_at, "closed_at")

        def work(connection: sqlite3.Connection) -> RecoverInterruptedResult:
            record = _require_session(connection, sid)
            if expected is not None and record.metadata != expected:
                raise SessionStoreError(SESS_RECOVERY_CONFLICT, f'metadata of session "{sid}" has changed')
            owner = record.metadata.get("ownerId")
            expiry = _offset_time(record.metadata.get("leaseExpiresAt"))
            if type(owner) is not str or not owner or expiry is None or expiry > moment:
                raise SessionStoreError(
                    SESS_RECOVERY_CONFLICT, f'session "{sid}" has no expired owner lease to recover'
                )
            stored = _stored_duplicate(connection, sid, decoded.event_id, canonical)
            if record.status != "active":
                return RecoverInterruptedResult(recovered=False, record=record, event=stored)
            if stored is None:
                stored = _insert_event(connection, record, decoded, canonical)
            connection.execute(
                "UPDATE sessions SET status = 'closed', closed_at = COALESCE(closed_at, ?)"
                " WHERE session_id = ?",
                (stamp, sid),
            )
            return RecoverInterruptedResult(
                recovered=True, record=_require_session(connection, sid), event=stored
            )

        return await self._write(work)
