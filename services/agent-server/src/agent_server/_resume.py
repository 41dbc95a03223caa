"""``serve --resume-interrupted``: continue this root's interrupted sessions at start-up (issue #23).

No client is attached to such a turn: its events are stored and sent nowhere, and every
permission it asks is denied at once (no operator can answer). Once the turn ends the session
is finished — its row closed — so a client can restore (replay) it.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Final

import trio

from agent_server._errors import AcpError, SessionNotRestorableError
from agent_server._protocol import ContinueParams
from agent_server._restore import is_interrupted_marker, restorable_lease
from agent_server._sessions import PromptCanceledError, SessionManager
from agent_server._state import ServerState
from harness_kernel.store import SessionLease, SessionListing

__all__ = ["InterruptedSessions"]

_log: Final = logging.getLogger("agent_server")

LEASE_MARGIN_SECONDS: Final = 0.5
"""How long after a live lease's expiry its session is looked at again (timers are not exact)."""


async def _no_client(text: str) -> None:
    """The frames of a turn no client is attached to go nowhere."""


class InterruptedSessions:
    """Finds this root's interrupted sessions at start-up and continues each in the background.

    A session qualifies when its row is an agent-server session of this root and it is
    either active (its owner gone: the lease has expired, or expires soon and is not
    renewed) or closed by a restore that marked it interrupted, with nothing stored after the
    marker. Every session gets its own :class:`SessionManager` without an operator.

    Args:
        state: The server-wide state.
        nursery: Runs the continued turns; the server waits for it.
    """

    def __init__(self, state: ServerState, nursery: trio.Nursery) -> None:
        self._state = state
        self._nursery = nursery
        self._managers: set[SessionManager] = set()
        self._stopped = trio.Event()

    async def start(self) -> None:
        """Look at every stored session once and start continuing the interrupted ones."""
        try:
            listings = await self._state.store.list()
            now = await self._state.clock()
        except Exception:
            _log.exception("listing the sessions to resume failed")
            return
        for listing in listings:
            try:
                interrupted, live_lease = await self._interrupted(listing, now)
            except Exception:
                _log.exception("looking at session %s to resume failed", listing.record.session_id)
                continue
            if interrupted:
                self._nursery.start_soon(self._resume, listing.record.session_id, live_lease)

    async def _interrupted(self, listing: SessionListing, now: datetime) -> tuple[bool, SessionLease | None]:
        """Whether the session is interrupted, and the lease to wait out first (``None``: none).

        A lease still live may be a dead process's (this server's predecessor) or a live
        replica's: it is waited out, and the session left alone if the lease is renewed.
        """
        record = listing.record
        try:
            lease = restorable_lease(self._state, record)
        except SessionNotRestorableError:
            return False, None  # not an agent-server session of this root
        if record.status == "active":
            if record.session_id in self._state.active_session_ids:
                return False, None
            return True, lease if lease.live_at(now) else None
        if record.status != "closed" or listing.event_count == 0:
            return False, None
        size = listing.event_count
        last = (await self._state.store.slice(record.session_id, size - 1, size))[-1].event
        return is_interrupted_marker(last), None

    async def _wait_out(self, session_id: str, lease: SessionLease) -> bool:
        """Wait until ``lease`` has expired by the store clock; ``False`` if it was renewed or taken.

        The wait is measured on this process's timer, the expiry on the store clock, and the
        two need not agree: a lease found still live but unchanged is waited out again.
        """
        while True:
            now = await self._state.clock()
            if lease.expires_at is None or not lease.live_at(now):
                return True
            delay = (lease.expires_at - now).total_seconds() + LEASE_MARGIN_SECONDS
            _log.info("session %s: its owner's lease is live; looked at again in %.1f s", session_id, delay)
            with trio.move_on_after(delay):
                await self._stopped.wait()
            if self._stopped.is_set():
                return False
            if (await self._state.store.get(session_id)).lease != lease:
                _log.info("session %s left alone: its lease was renewed or taken", session_id)
                return False

    async def _resume(self, session_id: str, live_lease: SessionLease | None) -> None:
        if live_lease is not None:
            try:
                expired = await self._wait_out(session_id, live_lease)
            except Exception:
                _log.exception("waiting out the lease of session %s failed", session_id)
                return
            if not expired:
                return
        if self._stopped.is_set():
            return
        manager = SessionManager(
            self._state, _no_client, self._nursery, principal="agent-server", operator=False
        )
        self._managers.add(manager)
        try:
            result = await manager.continue_session(ContinueParams(session_id=session_id))
            _log.info("session %s continued at start-up: %s", session_id, result.status)
        except PromptCanceledError:
            _log.info("session %s continued at start-up: canceled", session_id)
        except AcpError as error:
            _log.info("session %s not continued: %s", session_id, error.message)
        except Exception:
            _log.exception("continuing session %s failed", session_id)
        finally:
            with trio.CancelScope(shield=True):
                await manager.disconnect()  # the session finishes: its row is closed
            self._managers.discard(manager)

    async def stop(self) -> None:
        """Stop waiting and end every continued turn (the disconnect semantics, §5.5)."""
        self._stopped.set()
        for manager in list(self._managers):
            await manager.disconnect()
