"""The lease a connection holds on each of its sessions' rows (spec §5.1, §8; decisions 031, 052).

A session's row is created with its lease in one transaction; the lease is renewed every third
of ``session_lease_ms`` while the session lives here, and given back when its row is closed.
A continued session takes the lease through the kernel's continuation (``ContinueInput``
carries the owner id); :meth:`Leases.taking` turns the kernel's refusals into protocol errors.
Sessions interrupted before a start-up are continued by ``agent_server._resume``.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from contextlib import contextmanager
from typing import Final

import trio

from agent_server._conversation import Session
from agent_server._errors import SessionNotContinuableError, SessionNotRestorableError
from agent_server._state import ServerState
from harness_kernel.runtime import CheckpointError, ContinuationError
from harness_kernel.store import SESS_OWNERSHIP_LOST, SessionStoreError

__all__ = ["Leases"]

_log: Final = logging.getLogger("agent_server")


class Leases:
    """Takes, renews and gives back the leases of one connection's sessions.

    Args:
        state: The server-wide state (its store, ``session_lease_ms``).
        principal: The connection's principal, recorded in each new row's metadata.
        owner_id: The connection's lease owner id.
    """

    def __init__(self, state: ServerState, *, principal: str, owner_id: str) -> None:
        self._state = state
        self._config = state.config
        self._principal = principal
        self._owner_id = owner_id

    async def acquire(self, session: Session) -> None:
        """Create the session's row and take its lease for this connection, in one transaction."""
        metadata: dict[str, object] = {
            "kind": "agent-session",
            "workspace": session.workspace,
            "modelName": session.model_name,
            "principal": self._principal,
        }
        record = await self._state.store.create(
            session.id,
            task_id=session.task_id,
            metadata=metadata,
            owner_id=self._owner_id,
            lease_ms=self._config.limits.session_lease_ms,
        )
        if record.lease is None or record.lease.owner_id != self._owner_id:
            raise RuntimeError("session row belongs to another owner")

    async def keep(self, session: Session) -> bool:
        """Renew the session's lease until its ``lease_scope`` is cancelled; ``True`` if it was lost.

        A failed renewal marks the session's persistence failed and aborts its turn.
        """
        store, lease_ms = self._state.store, self._config.limits.session_lease_ms
        interval = max(0.5, lease_ms / 3000)
        with session.lease_scope:
            while True:
                await trio.sleep(interval)
                try:
                    await store.renew_lease(session.id, self._owner_id, lease_ms=lease_ms)
                except Exception as error:
                    _log.exception("lease refresh failed for session %s", session.id)
                    session.persistence_failed = True
                    session.persistence_error = error
                    session.abort.abort("persistence failure")
                    return True
        return False

    @contextmanager
    def taking(self, session: Session) -> Generator[None]:
        """Around the kernel's continuation of ``session``: its refusals as protocol errors; once it
        took the lease, the row is this connection's.

        Raises:
            AcpError: ``-32013`` when another owner took the lease first; ``-32023`` when the
                session has nothing to continue or no (valid) runtime checkpoint.
        """
        try:
            yield
        except SessionStoreError as error:
            if error.code == SESS_OWNERSHIP_LOST:
                raise SessionNotRestorableError("another owner holds the session's lease") from None
            raise
        except (ContinuationError, CheckpointError) as error:
            session.owns_row = True  # the lease was taken before the events were read
            raise SessionNotContinuableError(error.message) from None
        session.owns_row = True

    async def release(self, session: Session) -> None:
        """Close the session's row, which gives back its lease."""
        await self._state.store.close(session.id, owner_id=self._owner_id)
