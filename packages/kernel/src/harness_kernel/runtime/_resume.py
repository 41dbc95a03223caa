"""Where an interrupted turn stands, read from its session's events (issue #23 §3).

:func:`plan_continuation` is pure: from the stored events of a session it finds the last
turn, checks that it has no terminal pair, rebuilds its context from the session's runtime
checkpoints, and reads what happened after the turn's last checkpoint:

- after a ``turn`` checkpoint: the next step is a model round;
- after a ``request`` checkpoint (stored with its ``model.request``): a recorded answer
  (``model.response`` and the assistant's message) is taken as it was; a request without
  a recorded answer is *uncertain model work*: the model may have been called, so it is
  never re-sent silently (see :class:`ResumePlan.abandoned_request_id`);
- after a ``response`` checkpoint (stored with an assistant message that asked for tools):
  each call is done (its tool message is stored), recorded but without its message (the
  message is rebuilt from ``tool.result``), *open* (``tool.call`` stored, no result: its
  effect may have happened, so it is never run again and gets an interrupted result), or
  not started (no ``tool.call``: it runs as it would have).

Pending steering is what was queued in the session and never applied; a compaction stored
after the last checkpoint is applied to the rebuilt context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from msgspec import UNSET

from harness_kernel._json import encode_json
from harness_kernel.events._model import (
    AgentStartedData,
    AssistantMessageCompletedData,
    BudgetWarningData,
    ContextCheckpointData,
    ContextCompactedData,
    Event,
    ModelRequestData,
    ModelResponseData,
    SteeringAppliedData,
    SteeringQueuedData,
    ToolCallData,
    ToolMessageCompletedData,
    ToolResultData,
    ToolResultErrorData,
    TurnCompletedData,
    TurnStartedData,
)
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from harness_kernel.runtime._checkpoint import RuntimeCheckpoint, decode_checkpoint, rebuild_context
from harness_kernel.runtime._context import SUMMARY_PREFIX
from harness_kernel.runtime._errors import AgentRuntimeError
from harness_kernel.runtime._response import add_usage
from harness_kernel.runtime._tool_step import observed_content

__all__ = [
    "ContinuationError",
    "ConversationPlan",
    "OpenCall",
    "ResumePlan",
    "plan_continuation",
    "plan_conversation",
    "tool_content",
]

Next: TypeAlias = Literal["round", "complete", "fail", "tools", "uncertain"]


class ContinuationError(AgentRuntimeError):
    """A session has no interrupted turn to continue, or its events cannot be continued."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__("RUNTIME_CONTINUATION_INVALID", f'cannot continue session "{session_id}": {reason}')
        self.session_id = session_id
        self.reason = reason


@dataclass(frozen=True, slots=True)
class OpenCall:
    """A call of the last response whose ``tool.call`` is stored but not its tool message."""

    call: ToolCall
    call_id: str
    result: ToolResultData | None
    """Its stored ``tool.result``; ``None`` when the call was interrupted before it had one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePlan:
    """What continuing an interrupted turn starts from."""

    session_id: str
    run_id: str
    turn_id: str
    agent_id: str
    input_message_id: str
    checkpoint: RuntimeCheckpoint
    """The turn's last runtime checkpoint."""
    messages: tuple[ChatMessage, ...]
    revision: int
    usage: Usage
    model_requests: int
    tool_calls: int
    warned: frozenset[str]
    model_call_ids: frozenset[str]
    transcript: int
    pending: tuple[tuple[str, str], ...]
    compactions: int
    checkpointed: int
    """How many of ``messages`` the last checkpoint covers (0 after a later compaction)."""
    output_message_id: str | None
    next: Next
    note: str | None = None
    """Why the turn fails (``next == "fail"``)."""
    abandoned_request_id: str | None = None
    """A request stored without a recorded answer (``next == "uncertain"``)."""
    request_id: str | None = None
    """The request whose response asked for the calls (``next == "tools"``)."""
    open_call: OpenCall | None = None
    remaining: tuple[ToolCall, ...] = ()


def tool_content(result: ToolResultData) -> str:
    """The tool message a run builds from a ``tool.result`` (as ``ToolStep`` does)."""
    if result.ok:
        return observed_content((result.output if result.output is not UNSET else None, None))
    error = result.error
    code = error.code if isinstance(error, ToolResultErrorData) else "TOOL_FAILED"
    message = error.message if isinstance(error, ToolResultErrorData) else ""
    return observed_content((None, (code, message)))


def _usage(value: object) -> Usage:
    return Usage(
        prompt_tokens=getattr(value, "prompt_tokens", 0),
        completion_tokens=getattr(value, "completion_tokens", 0),
        total_tokens=getattr(value, "total_tokens", 0),
    )


class _Turn:
    """The last turn's events after its last checkpoint, indexed."""

    def __init__(self, events: Sequence[Event], run_id: str) -> None:
        self.requests: set[str] = set()
        self.responses: dict[str, ModelResponseData] = {}
        self.assistant: dict[str, AssistantMessageCompletedData] = {}
        self.calls: dict[str, ToolCallData] = {}
        self.results: dict[str, ToolResultData] = {}
        self.messages: dict[str, ToolMessageCompletedData] = {}
        self.compaction: ContextCheckpointData | None = None
        self.compaction_usage = Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
        for event in events:
            data = event.data
            if getattr(data, "run_id", None) != run_id:
                continue
            if isinstance(data, ModelRequestData):
                self.requests.add(data.request_id)
            elif isinstance(data, ModelResponseData):
                self.responses[data.request_id] = data
            elif isinstance(data, AssistantMessageCompletedData):
                self.assistant[data.request_id] = data
            elif isinstance(data, ToolCallData) and isinstance(data.model_call_id, str):
                self.calls[data.model_call_id] = data
            elif isinstance(data, ToolResultData):
                self.results[data.call_id] = data
            elif isinstance(data, ToolMessageCompletedData):
                self.messages[data.tool_call_id] = data
            elif isinstance(data, ContextCheckpointData):
                self.compaction = data
            elif isinstance(data, ContextCompactedData):
                self.compaction_usage = add_usage(self.compaction_usage, _usage(data.usage))


def _last_turn(
    events: Sequence[Event], session_id: str
) -> tuple[int, TurnStartedData, TurnCompletedData | None]:
    """Where the session's last turn starts, its ``turn.started`` and its ``turn.completed`` if it ended."""
    for index in range(len(events) - 1, -1, -1):
        turn = events[index].data
        if isinstance(turn, TurnStartedData):
            ended = next(
                (
                    data
                    for event in events[index:]
                    if isinstance(data := event.data, TurnCompletedData) and data.run_id == turn.run_id
                ),
                None,
            )
            return index, turn, ended
    raise ContinuationError(session_id, "the session has no turn")


def _checkpoints(events: Sequence[Event]) -> tuple[list[int], list[RuntimeCheckpoint]]:
    """The positions of the session's runtime checkpoints and the checkpoints, decoded."""
    marks = [i for i, event in enumerate(events) if event.type == "runtime.checkpoint"]
    return marks, [decode_checkpoint(events[i]) for i in marks]


def _pending(events: Sequence[Event]) -> tuple[tuple[str, str], ...]:
    applied = {data.message_id for event in events if isinstance(data := event.data, SteeringAppliedData)}
    return tuple(
        (data.message_id, data.content)
        for event in events
        if isinstance(data := event.data, SteeringQueuedData) and data.message_id not in applied
    )


def plan_continuation(events: Sequence[Event], session_id: str) -> ResumePlan:
    """Where the session's last turn stands and what continuing it starts with.

    Raises:
        ContinuationError: no turn, the last turn already ended, or it has no checkpoint.
        CheckpointError: a checkpoint is invalid, of an unknown version, or breaks the chain.
    """
    start, turn, ended = _last_turn(events, session_id)
    run_id = turn.run_id
    tail = events[start:]
    if ended is not None:
        raise ContinuationError(session_id, "its last turn has ended; there is nothing to continue")
    agent_id = next(
        (
            data.agent_id
            for event in events[:start]
            if isinstance(data := event.data, AgentStartedData) and data.run_id == run_id
        ),
        None,
    )
    marks, checkpoints = _checkpoints(events)
    turn_marks = [i for i, cp in zip(marks, checkpoints, strict=True) if cp.run_id == run_id]
    if agent_id is None or not turn_marks:
        raise ContinuationError(session_id, "its last turn stored no runtime checkpoint")
    chain = checkpoints[: marks.index(turn_marks[-1]) + 1]
    turn_events = [event for event in tail if getattr(event.data, "run_id", None) == run_id]
    state = _State(session_id, chain, _Turn(events[turn_marks[-1] + 1 :], run_id))
    state.model_call_ids.update(
        data.model_call_id
        for event in turn_events
        if isinstance(data := event.data, ToolCallData) and isinstance(data.model_call_id, str)
    )
    state.advance()
    state.apply_compaction()
    return ResumePlan(
        session_id=session_id,
        run_id=run_id,
        turn_id=turn.turn_id,
        agent_id=agent_id,
        input_message_id=turn.input_message_id,
        checkpoint=state.last,
        messages=tuple(state.messages),
        revision=state.revision,
        usage=state.usage,
        model_requests=sum(1 for event in turn_events if isinstance(event.data, ModelRequestData)),
        tool_calls=sum(1 for event in turn_events if isinstance(event.data, ToolCallData)),
        warned=frozenset(
            data.metric for event in turn_events if isinstance(data := event.data, BudgetWarningData)
        ),
        model_call_ids=frozenset(state.model_call_ids),
        transcript=_transcript(turn_events),
        pending=_pending(events),
        compactions=sum(1 for event in events if isinstance(event.data, ContextCheckpointData)),
        checkpointed=state.checkpointed,
        output_message_id=state.output_message_id,
        next=state.next,
        note=state.note,
        abandoned_request_id=state.abandoned_request_id,
        request_id=state.request_id,
        open_call=state.open_call,
        remaining=tuple(state.remaining),
    )


def _transcript(events: Sequence[Event]) -> int:
    """The tool transcript's bytes so far: call arguments and successful outputs."""
    total = 0
    for event in events:
        data = event.data
        if isinstance(data, ToolCallData) and data.input is not UNSET:
            total += len(encode_json(data.input))
        elif isinstance(data, ToolResultData) and data.ok and data.output is not UNSET:
            total += len(encode_json(data.output))
    return total


class _State:
    """The turn's context and position, advanced from its last checkpoint."""

    def __init__(self, session_id: str, chain: Sequence[RuntimeCheckpoint], after: _Turn) -> None:
        self.session_id = session_id
        self.last = chain[-1]
        self.after = after
        self.messages: list[ChatMessage] = list(rebuild_context(chain))
        self.revision = self.last.message_revision
        self.usage = self.last.usage
        self.checkpointed = self.last.message_count
        self.model_call_ids: set[str] = set()
        self.output_message_id: str | None = None
        self.next: Next = "round"
        self.note: str | None = None
        self.abandoned_request_id: str | None = None
        self.request_id: str | None = None
        self.open_call: OpenCall | None = None
        self.remaining: list[ToolCall] = []

    def advance(self) -> None:
        if self.last.boundary == "request":
            self._after_request()
        elif self.last.boundary == "response":
            self._after_response()

    def _after_request(self) -> None:
        request_id = self.last.request_id
        assert request_id is not None
        if request_id not in self.after.requests:
            # A store without batches kept the checkpoint but not its model.request: the
            # model is called only after that event is stored, so it was never called.
            return
        response = self.after.responses.get(request_id)
        answer = self.after.assistant.get(request_id)
        if response is None or answer is None or answer.finish_reason == "tool_calls":
            self.next = "uncertain"
            self.abandoned_request_id = request_id
            return
        self.usage = add_usage(self.usage, _usage(response.usage))
        self.messages.append(AssistantMessage(content=answer.content))
        self.revision = _revision(answer.message_revision, self.revision)
        self.output_message_id = answer.message_id
        if answer.finish_reason == "stop":
            self.next = "complete"
        else:
            self.next = "fail"
            self.note = (
                "model output ended at the provider length limit"
                if answer.finish_reason == "length"
                else "model reported an error finish"
            )

    def _after_response(self) -> None:
        assistant = self.last.messages[-1] if self.last.messages else None
        if not isinstance(assistant, AssistantMessage) or not assistant.tool_calls:
            raise ContinuationError(self.session_id, "its response checkpoint holds no tool calls")
        self.model_call_ids.update(call.id for call in assistant.tool_calls)
        self.request_id = self.last.request_id
        self.next = "tools"
        for call in assistant.tool_calls:
            if self.remaining or self.open_call is not None:
                self.remaining.append(call)
                continue
            recorded = self.after.calls.get(call.id)
            if recorded is None:
                self.remaining.append(call)
                continue
            done = self.after.messages.get(call.id)
            if done is not None:
                self.messages.append(ToolMessage(content=done.content, name=done.name, tool_call_id=call.id))
                self.revision = _revision(done.message_revision, self.revision)
                continue
            self.open_call = OpenCall(call, recorded.call_id, self.after.results.get(recorded.call_id))

    def apply_compaction(self) -> None:
        """A compaction stored after the last checkpoint (before its round's request)."""
        compaction = self.after.compaction
        if compaction is None:
            return
        summary = UserMessage(content=SUMMARY_PREFIX + compaction.summary)
        self.messages = [summary, *self.messages[compaction.tail_start :]]
        self.revision = compaction.message_revision
        self.usage = add_usage(self.usage, self.after.compaction_usage)
        self.checkpointed = 0


def _revision(value: object, previous: int) -> int:
    return value if type(value) is int else previous + 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationPlan:
    """What the next turn of a session whose last turn ended inherits, read from its events."""

    session_id: str
    status: str
    """How the last turn ended (its ``turn.completed`` status)."""
    final_text: str
    """The last turn's last assistant message ("" when it had none)."""
    messages: tuple[ChatMessage, ...]
    revision: int
    usage: Usage
    pending: tuple[tuple[str, str], ...]
    last_checkpoint: str
    checkpointed: int
    compactions: int


def plan_conversation(events: Sequence[Event], session_id: str) -> ConversationPlan:
    """The conversation a session's ended last turn left, to go on with a follow-up.

    Raises:
        ContinuationError: no turn, the last turn has not ended (continue it instead), or
            the session stored no runtime checkpoint.
        CheckpointError: a checkpoint is invalid, of an unknown version, or breaks the chain.
    """
    start, turn, ended = _last_turn(events, session_id)
    run_id = turn.run_id
    tail = events[start:]
    if ended is None:
        raise ContinuationError(session_id, "its last turn has not ended; continue it instead")
    marks, chain = _checkpoints(events)
    if not marks:
        raise ContinuationError(session_id, "it stored no runtime checkpoint")
    state = _State(session_id, chain, _Turn(events[marks[-1] + 1 :], chain[-1].run_id))
    state.advance()
    opened = state.open_call
    if opened is not None and opened.result is not None:
        # A result stored without its message (the turn ended right after it).
        content = tool_content(opened.result)
        state.messages.append(
            ToolMessage(content=content, name=opened.call.name, tool_call_id=opened.call.id)
        )
        state.revision += 1
    state.apply_compaction()
    final_text = ""
    for event in tail:
        data = event.data
        if isinstance(data, AssistantMessageCompletedData) and data.run_id == run_id:
            final_text = data.content
    revision = ended.message_revision if type(ended.message_revision) is int else state.revision
    usage = _usage(ended.usage) if ended.usage is not UNSET else state.usage
    return ConversationPlan(
        session_id=session_id,
        status=ended.status,
        final_text=final_text,
        messages=tuple(state.messages),
        revision=max(revision, state.revision),
        usage=usage,
        pending=_pending(events),
        last_checkpoint=state.last.event_id,
        checkpointed=state.checkpointed,
        compactions=sum(1 for event in events if isinstance(event.data, ContextCheckpointData)),
    )
