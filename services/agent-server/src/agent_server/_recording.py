"""What one connection's sessions write to the session store (spec §6, §9).

Each batch of events the runtime appends is redacted, stored with one owner-fenced commit, and
its notification texts queued in the session's outbox; a stored ``permission.requested``
opens the ask it names. The events count for the principal's byte quota as they are
stored. Without persistence, closed sessions are deleted at once (nothing could restore them).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Final

from agent_server._conversation import PendingPermission, Session
from agent_server._protocol import encode_notification
from agent_server._state import ServerState
from agent_server._turns import RunEvents
from harness_kernel.events import (
    ErrorData,
    Event,
    SessionCreatedData,
    create_event,
    format_timestamp,
    redact_event,
    serialize_event,
)

__all__ = ["Recorder"]

_log: Final = logging.getLogger("agent_server")


class Recorder:
    """Stores the events of one connection's sessions, fenced by the connection's lease owner id.

    Args:
        state: The server-wide state (its store, its quotas).
        principal: The connection's principal; the stored bytes count for it.
        owner_id: The connection's lease owner id, which fences every append.
    """

    def __init__(self, state: ServerState, *, principal: str, owner_id: str) -> None:
        self._state = state
        self._config = state.config
        self._principal = principal
        self._owner_id = owner_id

    def timestamp(self) -> str:
        """The configured clock's time as an event timestamp."""
        return format_timestamp(self._state.hooks.now())

    def created_event(self, session: Session) -> Event:
        """The ``session.created`` event stored with the session's first turn."""
        return create_event(
            "session.created",
            SessionCreatedData(session_id=session.id, workspace=session.workspace),
            event_id=self._state.hooks.new_id("evt"),
            at=self.timestamp(),
            actor="kernel",
        )

    def run_events(self, session: Session, *, prelude: Event | None) -> RunEvents:
        """The event store the runtime appends ``session``'s events to, every turn."""
        return RunEvents(session.id, functools.partial(self.record, session), self._read, prelude=prelude)

    def _read(self, session_id: str) -> AsyncIterator[Event]:
        return self._state.store.event_log(session_id, owner_id=self._owner_id).read_session(session_id)

    async def record(self, session: Session, events: Sequence[Event]) -> None:
        """Redact and store ``events`` with one commit, then queue their notifications (§6).

        Raises:
            Exception: the events were not stored (the run is aborted); a redaction failure
                stores the events before it and its replacement ``error`` event first.
        """
        redacted: list[Event] = []
        for event in events:
            try:
                redacted.append(redact_event(event))
            except Exception:
                _log.exception("event redaction failed in session %s", session.id)
                session.abort.abort("event redaction failed")
                await self._store(session, [*redacted, self._redaction_failed()])
                raise
        # Handed over without keeping a name for them in this frame: only the notification
        # texts outlive the store call.
        handover = [redacted]
        del redacted
        await self._store(session, handover.pop())

    def _redaction_failed(self) -> Event:
        """The ``error`` event stored in place of one whose redaction failed."""
        return create_event(
            "error",
            ErrorData(code="EVENT_REDACTION_FAILED", message="event redaction failed", retryable=False),
            event_id=self._state.hooks.new_id("evt"),
            at=self.timestamp(),
            actor="agent-server",
        )

    async def _store(self, session: Session, events: list[Event]) -> None:
        if not events:
            return
        try:
            stored = await self._state.store.append_many(session.id, events, owner_id=self._owner_id)
        except Exception as error:
            session.persistence_failed = True
            session.persistence_error = error
            session.abort.abort("persistence failure")
            raise
        finally:
            events.clear()
        size = 0
        for item in stored:
            event = item.event
            if event.type == "permission.requested":
                permission_id: object = getattr(event.data, "permission_id", None)
                if type(permission_id) is str:
                    session.pending[permission_id] = PendingPermission()
            data = serialize_event(event)
            size += len(data)
            session.outbox.texts.append(encode_notification(session.id, item.seq, data))
        del stored
        self._state.quotas.record(session.id, self._principal, size)

    async def forget_closed(self) -> None:
        """Without persistence nothing can be restored: drop closed sessions at once.

        The in-memory store would otherwise keep every event of a long-running server; the
        dropped events no longer count for their principal's byte quota.
        """
        store = self._state.store
        now = await store.current_time()
        while deleted := await store.delete_closed(closed_before=now + timedelta(seconds=1), limit=100):
            self._state.quotas.forget(deleted)
