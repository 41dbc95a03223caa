"""Driving a session's turns on its kernel runtime (spec §5.3, §5.4; issue #23 continuation).

A turn is a prompt's (the session's first, or a follow-up once it is idle) or the continuation
of an interrupted one. The driver starts it, streams its stored events to the client
(``agent_server._turns.consume``), steers and cancels it, bounds it by ``max_run_ms``, and
answers for it; afterwards the session rests (idle) or finishes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from agent_server._config import ServerConfig
from agent_server._conversation import Session
from agent_server._errors import (
    InvalidParamsError,
    NoRunningTurnError,
    RunTimeLimitError,
    SteeringRefusedError,
)
from agent_server._inputs import TurnInputs
from agent_server._lifecycle import Lifecycle
from agent_server._protocol import PromptParams, PromptResult, PromptUsage, SteerParams, SteerResult
from agent_server._turns import Link, RunOutcome, consume
from harness_kernel.runtime import (
    AgentRuntimeError,
    InvalidRunInputError,
    RunStream,
    RunTerminalError,
    SteeringClosedError,
)
from harness_workspace import AbortController

__all__ = ["PersistenceFailedError", "PromptCanceledError", "TurnDriver"]

_log: Final = logging.getLogger("agent_server")

NOTE_RUN_TIME_LIMIT: Final = "run time limit reached"


class PersistenceFailedError(Exception):
    """Storing an event or refreshing the lease failed; the run is aborted."""


class PromptCanceledError(Exception):
    """The run ended canceled; its prompt is answered with an internal error (§5.3 step 4)."""


class TurnDriver:
    """Runs, steers and cancels the turns of one connection's sessions and answers for them.

    Args:
        config: The server's configuration (``max_run_ms``).
        nursery: Runs each turn's run time limit timer.
        link: The connection's outbound side; a turn's events go out through it.
        inputs: Makes the session's conversation and each turn's input.
        lifecycle: Takes a continuation's lease; rests or finishes the session after a turn.
    """

    def __init__(
        self,
        config: ServerConfig,
        nursery: trio.Nursery,
        *,
        link: Link,
        inputs: TurnInputs,
        lifecycle: Lifecycle,
    ) -> None:
        self._config = config
        self._nursery = nursery
        self._link = link
        self._inputs = inputs
        self._lifecycle = lifecycle

    async def prompt(self, session: Session, params: PromptParams) -> PromptResult:
        """An admitted prompt's turn: the session's first (``session.created`` goes with it), or a follow-up.

        Each turn is bounded by ``max_run_ms`` of wall time.
        """

        async def start() -> RunStream:
            conversation = self._inputs.conversation(session, prompted=True)
            run_input = self._inputs.run_input(session, conversation, params)
            runtime = conversation.runtime
            stream = runtime.follow_up(run_input) if conversation.turns else runtime.run(run_input)
            conversation.turns += 1
            conversation.outcome = RunOutcome(run_id=run_input.run_id)
            return stream

        self.begin_turn(session)
        return await self._drive(session, start)

    async def continue_turn(self, session: Session, *, resend_uncertain: bool) -> PromptResult:
        """Take the lease and continue the session's interrupted turn (kernel.md §8.16); then keep the lease.

        The caller has begun the turn (``begin_turn``) before it looked for a disconnect, so a
        stop that came during the claim is kept.

        Raises:
            AcpError: ``-32013`` when another owner took the lease first; ``-32023`` when the
                session has no interrupted turn with a valid checkpoint.
        """

        async def start() -> RunStream:
            conversation = self._inputs.conversation(session, prompted=False)
            continued = self._inputs.continue_input(session, conversation, resend_uncertain=resend_uncertain)
            with self._lifecycle.taking_lease(session):
                stream = await conversation.runtime.continue_session(continued)
            conversation.turns = 1  # a first turn is behind the conversation
            conversation.outcome = RunOutcome()
            return stream

        return await self._drive(session, start)

    async def take_up(self, session: Session) -> PromptResult:
        """A session whose last turn ended joins this connection idle, its conversation rebuilt
        from the store (kernel ``resume_conversation``); the answer repeats that turn's outcome.

        Raises:
            AcpError: ``-32013`` when another owner took the lease first; ``-32023`` when the
                session stored no (valid) runtime checkpoint.
        """
        conversation = self._inputs.conversation(session, prompted=False)
        try:
            with self._lifecycle.taking_lease(session):
                plan = await conversation.runtime.resume_conversation(
                    self._inputs.continue_input(session, conversation)
                )
            conversation.turns = 1  # a first turn is behind the conversation
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._lifecycle.finish(session)
            raise
        await self._lifecycle.rest(session)
        usage = plan.usage
        return _result(plan.status, plan.final_text, usage.prompt_tokens, usage.completion_tokens)

    async def steer(self, session: Session, params: SteerParams) -> SteerResult:
        """``session/steer``: store ``content`` for the running turn's next model request (issue #23).

        Answered once the steering is stored and its ``session/event`` notification is queued,
        so the answer follows it on the wire.

        Raises:
            AcpError: ``-32019`` when no turn runs; ``-32602`` for text the runtime refuses
                (or 1 024 steering messages already pending); ``-32022`` when the turn is ending.
        """
        conversation = session.conversation
        stream = None if conversation is None else conversation.stream
        if session.state != "running" or stream is None:
            raise NoRunningTurnError()
        try:
            message_id = await stream.steer(params.content)
        except InvalidRunInputError as error:
            raise InvalidParamsError(error.message) from None
        except (RunTerminalError, SteeringClosedError):
            raise SteeringRefusedError() from None
        await session.outbox.flush(self._link.send)
        return SteerResult(message_id=message_id)

    async def cancel_run(self, session: Session) -> None:
        """The runtime's cancel path: return once the turn's terminal pair is durable.

        The abort signal already asked the turn to stop; this waits for (or drives) its end.
        A turn that ended otherwise, or whose pair could not be stored, is left to the
        turn's task, which answers for it.
        """
        conversation = session.conversation
        run_id = None if conversation is None else conversation.outcome.run_id
        if conversation is None or run_id is None:
            return
        try:
            await conversation.runtime.cancel(run_id)
        except AgentRuntimeError as error:
            _log.info("cancel of run %s in session %s: %s", run_id, session.id, error.message)

    def begin_turn(self, session: Session) -> None:
        """``running`` before the first ``await``, so two turns never both start; a fresh abort."""
        session.state = "running"
        session.idle_scope.cancel()
        session.abort = AbortController()
        session.run_limit_reached = False
        session.run_limit_scope = trio.CancelScope()
        self._nursery.start_soon(self._run_limit_timer, session, session.run_limit_scope)

    async def _run_limit_timer(self, session: Session, scope: trio.CancelScope) -> None:
        """Abort the turn once it has run for ``max_run_ms`` (pending permissions are denied)."""
        with scope:
            await trio.sleep(self._config.limits.max_run_ms / 1000)
            _log.warning("session %s reached its run time limit", session.id)
            session.run_limit_reached = True
            session.stop(NOTE_RUN_TIME_LIMIT)

    def _run_limit_error(self) -> RunTimeLimitError:
        seconds = self._config.limits.max_run_ms / 1000
        return RunTimeLimitError(f"the run was stopped after its limit of {seconds:g} s")

    async def _drive(self, session: Session, start: Callable[[], Awaitable[RunStream]]) -> PromptResult:
        """Start a turn, send its events as they are stored, and answer for it (§5.3 step 4)."""
        send = self._link.send
        try:
            stream = await start()
            conversation = session.conversation
            assert conversation is not None
            conversation.stream = stream
            outcome = await consume(stream, conversation.outcome, session.outbox, send)
            if await conversation.events.store_prelude():  # the run appended nothing (it failed at admission)
                await session.outbox.flush(send)
        except Exception as error:
            # The turn broke off without its outcome (a store or redaction failure, a refused
            # admission): what the runtime holds no longer matches the store, so the session ends.
            await self._lifecycle.finish(session, keep_active=session.persistence_failed)
            if session.run_limit_reached and not session.persistence_failed:
                raise self._run_limit_error() from error
            if session.persistence_failed:
                cause = session.persistence_error if session.persistence_error is not None else error
                raise PersistenceFailedError("a session event was not stored") from cause
            raise
        except BaseException:
            # Cancelled from outside rather than through the abort signal.
            await self._lifecycle.drop(session)
            raise
        finally:
            session.run_limit_scope.cancel()
            if session.conversation is not None:
                session.conversation.stream = None
        return await self._answer(session, outcome)

    async def _answer(self, session: Session, outcome: RunOutcome) -> PromptResult:
        """The session after a turn that ended with its pair, and the turn's answer (§5.3 step 4)."""
        if session.persistence_failed:
            await self._lifecycle.finish(session, keep_active=True)
            raise PersistenceFailedError("a session event was not stored") from session.persistence_error
        canceled = session.abort.signal.aborted or outcome.status == "canceled"
        await self._lifecycle.rest(session)
        if session.run_limit_reached:
            raise self._run_limit_error()
        if canceled:
            raise PromptCanceledError()
        return _result(outcome.status, outcome.final_text, outcome.prompt_tokens, outcome.completion_tokens)


def _result(status: str | None, final_text: str, prompt_tokens: int, completion_tokens: int) -> PromptResult:
    """A turn's answer (§5.3 step 4): completed or failed, its final text, the session's usage."""
    return PromptResult(
        status="completed" if status == "completed" else "failed",
        events=[],
        final_text=final_text,
        usage=PromptUsage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        ),
    )
