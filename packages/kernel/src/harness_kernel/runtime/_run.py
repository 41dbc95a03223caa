"""One run of ``MinimalAgentRuntime``: its state, its drivers and its producer (spec §8.4 to §8.11).

The producer is an async generator advanced by exactly one driver at a time (the consumer
inside ``__anext__``, or a control). It yields only where it waits for the consumer's
acknowledgement, never inside a cancel scope, so any task may resume it.

This module holds the run's state, the drivers (``advance``, ``abandon``, ``drive_to_end``),
the event writer (append before deliver, shielded, poisoned by the first failure) and the
producer's outline: admission, then model rounds until the run completes. The steps live
beside it: ``_model_step`` (one model round), ``_tool_step`` (one tool call),
``_terminal`` (the terminal pair); ``_shared`` holds their limits.
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from contextlib import contextmanager
from typing import Final

import trio

from harness_kernel._gate import ToolGate
from harness_kernel._gate import budget_percent as percent
from harness_kernel._ids import is_id
from harness_kernel._json import has_lone_surrogate
from harness_kernel.events._codec import create_event
from harness_kernel.events._model import (
    AgentStartedData,
    AgentStatus,
    BudgetWarningData,
    Event,
    EventData,
    EventType,
    RuntimeCheckpointData,
    SteeringQueuedData,
    ToolMessageCompletedData,
    ToolResultData,
    ToolResultErrorData,
    TurnResumedData,
    TurnStartedData,
    UserMessageCompletedData,
)
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    ModelRequest,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from harness_kernel.runtime._checkpoint import CHECKPOINT_VERSION, Boundary, checkpoint_state
from harness_kernel.runtime._context import (
    Estimate,
    estimate,
    message_bytes,
    request_bytes_from_sizes,
    request_fixed_bytes,
)
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    BudgetMetric,
    EventAppendError,
    InvalidRunInputError,
    ModelStreamError,
    RunTerminalError,
    RuntimeBudgetExceededError,
    SteeringClosedError,
)
from harness_kernel.runtime._input import Admitted
from harness_kernel.runtime._model_step import model_round
from harness_kernel.runtime._resume import ContinuationError, ResumePlan, tool_content
from harness_kernel.runtime._shared import (
    FINISHED,
    MAX_PENDING_STEERING,
    MAX_STEERING_CHARS,
    Canceled,
    QuickLock,
    RunIds,
    or_unset,
)
from harness_kernel.runtime._terminal import record_terminal
from harness_kernel.runtime._tool_step import ToolStep, observed_content
from harness_workspace import AbortController, move_on_abort

__all__ = ["INTERRUPTED_TOOL_NOTE", "NOT_RUN_CONTENT", "Run"]

INTERRUPTED_TOOL_NOTE: Final = (
    "the turn was interrupted while this call was under way; it may or may not have taken effect,"
    " and it is not run again"
)
NOT_RUN_CONTENT: Final = observed_content((None, ("TOOL_NOT_RUN", "the turn ended before this call ran")))
"""The tool message that answers a call an earlier turn asked for and never ran."""
_METRICS: Final[tuple[BudgetMetric, ...]] = ("steps", "tokens", "tool_calls")


def _resume_note(plan: ResumePlan) -> str | None:
    if plan.next == "uncertain":
        return "a model request was in flight when the turn was interrupted"
    if plan.open_call is not None and plan.open_call.result is None:
        return "a tool call was under way when the turn was interrupted"
    return None


class Run:
    """The state and producer of one admitted run."""

    def __init__(
        self, admitted: Admitted, on_finish: Callable[[Run], None], resume: ResumePlan | None = None
    ) -> None:
        self.a = admitted
        self.resume = resume
        """Where an interrupted turn stands, when this run continues it (issue #23 §3)."""
        self.status = "registered"
        self.queue: deque[Event] = deque()
        # The driver lock keeps trio.Lock's scheduling point: one per delivered event, where
        # controls (cancel) and other tasks get their turn. The writer lock needs none.
        self.driver = trio.Lock()
        self.writer = QuickLock()
        self.admitted = trio.Event()
        self.finished = trio.Event()
        self.admission_error: AgentRuntimeError | None = None
        self.poison: EventAppendError | None = None
        self.pairless: AgentRuntimeError | None = None
        self.error: BaseException | None = None
        self.cancel_requested = False
        self.finishing_as: str | None = None
        self.abandoned = False
        self.pending: list[tuple[str, str]] = list(admitted.pending)
        """Steering not yet applied, oldest first: (message id, text)."""
        self.controller = AbortController()
        self.round_controller: AbortController | None = None
        self.active_scope: trio.CancelScope | None = None
        self.producer_done = False
        self.driver_cancelled = False
        self._on_finish = on_finish
        self._producer = self._produce()
        self.messages: list[ChatMessage] = list(admitted.context)
        self.revision = len(admitted.context) if admitted.revision is None else admitted.revision
        self.model_requests = 0
        self.tool_calls = 0
        self.usage = admitted.usage or Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
        self.warned: set[BudgetMetric] = set()
        self.gate = ToolGate(workspace=admitted.workspace, decide=admitted.decide)
        self.model_call_ids: set[str] = set()
        self.transcript = 0
        self.agent_id = ""
        self.input_message_id = ""
        self.output_message_id: str | None = None
        self.last_checkpoint = admitted.last_checkpoint
        self.checkpointed = admitted.checkpointed
        self.compactions = admitted.compactions
        self.sizes: list[int] = []
        """``message_bytes`` of ``messages[: len(sizes)]``, kept for the context estimate."""
        self.fixed_bytes: int | None = None
        if admitted.signal is not None and admitted.signal.aborted:
            self.request_cancel()

    # ------------------------------------------------------------ drivers
    async def advance(self, *, consumer: bool = False) -> None:
        """Run the producer to its next acknowledgement wait or its end (driver lock held).

        Args:
            consumer: The consumer's own step drives; its cancellation is abandonment (§8.4).
                A control (``cancel``, ``aclose``, admission) that is cancelled while driving
                does not abandon a consumer that is still attached: the pair it persists
                stays queued for that consumer.
        """
        if self.producer_done:
            return
        self.driver_cancelled = False
        try:
            await self._producer.__anext__()
        except StopAsyncIteration:
            self.producer_done = True
        except trio.Cancelled:
            # The producer cannot resume after the driving task's cancellation went through
            # it, so the canceled pair is persisted here.
            self.producer_done = True
            with trio.CancelScope(shield=True):
                if consumer:
                    self.abandoned = True
                    self.queue.clear()
                if not self.finished.is_set():
                    self.request_cancel()
                    await record_terminal(self, "canceled", "run canceled", None)
            raise
        if self.driver_cancelled:
            # A wait of the producer absorbed the driving task's cancellation as a run
            # cancellation (``cancellable``), so the step ran the producer to its end; the
            # task's own Cancelled is delivered now.
            self.driver_cancelled = False
            if consumer:
                self.abandoned = True
                self.queue.clear()
            await trio.lowlevel.checkpoint_if_cancelled()

    async def abandon(self) -> None:
        """Drop undelivered events, request cancellation and drive the run to its end.

        Completion wins: a run that is already completing finishes as it was going to. A run
        that an earlier call abandoned is still driven (or waited for) to its end: that call
        may have been cancelled before anyone drove.
        """
        self.queue.clear()
        self.abandoned = True
        if self.finished.is_set():
            return
        if self.status != "completing":
            self.request_cancel()
        await self.drive_to_end()

    async def drive_to_end(self) -> None:
        """Drive (or wait for) the run to its end."""
        async with self.driver:
            while not self.producer_done:
                await self.advance()
        await self.finished.wait()

    async def ensure_admitted(self) -> None:
        """Drive admission if no one has; re-raise its failure."""
        if not self.admitted.is_set():
            if self.driver.locked():
                await self.admitted.wait()
            else:
                async with self.driver:
                    if not self.admitted.is_set():
                        await self.advance()
        if self.admission_error is not None:
            raise self.admission_error

    def request_cancel(self) -> None:
        """Set the flag, abort the signals and cancel the active wait, synchronously."""
        if self.cancel_requested:
            return
        self.cancel_requested = True
        if self.status in ("registered", "running"):
            self.status = "cancel_requested"
        reason = RunTerminalError(self.a.run_id, "canceled")
        self.controller.abort(reason)
        if self.round_controller is not None:
            self.round_controller.abort(reason)
        if self.active_scope is not None:
            self.active_scope.cancel()

    def failure(self) -> AgentRuntimeError | None:
        """What a control waiting for the end re-raises (§8.10: "return, or raise its failure")."""
        return self.admission_error or self.poison or self.pairless

    async def steer(self, text: str) -> str:
        """Store ``text`` as ``steering.queued`` for the next model-request boundary; its message id.

        FIFO across concurrent callers (the writer lock); at most :data:`MAX_PENDING_STEERING`
        pending. A steer that is being stored when cancellation wins stays in history (the
        append is shielded) and is never applied.

        Raises:
            InvalidRunInputError: not a str of 1..256 Ki characters, or 1 024 already pending.
            RunTerminalError: cancellation was requested, or the run is completing or finished.
            SteeringClosedError: the run's last boundary passed while this steer waited its turn.
            EventAppendError: the event could not be stored.
        """
        run_id = self.a.run_id
        if type(text) is not str or not 1 <= len(text) <= MAX_STEERING_CHARS or has_lone_surrogate(text):
            raise InvalidRunInputError(f"steering text must be a str of 1..{MAX_STEERING_CHARS} characters")
        await self.ensure_admitted()
        if self.cancel_requested or self.status == "completing" or self.status in FINISHED:
            raise RunTerminalError(run_id, self.status)
        message_id = ""
        with trio.CancelScope(shield=True):
            async with self.writer:
                if self.cancel_requested or self.status == "completing" or self.status in FINISHED:
                    raise SteeringClosedError(run_id)
                if len(self.pending) >= MAX_PENDING_STEERING:
                    raise InvalidRunInputError(
                        f"at most {MAX_PENDING_STEERING} steering messages may be pending"
                    )
                message_id = self.new_id("msg")
                queued = SteeringQueuedData(**self.ids(), message_id=message_id, content=text)
                event = self.event("steering.queued", queued)
                await self.append_locked(event)
                self.enqueue(event)
                self.pending.append((message_id, text))
        return message_id

    # ------------------------------------------------------------ events
    def new_id(self, prefix: str) -> str:
        value = self.a.new_id(prefix)
        if not is_id(value):
            raise InvalidRunInputError(f'new_id("{prefix}") returned an invalid id')
        return value

    def event(self, event_type: EventType, data: EventData, actor: str = "kernel") -> Event:
        """A validated event of this run, with a fresh id and the injected clock's time."""
        event_id = self.new_id("evt")
        at: object = self.a.now()
        if type(at) is not str:
            raise InvalidRunInputError("now() must return a str")
        try:
            return create_event(event_type, data, event_id=event_id, at=at, actor=actor)
        except Exception as error:
            raise InvalidRunInputError(f"cannot build {event_type} event: {error}") from error

    def checkpoint(self, boundary: Boundary, request_id: str | None = None) -> Event:
        """A ``runtime.checkpoint`` of the context as it is now: the messages added since the
        session's last checkpoint (all of them after a compaction) and the run's accounting.

        The run counts the checkpoint as taken at once: it is appended in the batch it was
        built for, and a failed append poisons the run anyway.

        Raises:
            CheckpointError: the checkpoint would be over its bounds.
        """
        fresh = self.checkpointed == 0
        state = checkpoint_state(
            base=None if fresh else self.last_checkpoint,
            added=self.messages[self.checkpointed :],
            message_count=len(self.messages),
            message_revision=self.revision,
            usage=self.usage,
            model_requests=self.model_requests,
            tool_calls=self.tool_calls,
        )
        data = RuntimeCheckpointData(
            **self.ids(),
            version=CHECKPOINT_VERSION,
            boundary=boundary,
            state=state,
            request_id=or_unset(request_id),
        )
        event = self.event("runtime.checkpoint", data)
        self.last_checkpoint = event.event_id
        self.checkpointed = len(self.messages)
        return event

    def measure(self, extra: Sequence[ChatMessage] = ()) -> Estimate:
        """The context estimate of ``messages`` followed by ``extra`` (issue #23 §2)."""
        return self.measure_of(self.messages, self.sizes, extra)

    def measure_of(
        self, messages: Sequence[ChatMessage], sizes: list[int], extra: Sequence[ChatMessage] = ()
    ) -> Estimate:
        """The estimate of ``messages`` + ``extra`` in a request of this run.

        ``sizes`` holds the ``message_bytes`` of a prefix of ``messages`` and is completed
        here, so a boundary measures only the messages added since the last one; a
        provider's tokenizer, when the adapter has one, counts the whole request instead.
        """
        a = self.a
        if a.counter is not None:
            return estimate([*messages, *extra], system=a.system, tools=a.advertised, counter=self)
        for message in messages[len(sizes) :]:
            sizes.append(message_bytes(message))
        if self.fixed_bytes is None:
            self.fixed_bytes = request_fixed_bytes(system=a.system, tools=a.advertised)
        every = sizes if not extra else [*sizes, *(message_bytes(message) for message in extra)]
        tokens = request_bytes_from_sizes(every, fixed=self.fixed_bytes)
        return Estimate(tokens=tokens, method="utf8-bytes", messages=len(every))

    def count_tokens(self, request: ModelRequest) -> object:
        """The adapter's tokenizer (:class:`~harness_kernel.runtime._context.TokenCounter`)."""
        assert self.a.counter is not None
        return self.a.counter(request)

    def replace_context(self, messages: Sequence[ChatMessage], sizes: list[int]) -> None:
        """Make ``messages`` the context (a compaction): the next checkpoint starts afresh.

        ``sizes`` are the ``message_bytes`` already measured of a prefix of ``messages``.
        """
        self.messages = list(messages)
        self.sizes = sizes
        self.checkpointed = 0

    def ids(self) -> RunIds:
        """The run, session and turn ids every run event carries."""
        return RunIds(run_id=self.a.run_id, session_id=self.a.session_id, turn_id=self.a.turn_id)

    async def append_locked(self, event: Event) -> None:
        """Append, shielded; the caller holds the writer lock."""
        if self.poison is not None:
            raise self.poison
        with trio.CancelScope(shield=True):
            await self._append_shielded(event)

    async def _append_shielded(self, event: Event) -> None:
        """The store call itself; the caller holds the writer lock inside a shielded scope."""
        await self._store(lambda: self.a.append(event), event.type)

    async def _store(self, call: Callable[[], object], event_type: EventType) -> None:
        """Make one store call (awaiting what it returns); a failure poisons the run with ``event_type``."""
        if self.poison is not None:
            raise self.poison
        try:
            result = call()
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            poison = EventAppendError(event_type)
            poison.__cause__ = error
            self.poison = poison
            raise poison from error

    async def append_batch(self, events: tuple[Event, ...]) -> None:
        """Append and queue events that need no acknowledgement between them (spec §8.4).

        Under the writer lock, shielded. A :class:`~harness_kernel.store.BatchEventStore`
        stores them with one durable commit, all or none (a failure poisons the run with the
        first event's type); any other store gets one ``append`` per event, and each event
        is queued once it is stored.
        """
        with trio.CancelScope(shield=True):
            async with self.writer:
                await self.append_batch_locked(events)

    async def append_batch_locked(self, events: tuple[Event, ...]) -> None:
        """:meth:`append_batch` for a caller that holds the writer lock inside a shielded scope."""
        append_many = self.a.append_many
        if append_many is None:
            for event in events:
                await self._append_shielded(event)
                self.enqueue(event)
            return
        await self._store(lambda: append_many(list(events)), events[0].type)
        for event in events:
            self.enqueue(event)

    async def append(self, event: Event) -> None:
        """Append under the writer lock, shielded from cancellation."""
        with trio.CancelScope(shield=True):
            async with self.writer:
                # Already shielded here, so no second scope (``append_locked`` opens one).
                await self._append_shielded(event)

    def enqueue(self, event: Event) -> None:
        if not self.abandoned:
            self.queue.append(event)

    def check_cancel(self) -> None:
        """Before any step with an effect: a failed append (a steer's, stored from another task,
        issue #23) ends the run; a cancellation request raises ``Canceled``."""
        if self.status == "completing":
            return
        if self.poison is not None:
            raise self.poison
        signal = self.a.signal
        if signal is not None and signal.aborted:
            self.request_cancel()
        if self.cancel_requested:
            raise Canceled

    async def publish(
        self, event_type: EventType, data: EventData, *, actor: str = "kernel", force: bool = False
    ) -> bool:
        """Append and queue one event; True when the producer must wait for the acknowledgement."""
        if not force:
            self.check_cancel()
        event = self.event(event_type, data, actor)
        await self.append(event)
        self.enqueue(event)
        return not self.cancel_requested

    async def publish_batch(self, build: Callable[[], tuple[Event, ...]]) -> bool:
        """Append and queue the events ``build`` makes (after the cancellation check), with no
        acknowledgement between them; True when the producer must wait for the acknowledgement."""
        self.check_cancel()
        await self.append_batch(build())
        return not self.cancel_requested

    @contextmanager
    def cancellable(self, deadline: float = math.inf) -> Generator[trio.CancelScope]:
        """A scope that run cancellation (and the input signal) cancels.

        An abort of the input signal is caught by an inner scope, so the yielded scope's
        ``cancelled_caught`` stays false; it turns into a cancellation request on exit, so
        callers test ``scope.cancelled_caught or self.cancel_requested``.

        So does a trio cancellation of the driving task: it is absorbed here as a
        cancellation request, so that the producer still records the interrupted step (the
        ``permission.resolved`` of an ask, the ``tool.result`` of a started tool) before the
        terminal pair, with only shielded appends; ``advance`` then re-raises it.
        """
        try:
            with trio.CancelScope(deadline=deadline) as scope:
                self.active_scope = scope
                if self.cancel_requested:
                    scope.cancel()
                try:
                    signal = self.a.signal
                    if signal is None:
                        yield scope
                    else:
                        with move_on_abort(signal):
                            yield scope
                finally:
                    self.active_scope = None
        except trio.Cancelled:
            # Not this scope's cancellation (it would have caught its own): the driving task's.
            self.driver_cancelled = True
            self.request_cancel()
        if self.a.signal is not None and self.a.signal.aborted:
            self.request_cancel()

    # ------------------------------------------------------------ producer
    async def _produce(self) -> AsyncGenerator[None, None]:
        try:
            if self.resume is None:
                await self._admit()
            else:
                await self._resume_admit(self.resume)
        except AgentRuntimeError as error:
            self.admission_error = error
            self.error = error
            self.admitted.set()
            self.end("failed")
            return
        self.admitted.set()
        if not self.cancel_requested:
            yield
        status: AgentStatus = "completed"
        note: str | None = None
        error: BaseException | None = None
        try:
            async for _ in self._loop():
                yield
        except EventAppendError as poison:
            self.error = poison
            self.end("failed")
            return
        except Canceled:
            status, note = "canceled", "run canceled"
        except RuntimeBudgetExceededError as exceeded:
            status, note, error = "budget_exceeded", exceeded.message, exceeded
        except AgentRuntimeError as failed:
            status, note, error = "failed", failed.message, failed
        except Exception as fault:
            error = ModelStreamError("model stream failed")
            error.__cause__ = fault
            status, note = "failed", error.message
        await record_terminal(self, status, note, error)

    async def _admit(self) -> None:
        if self.status == "registered":
            self.status = "running"
        a = self.a
        self.agent_id = self.new_id("agent")
        started = AgentStartedData(
            agent_id=self.agent_id,
            session_id=a.session_id,
            task_id=or_unset(a.task_id),
            model=a.model,
            run_id=a.run_id,
            turn_id=a.turn_id,
        )
        agent_started = self.event("agent.started", started)
        self.input_message_id = self.new_id("msg")
        turn_started = self.event(
            "turn.started", TurnStartedData(**self.ids(), input_message_id=self.input_message_id)
        )
        closing = self._close_unanswered_calls()
        self.messages.append(UserMessage(content=a.input))
        self.revision += 1
        user_message = self.event(
            "message.completed",
            UserMessageCompletedData(
                **self.ids(),
                message_id=self.input_message_id,
                role="user",
                content=a.input,
                state_version=1,
                message_revision=self.revision,
            ),
        )
        batch = (agent_started, turn_started, *closing, user_message)
        if a.checkpoints:
            batch = (*batch, self.checkpoint("turn"))
        # No acknowledgement wait between them (spec §8.4): one batch, one commit.
        await self.append_batch(batch)

    def _close_unanswered_calls(self) -> list[Event]:
        """Tool messages for calls the previous turn asked for and never ran (issue #23).

        A turn that ended (canceled, failed, over budget) between an assistant message's
        tool calls leaves calls without a result; every provider refuses a history like
        that. A follow-up therefore answers each such call first, as not run, and stores
        the answer as a tool message before its user message.
        """
        messages = self.messages
        answered: set[str] = set()
        index = len(messages) - 1
        while index >= 0 and type(messages[index]) is ToolMessage:
            message = messages[index]
            assert isinstance(message, ToolMessage)
            answered.add(message.tool_call_id)
            index -= 1
        if index < 0:
            return []
        calling = messages[index]
        if type(calling) is not AssistantMessage or not calling.tool_calls:
            return []
        events: list[Event] = []
        for call in calling.tool_calls:
            if call.id in answered:
                continue
            events.append(self.event("message.completed", self.tool_message(call, NOT_RUN_CONTENT)))
        return events

    def tool_message(self, call: ToolCall, content: str) -> ToolMessageCompletedData:
        """Add the tool message answering ``call`` to the context; its ``message.completed`` data."""
        message_id = self.new_id("msg")
        self.messages.append(ToolMessage(content=content, name=call.name, tool_call_id=call.id))
        self.revision += 1
        return ToolMessageCompletedData(
            **self.ids(),
            message_id=message_id,
            role="tool",
            name=call.name,
            tool_call_id=call.id,
            content=content,
            state_version=1,
            message_revision=self.revision,
        )

    def end(self, status: str) -> None:
        """Mark the run ended with ``status`` and tell the runtime (exactly once)."""
        self.status = status
        self.producer_done = True
        self.finished.set()
        self._on_finish(self)

    async def warning(self, metric: BudgetMetric, used: int, limit: int) -> bool:
        """Publish one ``budget.warning``; True when the producer must wait for the acknowledgement."""
        warning = BudgetWarningData(
            task_id=or_unset(self.a.task_id),
            **self.ids(),
            metric=metric,
            used=used,
            limit=limit,
            pct=percent(used, limit),
        )
        return await self.publish("budget.warning", warning)

    async def _resume_admit(self, plan: ResumePlan) -> None:
        """Take up an interrupted turn: ``turn.resumed``, and the result of an open call.

        An open call whose result was stored gets its tool message rebuilt from it; one
        without a result may have had its effect, so it is never run again: it gets an
        interrupted result, which the model sees at the next request.
        """
        if self.status == "registered":
            self.status = "running"
        self.agent_id = plan.agent_id
        self.input_message_id = plan.input_message_id
        self.output_message_id = plan.output_message_id
        self.model_requests = plan.model_requests
        self.tool_calls = plan.tool_calls
        self.warned = {metric for metric in _METRICS if metric in plan.warned}
        self.model_call_ids = set(plan.model_call_ids)
        self.transcript = plan.transcript
        opened = plan.open_call
        resumed = TurnResumedData(
            **self.ids(),
            checkpoint_event_id=plan.checkpoint.event_id,
            abandoned_request_id=or_unset(plan.abandoned_request_id),
            interrupted_calls=int(opened is not None and opened.result is None),
            note=or_unset(_resume_note(plan)),
        )
        events = [self.event("turn.resumed", resumed)]
        if opened is not None:
            result = opened.result
            if result is None:
                failure = ToolResultErrorData(code="TOOL_INTERRUPTED", message=INTERRUPTED_TOOL_NOTE)
                result = ToolResultData(
                    call_id=opened.call_id, tool=opened.call.name, ok=False, error=failure, **self.ids()
                )
                events.append(self.event("tool.result", result))
            events.append(
                self.event("message.completed", self.tool_message(opened.call, tool_content(result)))
            )
        await self.append_batch(tuple(events))

    async def _resumed(self, plan: ResumePlan) -> AsyncGenerator[None, None]:
        """The continued turn's first step, from where it was interrupted."""
        self.check_cancel()
        if plan.next == "uncertain" and not self.a.resend_uncertain:
            raise ContinuationError(
                plan.session_id,
                f"model request {plan.abandoned_request_id} was in flight when the turn was interrupted;"
                " it is not sent again",
            )
        if plan.next == "fail":
            raise ModelStreamError(plan.note or "model reported an error finish")
        if plan.next == "complete":
            with trio.CancelScope(shield=True):
                async with self.writer:
                    if not self.pending:
                        self.status = "completing"
            return
        if plan.next == "tools":
            assert plan.request_id is not None
            for call in plan.remaining:
                async for _ in ToolStep(self, call, plan.request_id).steps():
                    yield

    async def _loop(self) -> AsyncGenerator[None, None]:
        if self.resume is not None:
            async for _ in self._resumed(self.resume):
                yield
            if self.status == "completing":
                return
        while True:
            async for _ in model_round(self):
                yield
            if self.status == "completing":
                return
