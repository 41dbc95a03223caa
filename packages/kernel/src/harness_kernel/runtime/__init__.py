"""``MinimalAgentRuntime``: the durable, single-request streaming agent runtime (spec §8).

``run(input)`` admits a :class:`RunInput` synchronously and returns a :class:`RunStream`.
Iterating the stream drives the run: every event is appended to the run's event store
before it is delivered, and the producer waits for the consumer's acknowledgement (the
next ``__anext__``) before it does anything else, so the model is pulled only inside a
consumer step. There is no background task. ``steer`` queues user text before the first
model request; ``cancel`` (and ``aclose``) end the run with the canceled terminal pair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import trio

from harness_kernel.events._model import Event
from harness_kernel.models._types import ChatMessage, ModelAdapter, Usage
from harness_kernel.policy._permission import PermissionController
from harness_kernel.runtime._checkpoint import (
    CheckpointError,
    CheckpointVersionError,
)
from harness_kernel.runtime._context import ContextPolicy, check_context_policy
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
from harness_kernel.runtime._resume import (
    ContinuationError,
    ConversationPlan,
    ResumePlan,
    plan_continuation,
    plan_conversation,
)
from harness_kernel.runtime._run import Run
from harness_kernel.store._ports import EventStore, SessionStore
from harness_kernel.store._records import PAGE_MAX_LIMIT
from harness_tools import ToolRegistry
from harness_workspace import AbortSignal

__all__ = [
    "AgentRuntimeError",
    "CheckpointError",
    "CheckpointVersionError",
    "ContextCompactionError",
    "ContextOverflowError",
    "ContextPolicy",
    "ContinuationError",
    "ContinueInput",
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
    "check_context_policy",
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
        channel = run.channel
        if self._stepping:
            raise RuntimeConsumerError("concurrent __anext__ on a run stream")
        self._stepping = True
        try:
            while True:
                if channel.queue:
                    return channel.queue.popleft()
                if run.producer_done or channel.abandoned:
                    break
                try:
                    async with run.driver:
                        if not channel.queue:
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
            run.channel.drop_undelivered()
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
        if isinstance(run.channel.poison, EventAppendError):
            raise run.channel.poison

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


CONTINUED_INPUT = "(continued)"
"""The admission text of a continued turn; its user message is already stored."""
MAX_LEASE_MS = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class ContinueInput:
    """What :meth:`MinimalAgentRuntime.continue_session` needs (issue #23 §3).

    ``sessions`` is the session store: its lease fences the continuation and its events
    say where the turn stands. ``event_store`` receives the continued turn's events (for
    example ``sessions.event_log(session_id, owner_id=owner_id)``). The remaining fields
    are those of :class:`RunInput`, with the same admission rules; checkpoints are always on.
    """

    session_id: str
    sessions: SessionStore
    owner_id: str
    lease_ms: int
    event_store: EventStore
    model: str
    model_adapter: ModelAdapter
    tools: ToolRegistry | None = None
    permission: PermissionController | None = None
    budget: RuntimeBudget | None = None
    model_timeout_ms: int | None = 60_000
    task_id: str | None = None
    workspace: object | None = None
    system: str | None = None
    max_tokens: int | None = None
    provider_options: dict[str, Any] | None = None
    signal: AbortSignal | None = None
    now: Callable[[], str] | None = None
    new_id: Callable[[str], str] | None = None
    context_policy: ContextPolicy | None = None
    resend_uncertain: bool = False


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

    async def continue_session(self, input: ContinueInput) -> RunStream:
        """Continue the interrupted last turn of a stored session, after a process restart.

        First the session's lease is taken for ``input.owner_id`` (``SessionStore.reopen``):
        a competing recovery holding a live lease is refused, and a process that lost the
        lease can no longer write. Then the session's events are read, and the turn is
        continued from its last runtime checkpoint (:func:`plan_continuation`), exactly once:
        a turn that has ended has nothing to continue. A model request stored without a
        recorded answer is never sent again unless ``resend_uncertain``; a tool call that was
        under way gets an interrupted result and is never run again; a cancellation (an
        aborted ``signal``) persists the canceled pair without calling the model.

        The lease lasts ``lease_ms``; a caller whose continued turn may run longer renews it
        (``SessionStore.renew_lease``). Afterwards :meth:`follow_up` works on this runtime
        with the same ``event_store``.

        Raises:
            InvalidRunInputError: a field breaks its admission rule.
            TurnActiveError: a turn of this session runs on this runtime.
            SessionStoreError: the lease could not be taken (``SESS_OWNERSHIP_LOST``,
                ``SESS_NOT_FOUND`` …) or the events could not be read.
            ContinuationError: the session has no interrupted turn with a checkpoint.
            CheckpointError: a checkpoint is invalid, of an unknown version, or breaks the chain.
        """
        session_id, events = await self._take_up(input)
        plan = plan_continuation(events, session_id)
        run_input = RunInput(
            run_id=plan.run_id,
            session_id=session_id,
            turn_id=plan.turn_id,
            input=CONTINUED_INPUT,
            model=input.model,
            model_adapter=input.model_adapter,
            event_store=input.event_store,
            tools=input.tools,
            permission=input.permission,
            budget=input.budget,
            model_timeout_ms=input.model_timeout_ms,
            task_id=input.task_id,
            workspace=input.workspace,
            system=input.system,
            max_tokens=input.max_tokens,
            provider_options=input.provider_options,
            signal=input.signal,
            now=input.now,
            new_id=input.new_id,
            context_policy=input.context_policy,
            checkpoints=True,
        )
        admitted = admit(run_input, check_run_id=self._check_run_id_free)
        self._check_idle(session_id)
        continued = replace(
            admitted,
            context=plan.messages,
            pending=plan.pending,
            usage=plan.usage,
            revision=plan.revision,
            last_checkpoint=plan.checkpoint.event_id,
            checkpointed=plan.checkpointed,
            compactions=plan.compactions,
            resend_uncertain=input.resend_uncertain,
        )
        return self._start(continued, _Conversation(store=input.event_store), resume=plan)

    async def resume_conversation(self, input: ContinueInput) -> ConversationPlan:
        """Take up, after a restart, a session whose last turn ended, for its next follow-up.

        The lease is taken as :meth:`continue_session` takes it; the session's events are read
        and what its next turn inherits (messages, pending steering, usage, checkpoint chain)
        is rebuilt from them (:func:`plan_conversation`) and kept for ``input.event_store``.
        Nothing is appended and no model is called; :meth:`follow_up` with that store then
        starts the next turn. Only the fields of ``input`` that locate the session are used.

        Returns:
            How the last turn ended and its final text, and what was rebuilt.

        Raises:
            InvalidRunInputError, TurnActiveError, SessionStoreError: as :meth:`continue_session`.
            ContinuationError: no turn, the last turn was interrupted (continue it instead), or
                no runtime checkpoint.
            CheckpointError: a checkpoint is invalid, of an unknown version, or breaks the chain.
        """
        session_id, events = await self._take_up(input)
        plan = plan_conversation(events, session_id)
        self._check_idle(session_id)
        self._conversations[session_id] = _Conversation(
            store=input.event_store,
            messages=plan.messages,
            pending=plan.pending,
            usage=plan.usage,
            revision=plan.revision,
            last_checkpoint=plan.last_checkpoint,
            checkpointed=plan.checkpointed,
            compactions=plan.compactions,
        )
        return plan

    async def _take_up(self, input: ContinueInput) -> tuple[str, list[Event]]:
        """Validate, take the session's lease and read its events."""
        if type(input) is not ContinueInput:
            raise InvalidRunInputError("continue input must be a ContinueInput")
        session_id = check_id(input.session_id, "session_id")
        owner_id = check_id(input.owner_id, "owner_id")
        lease_ms: object = input.lease_ms
        if type(lease_ms) is not int or not 1 <= lease_ms <= MAX_LEASE_MS:
            raise InvalidRunInputError(f"lease_ms must be an int of 1..{MAX_LEASE_MS}")
        if type(input.resend_uncertain) is not bool:
            raise InvalidRunInputError("resend_uncertain must be a bool")
        self._check_idle(session_id)
        sessions = input.sessions
        await sessions.reopen(session_id, owner_id=owner_id, lease_ms=lease_ms)
        events: list[Event] = []
        after = -1
        while True:
            page = await sessions.read(session_id, after_seq=after, limit=PAGE_MAX_LIMIT)
            events.extend(item.event for item in page.events)
            if not page.has_more:
                break
            after = page.next_after_seq
        return session_id, events

    def _check_idle(self, session_id: str) -> None:
        conversation = self._conversations.get(session_id)
        if conversation is not None and conversation.active is not None:
            raise TurnActiveError(session_id, conversation.active.admitted.run_id)

    def _start(
        self, admitted: Admitted, conversation: _Conversation, resume: ResumePlan | None = None
    ) -> RunStream:
        run = Run(admitted, self._finished, resume)
        self._runs[admitted.run_id] = run
        conversation.active = run
        self._conversations[admitted.session_id] = conversation
        return RunStream(run)

    def _check_run_id_free(self, run_id: str) -> None:
        if run_id in self._runs or run_id in self._tombstones:
            raise RunAlreadyExistsError(run_id)

    def _finished(self, run: Run) -> None:
        admitted, state = run.admitted, run.state
        self._runs.pop(admitted.run_id, None)
        self._tombstones[admitted.run_id] = run.channel.status
        conversation = self._conversations.get(admitted.session_id)
        if conversation is None or conversation.active is not run:
            return
        conversation.active = None
        if run.admission_error is not None:
            return  # nothing of the turn was stored: the session is as it was
        if run.channel.poison is not None or run.pairless is not None:
            conversation.lost = True
            return
        conversation.messages = tuple(state.messages)
        conversation.pending = tuple(run.channel.pending)
        conversation.usage = state.usage
        conversation.revision = state.revision
        conversation.last_checkpoint = state.last_checkpoint
        conversation.checkpointed = state.checkpointed
        conversation.compactions = state.compactions

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
        channel = run.channel
        if channel.status == "completing":
            if channel.finishing_as != "canceled":
                raise RunTerminalError(run_id, "completing")
            # Finishing as canceled already: wait for that pair like any later request, and
            # raise its failure rather than report a pair that was never appended.
            await run.finished.wait()
        else:
            channel.request_cancel()
            await run.drive_to_end()
        failure = run.failure()
        if failure is not None:
            raise failure
        if channel.status != "canceled":
            # The request lost to an outcome already being recorded when it came (a budget
            # exceed after its forced warning): report that outcome, as its tombstone would.
            raise RunTerminalError(run_id, channel.status)
