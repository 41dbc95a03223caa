"""``MinimalAgentRuntime``: the durable, single-request streaming agent runtime (spec §8).

``run(input)`` admits a :class:`RunInput` synchronously and returns a :class:`RunStream`.
Iterating the stream drives the run: every event is appended to the run's event store
before it is delivered, and the producer waits for the consumer's acknowledgement (the
next ``__anext__``) before it does anything else, so the model is pulled only inside a
consumer step. There is no background task. ``steer`` queues user text before the first
model request; ``cancel`` (and ``aclose``) end the run with the canceled terminal pair.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import TracebackType

import trio

from harness_kernel.events._model import Event
from harness_kernel.models._types import ChatMessage, Usage
from harness_kernel.runtime._context import ContextPolicy
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    ContextCompactionError,
    ContextOverflowError,
    EventAppendError,
    FollowUpError,
    InvalidRunInputError,
    ModelStreamError,
    ModelTimeoutError,
    RunAlreadyExistsError,
    RunNotFoundError,
    RunTerminalError,
    RuntimeBudgetExceededError,
    RuntimeConsumerError,
    SteeringClosedError,
    TurnActiveError,
)
from harness_kernel.runtime._input import Admitted, RunInput, RuntimeBudget, admit, check_id
from harness_kernel.runtime._run import Run

__all__ = [
    "AgentRuntimeError",
    "ContextCompactionError",
    "ContextOverflowError",
    "ContextPolicy",
    "EventAppendError",
    "FollowUpError",
    "InvalidRunInputError",
    "MinimalAgentRuntime",
    "ModelStreamError",
    "ModelTimeoutError",
    "RunAlreadyExistsError",
    "RunInput",
    "RunNotFoundError",
    "RunStream",
    "RunTerminalError",
    "RuntimeBudget",
    "RuntimeBudgetExceededError",
    "RuntimeConsumerError",
    "SteeringClosedError",
    "TurnActiveError",
]


class RunStream:
    """The events of one run, in append order; iterate it once, inside ``async with``.

    Raises (from ``__anext__``):
        RuntimeConsumerError: the stream was claimed twice or stepped concurrently.
        EventAppendError: the store failed; no terminal events were written.
        AgentRuntimeError: after the terminal pair of a failed or budget-exceeded run, once.
    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self._claimed = False
        self._stepping = False
        self._error_delivered = False

    def __aiter__(self) -> RunStream:
        if self._claimed:
            raise RuntimeConsumerError("the run stream is already being iterated")
        self._claimed = True
        return self

    async def __anext__(self) -> Event:
        run = self._run
        if self._stepping:
            raise RuntimeConsumerError("concurrent __anext__ on a run stream")
        self._stepping = True
        try:
            while True:
                if run.queue:
                    return run.queue.popleft()
                if run.producer_done or run.abandoned:
                    break
                try:
                    async with run.driver:
                        if not run.queue:
                            await run.advance(consumer=True)
                except trio.Cancelled:
                    # Cancelled while waiting for the driver lock, or inside a step (which
                    # then already persisted the pair): abandonment either way (§8.4).
                    with trio.CancelScope(shield=True):
                        await run.abandon()
                    raise
            if run.error is not None and not self._error_delivered:
                self._error_delivered = True
                raise run.error
            raise StopAsyncIteration
        finally:
            self._stepping = False

    async def steer(self, text: str) -> str:
        """Steer this run: ``text`` is stored as ``steering.queued`` before this returns, and
        applied as a user message at the next model-request boundary (``steering.applied``
        before ``model.request``). If the model stops while steering is pending, another
        round runs. Returns the steering message's id.

        May be called from any task while the stream is being iterated.

        Raises:
            InvalidRunInputError: not a str of 1..256 Ki characters, or 1 024 already pending.
            RunTerminalError: cancellation was requested, or the run is completing or finished.
            SteeringClosedError: the run's last boundary passed while this steer waited its turn.
            EventAppendError: the steering event could not be stored.
        """
        return await self._run.steer(text)

    async def aclose(self) -> None:
        """Abandon the run: drop undelivered events and persist the canceled pair unseen.

        Raises:
            EventAppendError: the canceled terminal pair could not be appended.
        """
        run = self._run
        if run.finished.is_set():
            run.abandoned = True
            run.queue.clear()
            return
        if run.driver.locked():
            # A step is driving (the consumer's or a control's). Cancellation releases every
            # acknowledgement, so that step runs the producer to its end and persists the pair;
            # waiting for it may be cancelled.
            await run.abandon()
        else:
            # No one else will drive: persist the pair here, shielded, so that an `async with`
            # left because its task was cancelled (a deadline hit while the consumer was busy
            # outside __anext__) still ends the run; that cancellation is delivered right after.
            # No checkpoint separates the check above from taking the free driver lock.
            with trio.CancelScope(shield=True):
                await run.abandon()
            await trio.lowlevel.checkpoint_if_cancelled()
        if isinstance(run.poison, EventAppendError):
            raise run.poison

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@dataclass(eq=False, slots=True)
class _Conversation:
    """What a session's next turn on this runtime inherits (issue #23 §1)."""

    store: object
    """The session's own event store; a follow-up must use this very object."""
    messages: tuple[ChatMessage, ...] = ()
    pending: tuple[tuple[str, str], ...] = ()
    usage: Usage | None = None
    revision: int = 0
    last_checkpoint: str | None = None
    checkpointed: int = 0
    compactions: int = 0
    active: Run | None = None
    lost: bool = False
    """A turn's events were not all stored; the session cannot go on from this runtime's memory."""


class MinimalAgentRuntime:
    """Runs agent turns; owns its live runs, the tombstones of finished ones, and what each
    session's next turn inherits."""

    def __init__(self) -> None:
        self._runs: dict[str, Run] = {}
        self._tombstones: dict[str, str] = {}
        self._conversations: dict[str, _Conversation] = {}

    def run(self, input: RunInput) -> RunStream:
        """Admit ``input`` synchronously and return its stream (spec §8.2): the session's first
        turn on this runtime, from ``input.context``.

        Raises:
            InvalidRunInputError: a field breaks its admission rule; nothing is registered.
            RunAlreadyExistsError: the run id is live or tombstoned on this runtime.
            TurnActiveError: a turn of the same session is running on this runtime.
            WorkspaceOperationError: ``bind_workspace`` refused the workspace.
        """
        admitted = admit(input, check_run_id=self._check_run_id_free)
        self._check_idle(admitted.session_id)
        conversation = _Conversation(store=input.event_store)
        return self._start(admitted, conversation)

    def follow_up(self, input: RunInput) -> RunStream:
        """Admit a follow-up turn of a session whose previous turn on this runtime ended.

        The turn inherits the session's messages, its pending steering and its usage (the
        token budget counts the whole session); ``input.context`` must be ``None``, and
        ``input.event_store`` must be the very store of the session's earlier turns.

        Raises:
            InvalidRunInputError: a field breaks its admission rule.
            RunAlreadyExistsError: the run id is live or tombstoned on this runtime.
            TurnActiveError: the session's previous turn is still running.
            FollowUpError: no earlier turn of the session on this runtime, a ``context`` was
                given, another store was given, or the previous turn lost events.
        """
        admitted = admit(input, check_run_id=self._check_run_id_free)
        session_id = admitted.session_id
        conversation = self._conversations.get(session_id)
        if conversation is None:
            raise FollowUpError(session_id, "no earlier turn of this session on this runtime")
        self._check_idle(session_id)
        if input.context is not None:
            raise FollowUpError(session_id, "a follow-up may not replace the session's context")
        if input.event_store is not conversation.store:
            raise FollowUpError(session_id, "a follow-up must use the session's own event store")
        if conversation.lost:
            raise FollowUpError(session_id, "the previous turn could not store all its events")
        inherited = replace(
            admitted,
            context=conversation.messages,
            pending=conversation.pending,
            usage=conversation.usage,
            revision=conversation.revision,
            last_checkpoint=conversation.last_checkpoint,
            checkpointed=conversation.checkpointed,
            compactions=conversation.compactions,
        )
        return self._start(inherited, conversation)

    def _check_idle(self, session_id: str) -> None:
        conversation = self._conversations.get(session_id)
        if conversation is not None and conversation.active is not None:
            raise TurnActiveError(session_id, conversation.active.a.run_id)

    def _start(self, admitted: Admitted, conversation: _Conversation) -> RunStream:
        run = Run(admitted, self._finished)
        self._runs[admitted.run_id] = run
        conversation.active = run
        self._conversations[admitted.session_id] = conversation
        return RunStream(run)

    def _check_run_id_free(self, run_id: str) -> None:
        if run_id in self._runs or run_id in self._tombstones:
            raise RunAlreadyExistsError(run_id)

    def _finished(self, run: Run) -> None:
        self._runs.pop(run.a.run_id, None)
        self._tombstones[run.a.run_id] = run.status
        conversation = self._conversations.get(run.a.session_id)
        if conversation is None or conversation.active is not run:
            return
        conversation.active = None
        if run.admission_error is not None:
            return  # nothing of the turn was stored: the session is as it was
        if run.poison is not None or run.pairless is not None:
            conversation.lost = True
            return
        conversation.messages = tuple(run.messages)
        conversation.pending = tuple(run.pending)
        conversation.usage = run.usage
        conversation.revision = run.revision
        conversation.last_checkpoint = run.last_checkpoint
        conversation.checkpointed = run.checkpointed
        conversation.compactions = run.compactions

    def _lookup(self, run_id: str) -> Run:
        run = self._runs.get(run_id)
        if run is not None:
            return run
        status = self._tombstones.get(run_id)
        if status is None:
            raise RunNotFoundError(run_id)
        raise RunTerminalError(run_id, status)

    async def steer(self, run_id: str, text: str) -> None:
        """Queue ``text`` as a user message for the run's next model-request boundary.

        Raises:
            RunNotFoundError, RunTerminalError, InvalidRunInputError, SteeringClosedError,
            EventAppendError: see spec §8.10 and :meth:`RunStream.steer`.
        """
        run = self._lookup(run_id)
        await run.steer(text)

    async def cancel(self, run_id: str) -> None:
        """Request cancellation and return once the canceled terminal pair is durable.

        Raises:
            InvalidRunInputError: ``run_id`` is not an id.
            RunNotFoundError: no such run.
            RunTerminalError: the run finished otherwise (also when the request came while
                another outcome was being recorded), or is completing otherwise.
            EventAppendError: the terminal pair could not be appended.
        """
        check_id(run_id, "run_id")
        run = self._runs.get(run_id)
        if run is None:
            status = self._tombstones.get(run_id)
            if status is None:
                raise RunNotFoundError(run_id)
            if status == "canceled":
                return
            raise RunTerminalError(run_id, status)
        if run.status == "completing":
            if run.finishing_as != "canceled":
                raise RunTerminalError(run_id, "completing")
            # Finishing as canceled already: wait for that pair like any later request, and
            # raise its failure rather than report a pair that was never appended.
            await run.finished.wait()
        else:
            run.request_cancel()
            await run.drive_to_end()
        failure = run.failure()
        if failure is not None:
            raise failure
        if run.status != "canceled":
            # The request lost to an outcome already being recorded when it came (a budget
            # exceed after its forced warning): report that outcome, as its tombstone would.
            raise RunTerminalError(run_id, run.status)
