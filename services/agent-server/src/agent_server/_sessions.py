"""Sessions of one connection: the protocol's session methods over the server's hub (spec §5 to §7).

A session is a conversation (issue #23): its first prompt runs a turn on the session's own
kernel runtime, and once a turn ends the session waits, ``idle``, with its workspace adapter,
its lease, its runtime and its event store, for the next prompt, which is a follow-up turn.
It finishes on ``session/close``, a disconnect, the idle timeout, or a turn that could not
store its events.

:class:`SessionManager` is the facade the protocol layer calls; each job has its own module:
``_admission`` (who may open, take up and prompt what), ``_driver`` (running, steering and
cancelling turns), ``_leases`` (a session row's lease), ``_recording`` (what is stored),
``_lifecycle`` (timers and the one way a session finishes), ``_operator`` (permission asks).
A call flows down through them and never back up (decision 063).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import trio

from agent_server._admission import Admission
from agent_server._conversation import NOTE_CANCELED, WAITING, Session
from agent_server._driver import PersistenceFailedError, PromptCanceledError, TurnDriver
from agent_server._errors import SessionNotFoundError
from agent_server._inputs import TurnInputs
from agent_server._leases import Leases
from agent_server._lifecycle import Lifecycle
from agent_server._operator import Operator
from agent_server._protocol import (
    CancelParams,
    CancelResult,
    CloseParams,
    CloseResult,
    ContinueParams,
    NewSessionParams,
    NewSessionResult,
    PermissionRespondParams,
    PermissionRespondResult,
    PromptParams,
    PromptResult,
    SteerParams,
    SteerResult,
)
from agent_server._recording import Recorder
from agent_server._state import ServerState
from agent_server._turns import Link

__all__ = ["PersistenceFailedError", "PromptCanceledError", "SessionManager"]

NOTE_CLOSED: Final = "session closed"
NOTE_DISCONNECTED: Final = "ACP client disconnected"


class SessionManager:
    """The sessions created (or continued) by one connection and the methods that act on them.

    Args:
        state: The server-wide state.
        send: Queues one text frame, waiting for outbound room; dropped once the connection is closing.
        nursery: Runs the session timers; the connection waits for it.
        principal: The connection's principal, recorded in each session's metadata.
        operator: Whether a client can answer permission requests; without one (a session
            continued at server start) every ask is denied at once.
    """

    def __init__(
        self,
        state: ServerState,
        send: Callable[[str], Awaitable[None]],
        nursery: trio.Nursery,
        *,
        principal: str,
        operator: bool = True,
    ) -> None:
        self.owner_id: Final = state.hooks.new_id("connection")
        self._sessions: dict[str, Session] = {}
        self._link = Link(send)
        self._admission = Admission(state, principal=principal, operator=operator)
        self._operator = Operator(state.config, present=operator)
        leases = Leases(state, principal=principal, owner_id=self.owner_id)
        recorder = Recorder(state, principal=principal, owner_id=self.owner_id)
        admission = self._admission
        self._lifecycle = Lifecycle(state, nursery, admission=admission, leases=leases, recorder=recorder)
        inputs = TurnInputs(state, recorder, self._operator, owner_id=self.owner_id)
        self._driver = TurnDriver(
            state.config, nursery, link=self._link, inputs=inputs, lifecycle=self._lifecycle
        )

    def _lookup(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    async def send(self, text: str) -> None:
        """Queue a frame unless the client has disconnected."""
        await self._link.send(text)

    async def create(self, params: NewSessionParams) -> NewSessionResult:
        """``session/new`` (§5.1).

        The connection's count and a server-wide slot are both taken before the first
        ``await``, so pipelined requests cannot overrun either cap; a creation that fails
        gives both back.
        """
        session = await self._admission.admit(params)
        await self._lifecycle.open(session)
        self._sessions[session.id] = session
        return NewSessionResult(session_id=session.id)

    async def prompt(self, params: PromptParams) -> PromptResult:
        """``session/prompt`` (§5.3): the session's first turn, or a follow-up once it is idle.

        Each turn is bounded by ``max_run_ms`` of wall time.
        """
        session = self._lookup(params.session_id)
        await self._admission.check_prompt(session)
        return await self._driver.prompt(session, params)

    async def continue_session(self, params: ContinueParams) -> PromptResult:
        """``session/continue``: take up a session's interrupted turn on this connection (issue #23).

        The session joins this connection (it counts as one of its sessions), its turn is
        continued from its last runtime checkpoint and streamed like a prompt's, and the
        answer is the prompt's. Afterwards the session is idle here, ready for a follow-up.
        """
        session, status = await self._admission.claim(params.session_id)
        self._sessions[session.id] = session
        if status != "completed":
            self._driver.begin_turn(session)  # first: its fresh abort would drop the stop below
        if self._link.disconnected:  # the connection (or the server) ended while the session was claimed
            session.closing = True
            session.stop(NOTE_DISCONNECTED)
        if status == "completed":
            return await self._driver.take_up(session)
        return await self._driver.continue_turn(session, resend_uncertain=params.resend_uncertain)

    async def steer(self, params: SteerParams) -> SteerResult:
        """``session/steer`` (issue #23): ``-32010`` for an unknown session, else the driver's answer."""
        return await self._driver.steer(self._lookup(params.session_id), params)

    def respond(self, params: PermissionRespondParams) -> PermissionRespondResult:
        """``permission/respond`` (§7)."""
        return self._operator.respond(self._lookup(params.session_id), params)

    async def cancel(self, params: CancelParams) -> CancelResult:
        """``session/cancel`` (§5.4): end a ``created`` session, or cancel the running turn.

        A canceled turn leaves the session idle for a follow-up; an idle or finished session
        has nothing to cancel (``session/close`` ends a conversation).
        """
        session = self._lookup(params.session_id)
        if session.state == "created":
            session.stop(NOTE_CANCELED)
            await self._lifecycle.finish(session)
            return CancelResult(canceled=True)
        if session.state != "running":
            return CancelResult(canceled=False)
        session.stop(NOTE_CANCELED)
        await self._driver.cancel_run(session)
        return CancelResult(canceled=True)

    async def close(self, params: CloseParams) -> CloseResult:
        """``session/close``: end the session (its running turn canceled first) and close its row."""
        session = self._lookup(params.session_id)
        if session.finished or session.closing:
            return CloseResult(closed=False)
        await self._end(session, NOTE_CLOSED)
        await session.done.wait()
        return CloseResult(closed=True)

    async def disconnect(self) -> None:
        """Apply the disconnect semantics (§5.5); no frame is sent afterwards."""
        self._link.disconnected = True
        for session in list(self._sessions.values()):
            if not session.finished:
                await self._end(session, NOTE_DISCONNECTED)

    async def _end(self, session: Session, note: str) -> None:
        """Deny, abort, and finish a waiting session (close and disconnect).

        A running session finishes when its turn returns; its adapter is disposed now, so a
        command that ignores the abort is killed rather than left running until then.
        """
        session.closing = True
        session.stop(note)
        if session.state in WAITING:
            await self._lifecycle.finish(session)
            return
        await self._lifecycle.dispose_adapter(session)
        await self._driver.cancel_run(session)
