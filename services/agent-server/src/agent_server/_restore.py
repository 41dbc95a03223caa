"""``session/restore``: replay stored events, marking interrupted sessions (spec §8); and the same
checks for ``session/continue``, which takes an interrupted session up again (issue #23)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Final, Literal

from agent_server._errors import (
    AcpError,
    InvalidParamsError,
    SessionNotContinuableError,
    SessionNotFoundError,
    SessionNotRestorableError,
)
from agent_server._protocol import RestoreParams, RestoreResult, encode_notification
from agent_server._state import ServerState
from harness_kernel.events import Event, create_event, format_timestamp, serialize_event
from harness_kernel.store import (
    SESS_INVALID_CURSOR,
    SESS_NOT_FOUND,
    SESS_RECOVERY_CONFLICT,
    SessionLease,
    SessionRecord,
    SessionStoreError,
)

__all__ = [
    "claim_interrupted",
    "claim_session",
    "is_interrupted_marker",
    "restorable_lease",
    "restore_session",
]

_INTERRUPTED_NOTE: Final = "the owning connection ended before the session finished"

Status = Literal["completed", "interrupted"]


def restorable_lease(state: ServerState, record: SessionRecord) -> SessionLease:
    """The session's lease, if its row is an agent-server session of this root with one.

    Raises:
        AcpError: ``-32013`` for any other row.
    """
    metadata = record.metadata
    workspace = metadata.get("workspace")
    root = state.root.rstrip(os.sep)
    inside = (
        type(workspace) is str
        and os.path.isabs(workspace)
        and os.path.normpath(workspace) == workspace
        and (workspace == state.root or workspace.startswith(root + os.sep))
    )
    lease = record.lease
    if (
        metadata.get("kind") != "agent-session"
        or not inside
        or metadata.get("modelName") not in state.config.model.models
        or lease is None
        or lease.expires_at is None
    ):
        raise SessionNotRestorableError("session metadata is not an agent-server session of this root")
    return lease


def is_interrupted_marker(event: Event | None) -> bool:
    """Whether ``event`` is the ``session.restored`` marker of an interrupted session."""
    return (
        event is not None
        and event.type == "session.restored"
        and getattr(event.data, "outcome", None) == "interrupted"
    )


async def _record_of(state: ServerState, session_id: str, principal: str | None) -> SessionRecord:
    """The row, if ``principal`` (when given) created it: to anyone else it does not exist."""
    if not state.persistent:
        raise SessionNotRestorableError("session persistence is disabled")
    record = await state.store.get(session_id)
    if principal is not None and record.metadata.get("principal") != principal:
        raise SessionNotFoundError(session_id)
    return record


async def _settle(state: ServerState, record: SessionRecord, size: int, after_seq: int) -> Status:
    """Steps 4 and 5 of §8: the session's status; an abandoned active row is marked interrupted.

    Raises:
        AcpError: ``-32013`` while the owner's lease is live.
        SessionStoreError: the store's own failures.
    """
    store = state.store
    session_id = record.session_id
    lease = restorable_lease(state, record)
    last = (await store.slice(session_id, size - 1, size))[-1].event if size else None
    if record.status != "active":
        return "interrupted" if is_interrupted_marker(last) else "completed"
    if lease.live_at(await store.current_time()):
        raise SessionNotRestorableError("owner lease has not expired")
    if last is not None and last.type == "agent.stopped":
        await store.close(session_id)
        return "completed"
    marker = create_event(
        "session.restored",
        {
            "sessionId": session_id,
            "afterSeq": after_seq,
            "availableThroughSeq": size - 1,
            "availableEvents": max(0, size - after_seq - 1),
            "outcome": "interrupted",
            "note": _INTERRUPTED_NOTE,
        },
        event_id=state.hooks.new_id("evt"),
        at=format_timestamp(await state.clock()),
        actor="agent-server",
    )
    await store.recover_interrupted(session_id, marker, expected_metadata=record.metadata)
    return "interrupted"


def _acp_error(error: SessionStoreError, session_id: str) -> AcpError | None:
    """The protocol error of a store error (§8 step 7), or ``None`` for an internal failure."""
    if error.code == SESS_NOT_FOUND:
        return SessionNotFoundError(session_id)
    if error.code == SESS_INVALID_CURSOR:
        return InvalidParamsError("invalid restore cursor")
    if error.code == SESS_RECOVERY_CONFLICT:
        return SessionNotRestorableError("session recovery conflict")
    return None


async def restore_session(
    state: ServerState, params: RestoreParams, send: Callable[[str], Awaitable[None]], *, principal: str
) -> RestoreResult:
    """Replay one stored session page as ``session/event`` notifications.

    Only the principal that created a session may restore it; to any other the session does
    not exist (``-32010``), so its id cannot be probed either.

    Raises:
        AcpError: per the mapping of spec §8.
    """
    store = state.store
    session_id = params.session_id
    try:
        record = await _record_of(state, session_id, principal)
        restorable_lease(state, record)
        size = await store.size(session_id)
        if params.after_seq > size - 1:
            raise InvalidParamsError(
                f"restore cursor {params.after_seq} is beyond the last durable sequence {size - 1}"
            )
        status = await _settle(state, record, size, params.after_seq)
        page = await store.read(session_id, after_seq=params.after_seq, limit=params.limit)
    except SessionStoreError as error:
        mapped = _acp_error(error, session_id)
        if mapped is None:
            raise
        raise mapped from None
    # One frame at a time, each waiting for outbound room: a page may be far larger than the
    # outbound cap, and a client that reads normally must receive all of it.
    for stored in page.events:
        await send(encode_notification(session_id, stored.seq, serialize_event(stored.event)))
    return RestoreResult(
        session_id=session_id,
        status=status,
        replayed_from_seq=params.after_seq + 1,
        replayed_through_seq=page.next_after_seq,
        replayed_events=len(page.events),
        has_more=page.has_more,
    )


async def claim_session(
    state: ServerState, session_id: str, *, principal: str | None
) -> tuple[SessionRecord, Literal["interrupted", "completed"]]:
    """The row of a session to take up on a connection, and whether its last turn was interrupted.

    The checks are :func:`claim_interrupted`'s, but a session whose last turn ended is
    returned too (``"completed"``; an abandoned active row is closed first), so that a
    conversation can go on with a follow-up after a restart.
    """
    try:
        record = await _record_of(state, session_id, principal)
        status = await _settle(state, record, await state.store.size(session_id), -1)
    except SessionStoreError as error:
        mapped = _acp_error(error, session_id)
        if mapped is None:
            raise
        raise mapped from None
    return record, "interrupted" if status == "interrupted" else "completed"


async def claim_interrupted(state: ServerState, session_id: str, *, principal: str | None) -> SessionRecord:
    """The row of an interrupted session that may be continued (``session/continue``).

    The checks are restore's: the creating ``principal`` only (``None``: the server itself,
    at start-up), an agent-server session of this root, no live owner lease. An abandoned
    active row is marked interrupted first, exactly as a restore would mark it; a session
    whose last turn ended is closed as completed and refused.

    Raises:
        AcpError: ``-32010``, ``-32013`` as restore; ``-32023`` when nothing was interrupted.
    """
    record, status = await claim_session(state, session_id, principal=principal)
    if status != "interrupted":
        raise SessionNotContinuableError("the session's last turn ended; there is nothing to continue")
    return record
