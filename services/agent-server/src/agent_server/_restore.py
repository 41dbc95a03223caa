"""``session/restore``: replay stored events, marking interrupted sessions (spec §8)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Final

from agent_server._errors import (
    InvalidParamsError,
    SessionNotFoundError,
    SessionNotRestorableError,
)
from agent_server._protocol import RestoreParams, RestoreResult, encode_notification
from agent_server._sessions import ServerState
from harness_kernel.events import create_event, format_timestamp, serialize_event
from harness_kernel.store import (
    SESS_INVALID_CURSOR,
    SESS_NOT_FOUND,
    SESS_RECOVERY_CONFLICT,
    SessionLease,
    SessionRecord,
    SessionStoreError,
)

__all__ = ["restore_session"]

_INTERRUPTED_NOTE: Final = "the owning connection ended before the session finished"


def _check_metadata(state: ServerState, record: SessionRecord) -> SessionLease:
    """The session's lease, if its row is an agent-server session of this root with one."""
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
        or metadata.get("modelName") not in state.config.models
        or lease is None
        or lease.expires_at is None
    ):
        raise SessionNotRestorableError("session metadata is not an agent-server session of this root")
    return lease


async def restore_session(
    state: ServerState, params: RestoreParams, send: Callable[[str], Awaitable[None]], *, principal: str
) -> RestoreResult:
    """Replay one stored session page as ``session/event`` notifications.

    Only the principal that created a session may restore it; to any other the session does
    not exist (``-32010``), so its id cannot be probed either.

    Raises:
        AcpError: per the mapping of spec §8.
    """
    if not state.persistent:
        raise SessionNotRestorableError("session persistence is disabled")
    store = state.store
    session_id = params.session_id
    try:
        record = await store.get(session_id)
        if record.metadata.get("principal") != principal:
            raise SessionNotFoundError(session_id)
        lease = _check_metadata(state, record)
        size = await store.size(session_id)
        if params.after_seq > size - 1:
            raise InvalidParamsError(
                f"restore cursor {params.after_seq} is beyond the last durable sequence {size - 1}"
            )
        last = (await store.slice(session_id, size - 1, size))[-1].event if size else None
        status: str
        if record.status == "active":
            if lease.live_at(await store.current_time()):
                raise SessionNotRestorableError("owner lease has not expired")
            if last is not None and last.type == "agent.stopped":
                await store.close(session_id)
                status = "completed"
            else:
                marker = create_event(
                    "session.restored",
                    {
                        "sessionId": session_id,
                        "afterSeq": params.after_seq,
                        "availableThroughSeq": size - 1,
                        "availableEvents": max(0, size - params.after_seq - 1),
                        "outcome": "interrupted",
                        "note": _INTERRUPTED_NOTE,
                    },
                    event_id=state.config.new_id("evt"),
                    at=format_timestamp(await state.clock()),
                    actor="agent-server",
                )
                await store.recover_interrupted(session_id, marker, expected_metadata=record.metadata)
                status = "interrupted"
        else:
            interrupted = (
                last is not None
                and last.type == "session.restored"
                and getattr(last.data, "outcome", None) == "interrupted"
            )
            status = "interrupted" if interrupted else "completed"
        page = await store.read(session_id, after_seq=params.after_seq, limit=params.limit)
    except SessionStoreError as error:
        if error.code == SESS_NOT_FOUND:
            raise SessionNotFoundError(session_id) from None
        if error.code == SESS_INVALID_CURSOR:
            raise InvalidParamsError("invalid restore cursor") from None
        if error.code == SESS_RECOVERY_CONFLICT:
            raise SessionNotRestorableError("session recovery conflict") from None
        raise
    # One frame at a time, each waiting for outbound room: a page may be far larger than the
    # outbound cap, and a client that reads normally must receive all of it.
    for stored in page.events:
        await send(encode_notification(session_id, stored.seq, serialize_event(stored.event)))
    return RestoreResult(
        session_id=session_id,
        status="interrupted" if status == "interrupted" else "completed",
        replayed_from_seq=params.after_seq + 1,
        replayed_through_seq=page.next_after_seq,
        replayed_events=len(page.events),
        has_more=page.has_more,
    )
