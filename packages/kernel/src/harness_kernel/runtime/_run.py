"""One run of ``MinimalAgentRuntime``: its driver and its producer (spec §8.4 to §8.11).

The producer is an async generator advanced by exactly one driver at a time (the consumer
inside ``__anext__``, or a control). It yields only where it waits for the consumer's
acknowledgement, never inside a cancel scope, so any task may resume it.

A run is three parts: its state (``_state.RunState``: the context and accounting its
checkpoints and terminal pair record), its channel (``_channel.RunChannel``: status,
cancellation, pending steering and the event writer, shared with the tasks outside the
producer), and this driver. The steps (``_model_step``: one model round, ``_tool_step``: one
tool call, ``_compaction``, ``_terminal``: the terminal pair) read the state through a
read-only view and yield what happened as outcomes; the driver applies each at once (one
place writes the state) and passes acknowledgement waits up to the consumer. No step
imports this module.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Final

import trio

from harness_kernel._json import has_lone_surrogate
from harness_kernel.events._model import (
    AgentStartedData,
    AgentStatus,
    Event,
    ToolResultData,
    ToolResultErrorData,
    TurnResumedData,
    TurnStartedData,
    UserMessageCompletedData,
)
from harness_kernel.models._types import AssistantMessage, ToolCall, ToolMessage, UserMessage
from harness_kernel.runtime._channel import RunChannel
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    BudgetMetric,
    EventAppendError,
    InvalidRunInputError,
    ModelStreamError,
    RunTerminalError,
    RuntimeBudgetExceededError,
)
from harness_kernel.runtime._input import Admitted
from harness_kernel.runtime._model_step import model_round
from harness_kernel.runtime._resume import ContinuationError, ResumePlan, tool_content
from harness_kernel.runtime._shared import MAX_STEERING_CHARS, Canceled, or_unset
from harness_kernel.runtime._state import MessageAdded, RunState, StepValue
from harness_kernel.runtime._terminal import Stopped, record_terminal
from harness_kernel.runtime._tool_step import ToolStep, observed_content, tool_answer, tool_message_data

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
    """One admitted run: its state, its channel, and the driver of its producer."""

    def __init__(
        self, admitted: Admitted, on_finish: Callable[[Run], None], resume: ResumePlan | None = None
    ) -> None:
        self.admitted: Final = admitted
        self.resume: Final = resume
        """Where an interrupted turn stands, when this run continues it (issue #23 §3)."""
        self.state = RunState.of(admitted)
        self.channel = RunChannel(admitted)
        # The driver lock keeps trio.Lock's scheduling point: one per delivered event, where
        # controls (cancel) and other tasks get their turn.
        self.driver = trio.Lock()
        self.admission_done = trio.Event()
        self.finished = trio.Event()
        self.admission_error: AgentRuntimeError | None = None
        self.pairless: AgentRuntimeError | None = None
        self.error: BaseException | None = None
        self.producer_done = False
        self._on_finish = on_finish
        self._producer = self._produce()
        if admitted.signal is not None and admitted.signal.aborted:
            self.channel.request_cancel()

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
        channel = self.channel
        channel.driver_cancelled = False
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
                    channel.drop_undelivered()
                if not self.finished.is_set():
                    channel.request_cancel()
                    self._stop(await record_terminal(self.state, channel, "canceled", "run canceled", None))
            raise
        if channel.driver_cancelled:
            # A wait of the producer absorbed the driving task's cancellation as a run
            # cancellation (``cancellable``), so the step ran the producer to its end; the
            # task's own Cancelled is delivered now.
            channel.driver_cancelled = False
            if consumer:
                channel.drop_undelivered()
            await trio.lowlevel.checkpoint_if_cancelled()

    async def abandon(self) -> None:
        """Drop undelivered events, request cancellation and drive the run to its end.

        Completion wins: a run that is already completing finishes as it was going to. A run
        that an earlier call abandoned is still driven (or waited for) to its end: that call
        may have been cancelled before anyone drove.
        """
        self.channel.drop_undelivered()
        if self.finished.is_set():
            return
        if self.channel.status != "completing":
            self.channel.request_cancel()
        await self.drive_to_end()

    async def drive_to_end(self) -> None:
        """Drive (or wait for) the run to its end."""
        async with self.driver:
            while not self.producer_done:
                await self.advance()
        await self.finished.wait()

    async def ensure_admitted(self) -> None:
        """Drive admission if no one has; re-raise its failure."""
        if not self.admission_done.is_set():
            if self.driver.locked():
                await self.admission_done.wait()
            else:
                async with self.driver:
                    if not self.admission_done.is_set():
                        await self.advance()
        if self.admission_error is not None:
            raise self.admission_error

    def failure(self) -> AgentRuntimeError | None:
        """What a control waiting for the end re-raises (§8.10: "return, or raise its failure")."""
        return self.admission_error or self.channel.poison or self.pairless

    async def steer(self, text: str) -> str:
        """Store ``text`` as ``steering.queued`` for the next model-request boundary; its message id.

        FIFO across concurrent callers (the writer lock); at most ``MAX_PENDING_STEERING``
        pending. A steer that is being stored when cancellation wins stays in history (the
        append is shielded) and is never applied.

        Raises:
            InvalidRunInputError: not a str of 1..256 Ki characters, or 1 024 already pending.
            RunTerminalError: cancellation was requested, or the run is completing or finished.
            SteeringClosedError: the run's last boundary passed while this steer waited its turn.
            EventAppendError: the event could not be stored.
        """
        if type(text) is not str or not 1 <= len(text) <= MAX_STEERING_CHARS or has_lone_surrogate(text):
            raise InvalidRunInputError(f"steering text must be a str of 1..{MAX_STEERING_CHARS} characters")
        await self.ensure_admitted()
        if self.channel.closed_to_steering():
            raise RunTerminalError(self.admitted.run_id, self.channel.status)
        return await self.channel.queue_steering(text)

    def _stop(self, stopped: Stopped) -> None:
        """Mark the run ended as ``stopped`` says and tell the runtime (exactly once)."""
        self.error = stopped.error
        if stopped.pairless:
            assert isinstance(stopped.error, AgentRuntimeError)
            self.pairless = stopped.error
        self.channel.status = stopped.status
        self.producer_done = True
        self.finished.set()
        self._on_finish(self)

    # ------------------------------------------------------------ producer
    async def _produce(self) -> AsyncGenerator[None, None]:
        try:
            if self.resume is None:
                await self._admit()
            else:
                await self._resume_admit(self.resume)
        except AgentRuntimeError as error:
            self.admission_error = error
            self.admission_done.set()
            self._stop(Stopped("failed", error))
            return
        self.admission_done.set()
        if not self.channel.cancel_requested:
            yield
        status: AgentStatus = "completed"
        note: str | None = None
        error: BaseException | None = None
        try:
            async for _ in self._loop():
                yield
        except EventAppendError as poison:
            self._stop(Stopped("failed", poison))
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
        self._stop(await record_terminal(self.state, self.channel, status, note, error))

    async def _admit(self) -> None:
        state, channel, admitted = self.state, self.channel, self.admitted
        channel.start()
        state.agent_id = channel.new_id("agent")
        started = AgentStartedData(
            **channel.ids, agent_id=state.agent_id, task_id=or_unset(admitted.task_id), model=admitted.model
        )
        agent_started = channel.event("agent.started", started)
        state.input_message_id = channel.new_id("msg")
        turn_started = channel.event(
            "turn.started", TurnStartedData(**channel.ids, input_message_id=state.input_message_id)
        )
        closing = self._close_unanswered_calls()
        state.apply(MessageAdded(UserMessage(content=admitted.input)))
        user_message = channel.event(
            "message.completed",
            UserMessageCompletedData(
                **channel.ids,
                message_id=state.input_message_id,
                role="user",
                content=admitted.input,
                state_version=1,
                message_revision=state.revision,
            ),
        )
        batch = (agent_started, turn_started, *closing, user_message)
        if admitted.checkpoints:
            checkpoint, checkpointed = channel.checkpoint(state, "turn")
            state.apply(checkpointed)
            batch = (*batch, checkpoint)
        # No acknowledgement wait between them (spec §8.4): one batch, one commit.
        await channel.append_batch(batch)

    def _close_unanswered_calls(self) -> list[Event]:
        """Tool messages for calls the previous turn asked for and never ran (issue #23).

        A turn that ended (canceled, failed, over budget) between an assistant message's
        tool calls leaves calls without a result; every provider refuses a history like
        that. A follow-up therefore answers each such call first, as not run, and stores
        the answer as a tool message before its user message.
        """
        messages = self.state.messages
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
        return [self._answer(call, NOT_RUN_CONTENT) for call in calling.tool_calls if call.id not in answered]

    def _answer(self, call: ToolCall, content: str) -> Event:
        """The ``message.completed`` of the tool message answering ``call``, added to the context."""
        self.state.apply(tool_answer(call, content))
        data = tool_message_data(self.channel, call, content, self.state.revision)
        return self.channel.event("message.completed", data)

    async def _resume_admit(self, plan: ResumePlan) -> None:
        """Take up an interrupted turn: ``turn.resumed``, and the result of an open call.

        An open call whose result was stored gets its tool message rebuilt from it; one
        without a result may have had its effect, so it is never run again: it gets an
        interrupted result, which the model sees at the next request.
        """
        state, channel = self.state, self.channel
        channel.start()
        state.agent_id = plan.agent_id
        state.input_message_id = plan.input_message_id
        state.output_message_id = plan.output_message_id
        state.model_requests = plan.model_requests
        state.tool_calls = plan.tool_calls
        state.warned = {metric for metric in _METRICS if metric in plan.warned}
        state.model_call_ids = set(plan.model_call_ids)
        state.transcript = plan.transcript
        opened = plan.open_call
        resumed = TurnResumedData(
            **channel.ids,
            checkpoint_event_id=plan.checkpoint.event_id,
            abandoned_request_id=or_unset(plan.abandoned_request_id),
            interrupted_calls=int(opened is not None and opened.result is None),
            note=or_unset(_resume_note(plan)),
        )
        events = [channel.event("turn.resumed", resumed)]
        if opened is not None:
            result = opened.result
            if result is None:
                failure = ToolResultErrorData(code="TOOL_INTERRUPTED", message=INTERRUPTED_TOOL_NOTE)
                result = ToolResultData(
                    call_id=opened.call_id, tool=opened.call.name, ok=False, error=failure, **channel.ids
                )
                events.append(channel.event("tool.result", result))
            events.append(self._answer(opened.call, tool_content(result)))
        await channel.append_batch(tuple(events))

    async def _resumed(self, plan: ResumePlan) -> AsyncGenerator[StepValue, None]:
        """The continued turn's first step, from where it was interrupted."""
        channel = self.channel
        channel.check_cancel()
        if plan.next == "uncertain" and not self.admitted.resend_uncertain:
            raise ContinuationError(
                plan.session_id,
                f"model request {plan.abandoned_request_id} was in flight when the turn was interrupted;"
                " it is not sent again",
            )
        if plan.next == "fail":
            raise ModelStreamError(plan.note or "model reported an error finish")
        if plan.next == "complete":
            await channel.complete_unless_steered()
            return
        if plan.next == "tools":
            assert plan.request_id is not None
            for call in plan.remaining:
                async for value in ToolStep(self.state, channel, call, plan.request_id).steps():
                    yield value

    async def _loop(self) -> AsyncGenerator[None, None]:
        """The turn's steps in order; their outcomes applied, their acknowledgement waits passed up."""
        state, channel = self.state, self.channel
        if self.resume is not None:
            async for value in self._resumed(self.resume):
                if value is None:
                    yield
                else:
                    state.apply(value)
            if channel.status == "completing":
                return
        while True:
            async for value in model_round(state, channel):
                if value is None:
                    yield
                else:
                    state.apply(value)
            if channel.status == "completing":
                return
