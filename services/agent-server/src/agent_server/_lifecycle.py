"""A session's life on its connection between turns: opened, kept, waiting, finished (spec §5.1, §5.5).

A session opens with its row and lease; while it lives here its lease is renewed and, while it
waits for a prompt, its idle timer runs. It finishes once: its asks denied, its timers
stopped, its workspace adapter disposed, then its row closed (unless it must stay active for a
restore) and its slot given back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Generator
from contextlib import contextmanager
from typing import Final

import trio

from agent_server._admission import Admission
from agent_server._conversation import NOTE_CANCELED, WAITING, Session
from agent_server._leases import Leases
from agent_server._recording import Recorder
from agent_server._state import ServerState

__all__ = ["Lifecycle"]

_log: Final = logging.getLogger("agent_server")

NOTE_FINISHED: Final = "session finished"


class Lifecycle:
    """Opens, keeps and finishes the sessions of one connection.

    Args:
        state: The server-wide state.
        nursery: Runs the session timers; the connection waits for it.
        admission: Gives back a session's slots.
        leases: Takes, renews and gives back the session's lease.
        recorder: Drops closed sessions when nothing is persisted.
    """

    def __init__(
        self,
        state: ServerState,
        nursery: trio.Nursery,
        *,
        admission: Admission,
        leases: Leases,
        recorder: Recorder,
    ) -> None:
        self._state = state
        self._config = state.config
        self._nursery = nursery
        self._admission = admission
        self._leases = leases
        self._recorder = recorder

    async def open(self, session: Session) -> None:
        """Create the admitted session's row with its lease, then start its idle timer and lease refresh.

        A failure gives back all admission took: the session's id, its adapter, its slots.
        """
        try:
            await self._leases.acquire(session)
        except BaseException:
            self._admission.withdraw(session)
            await self.dispose_adapter(session)
            self._admission.give_back_slot()
            raise
        self.start_idle_timer(session)
        self._nursery.start_soon(self._keep_lease, session)

    def start_idle_timer(self, session: Session) -> None:
        """(Re)start the timer that finishes a session left waiting for a prompt too long."""
        session.idle_scope = scope = trio.CancelScope()
        self._nursery.start_soon(self._idle_timer, session, scope)

    async def _idle_timer(self, session: Session, scope: trio.CancelScope) -> None:
        try:
            with scope:
                await trio.sleep(self._config.limits.created_session_timeout_ms / 1000)
                if session.state in WAITING:
                    session.stop(NOTE_CANCELED)
                    await self.finish(session)
        finally:
            # Cancelled from outside while waiting (no disconnect ran): the adapter must not
            # outlive the session all the same. A timer replaced by a later one leaves it be.
            if session.idle_scope is scope and session.state in WAITING:
                await self.dispose_adapter(session)

    @contextmanager
    def taking_lease(self, session: Session) -> Generator[None]:
        """Around the kernel's continuation of ``session``: its refusals as protocol errors; once it
        took the lease, the row is this connection's and the lease is renewed until the session ends.

        Raises:
            AcpError: ``-32013`` when another owner took the lease first; ``-32023`` when the
                session has nothing to continue or no (valid) runtime checkpoint.
        """
        with self._leases.taking(session):
            yield
        self._nursery.start_soon(self._keep_lease, session)

    async def _keep_lease(self, session: Session) -> None:
        if await self._leases.keep(session) and session.state in WAITING:
            # No turn runs to notice the lost lease: the session ends now, its row left active.
            self._nursery.start_soon(functools.partial(self.finish, session, keep_active=True))

    async def rest(self, session: Session) -> None:
        """After a turn: the session waits for the next prompt, or finishes if it is closing."""
        if session.closing:
            await self.finish(session)
        else:
            session.state = "idle"
            self.start_idle_timer(session)

    async def dispose_adapter(self, session: Session) -> None:
        """Dispose the session's adapter once, shielded; a failure is logged, never raised.

        Disposal kills the adapter's running commands and waits for its operations in flight.
        """
        adapter, session.adapter = session.adapter, None
        if adapter is None:
            return
        try:
            with trio.CancelScope(shield=True):
                await adapter.dispose()
        except Exception:
            _log.exception("disposing the workspace adapter of session %s failed", session.id)

    async def finish(self, session: Session, *, keep_active: bool = False) -> None:
        """Finish the session once; ``keep_active`` leaves its row active (a store failure)."""
        if session.finished:
            return
        session.finished = True
        session.state = "finished"
        session.deny_pending(NOTE_FINISHED)
        session.idle_scope.cancel()
        session.lease_scope.cancel()
        # Before the row is closed: a closed row means nothing of the session still runs.
        await self.dispose_adapter(session)
        try:
            if session.owns_row and not keep_active:
                with trio.CancelScope(shield=True):
                    await self._leases.release(session)
                    if not self._state.persistent:
                        await self._recorder.forget_closed()
        except Exception:
            _log.exception("closing the row of session %s failed", session.id)
        finally:
            session.conversation = None  # the runtime and its messages go with it
            self._admission.release(session)

    async def drop(self, session: Session) -> None:
        """A turn cancelled from outside, not through its abort: nothing is sent any more, but the
        adapter must not outlive the run, nor the session its slot (its row stays as it is)."""
        await self.dispose_adapter(session)
        if not session.finished:
            session.finished = True
            session.state = "finished"
            self._admission.release(session)
