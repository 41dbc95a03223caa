"""One model round of a run: the budget checks, ``model.request``, the streamed frames, the
response and its message, then the round's tool calls (spec §8.5, §8.9).

The model is pulled only after the consumer acknowledged ``model.request`` (the producer
yields there), and every frame it sends is checked before anything is recorded: a text
delta becomes ``message.delta``, tool calls are collected, and the completion must agree
with what was streamed. The round's deadline (``model_timeout_ms``) and run cancellation
interrupt the pull; the stream is always closed, within :data:`CLEANUP_GRACE`.

The round reads the run through a :class:`RunView` and yields what happened (the steering
applied, the request sent, the answer, its message) as outcomes for the driver to apply.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import trio

from harness_kernel._bounded import BoundedJsonError, bounded_json
from harness_kernel._ids import is_id
from harness_kernel._json import has_lone_surrogate
from harness_kernel.events._model import (
    AssistantMessageCompletedData,
    ContextAccountedData,
    Event,
    MessageDeltaData,
    ModelRequestData,
    ModelResponseData,
    SteeringAppliedData,
)
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    CompletionResponse,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    UserMessage,
)
from harness_kernel.runtime._channel import RunChannel
from harness_kernel.runtime._compaction import compact_if_needed
from harness_kernel.runtime._context import check_window
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    ModelStreamError,
    ModelTimeoutError,
    RuntimeBudgetExceededError,
)
from harness_kernel.runtime._response import check_response, close_iterator, stream_failed
from harness_kernel.runtime._shared import (
    MAX_DELTA,
    MAX_TRANSCRIPT_BYTES,
    Canceled,
)
from harness_kernel.runtime._state import (
    Checkpointed,
    MessageAdded,
    ModelAnswered,
    RequestSent,
    RunView,
    StepValue,
    TranscriptGrew,
    Warned,
)
from harness_kernel.runtime._terminal import event_usage
from harness_kernel.runtime._tool_step import ToolStep
from harness_workspace import AbortController, AbortSignal

__all__ = ["model_round"]


async def model_round(view: RunView, channel: RunChannel) -> AsyncGenerator[StepValue, None]:
    """One round: request, pull, record the response, then run its tool calls in order."""
    async for value in _check_budget(view, channel):
        yield value
    channel.check_cancel()
    if view.admitted.policy is not None:
        async for value in compact_if_needed(view, channel):
            yield value
    request_id = channel.new_id("req")
    output_id = channel.new_id("msg")
    recorded = await _record_request(view, channel, request_id)
    for message in recorded.steering:
        yield MessageAdded(message)
    if recorded.checkpoint is not None:
        yield recorded.checkpoint
    if not channel.cancel_requested:
        yield None
    yield RequestSent()
    channel.check_cancel()
    pull = _Pull(view, channel, request_id, output_id, recorded.messages)
    async for value in pull.frames():
        yield value
    response, calls = pull.completed()
    if pull.transcript:
        yield TranscriptGrew(pull.transcript)
    async for value in _record_response(
        view, channel, request_id=request_id, output_id=output_id, response=response, calls=calls
    ):
        yield value
    if response.finish_reason == "tool_calls":
        for call in calls:
            async for value in ToolStep(view, channel, call, request_id).steps():
                yield value


async def _check_budget(view: RunView, channel: RunChannel) -> AsyncGenerator[StepValue, None]:
    """Steps and tokens before a request: an exceed ends the run, half the steps warns."""
    max_steps = view.admitted.max_steps
    requests = view.model_requests
    if requests >= max_steps:
        if await channel.warning("steps", requests, max_steps):
            yield None
        raise RuntimeBudgetExceededError("steps", requests, max_steps)
    next_step = requests + 1
    if max_steps > 0 and "steps" not in view.warned and next_step >= max(1, math.ceil(max_steps / 2)):
        yield Warned("steps")
        if await channel.warning("steps", next_step, max_steps):
            yield None
    async for value in channel.refuse_spent_tokens(view.usage.total_tokens):
        yield value


@dataclass(frozen=True, slots=True)
class _Recorded:
    """What a stored ``model.request`` sends, and what its storing changed."""

    messages: tuple[ChatMessage, ...]
    steering: tuple[UserMessage, ...]
    checkpoint: Checkpointed | None


async def _record_request(view: RunView, channel: RunChannel, request_id: str) -> _Recorded:
    """Apply the pending steering, account for the context and append ``model.request``
    (spec §8.5 step 2; issue #23).

    Under the writer lock, so a ``steer`` either lands before this request (and is applied
    to it, ``steering.applied`` before ``model.request``) or waits for the next boundary; it
    is never spliced into a request already in flight. With a context policy the request is
    measured first (``context.accounted``); one over the window raises
    :class:`ContextOverflowError` before anything changes. With checkpoints on, the request's
    ``runtime.checkpoint`` goes in the same batch. The events need no acknowledgement between
    them: one batch. The steering joins the context once the batch is stored.
    """
    admitted = view.admitted
    events: list[Event] = []
    recorded: _Recorded | None = None
    with trio.CancelScope(shield=True):
        async with channel.writer:
            pending = channel.pending
            steering = tuple(UserMessage(content=text) for _, text in pending)
            policy = admitted.policy
            measured = None
            if policy is not None:
                measured = view.measure(steering)
                check_window(measured.tokens, policy)
            revision = view.revision
            for message_id, _ in pending:
                revision += 1
                applied = SteeringAppliedData(
                    **channel.ids, message_id=message_id, request_id=request_id, message_revision=revision
                )
                events.append(channel.event("steering.applied", applied))
            messages = (*view.messages, *steering)
            if policy is not None and measured is not None:
                accounted = ContextAccountedData(
                    **channel.ids,
                    request_id=request_id,
                    messages=len(messages),
                    tokens=measured.tokens,
                    method=measured.method,
                    window_tokens=policy.window_tokens,
                    threshold_tokens=policy.threshold_tokens,
                    reserve_tokens=policy.reserve_tokens,
                )
                events.append(channel.event("context.accounted", accounted))
            checkpointed = None
            if admitted.checkpoints:
                event, checkpointed = channel.checkpoint(
                    view, "request", request_id, messages=messages, revision=revision
                )
                events.append(event)
            request = ModelRequestData(
                request_id=request_id,
                model=admitted.model,
                message_count=len(messages),
                **channel.ids,
                step=view.model_requests + 1,
                context_version=1,
                message_revision=revision,
            )
            events.append(channel.event("model.request", request))
            await channel.append_batch_locked(tuple(events))
            pending.clear()
            recorded = _Recorded(messages, steering, checkpointed)
    assert recorded is not None
    return recorded


class _Pull:
    """The pull of one model stream: its deadline, its abort signal and what it sent."""

    def __init__(
        self,
        view: RunView,
        channel: RunChannel,
        request_id: str,
        output_id: str,
        messages: tuple[ChatMessage, ...],
    ) -> None:
        self.view = view
        self.channel = channel
        self.request_id = request_id
        self.output_id = output_id
        self.messages = messages
        self.deltas: list[str] = []
        self.calls: list[ToolCall] = []
        self.response: CompletionResponse | None = None
        self.round_controller = AbortController()
        self.deadline = math.inf
        self.transcript = 0
        """The bytes of the streamed calls' arguments (the run's tool transcript grows by them)."""

    def completed(self) -> tuple[CompletionResponse, list[ToolCall]]:
        """The checked completion and the streamed calls (after :meth:`frames` returned)."""
        assert self.response is not None
        return self.response, self.calls

    def _request(self) -> ModelRequest:
        view = self.view
        admitted = view.admitted
        limit = admitted.max_model_tokens
        max_tokens = admitted.max_tokens
        if limit is not None:
            remaining = limit - view.usage.total_tokens
            max_tokens = remaining if max_tokens is None else min(max_tokens, remaining)
        return ModelRequest(
            messages=self.messages,
            tools=admitted.advertised,
            model=admitted.model,
            max_tokens=max_tokens,
            system=admitted.system,
            provider_options=admitted.provider_options,
            signal=AbortSignal.any([self.round_controller.signal, self.channel.controller.signal]),
            context_version=1,
            message_revision=view.revision,
        )

    async def frames(self) -> AsyncGenerator[StepValue, None]:
        """Open the stream and take frames until the completion; always close the stream."""
        round_controller = self.round_controller
        with self.channel.model_round(round_controller):
            request = self._request()
            timeout_ms = self.view.admitted.model_timeout_ms
            if timeout_ms is not None:
                self.deadline = trio.current_time() + timeout_ms / 1000
            iterator: Any = None
            try:
                iterator = self._open(request)
                while self.response is None:
                    frame = await self._next_frame(iterator)
                    if await self._take(frame):
                        yield None
            finally:
                if not round_controller.signal.aborted:
                    round_controller.abort(ModelStreamError("model request stream closed"))
                if iterator is not None:
                    await close_iterator(iterator)

    def _open(self, request: ModelRequest) -> object:
        channel = self.channel
        try:
            with channel.cancellable(self.deadline) as scope:
                result = self.view.admitted.stream(request)
            if scope.cancelled_caught or channel.cancel_requested:
                self._interrupted()
        except (AgentRuntimeError, Canceled):
            raise
        except Exception as error:
            raise stream_failed(error) from error
        if inspect.iscoroutine(result):
            result.close()
            raise ModelStreamError("model stream must return an async iterator")
        if not callable(getattr(type(result), "__anext__", None)):
            raise ModelStreamError("model stream must return an async iterator")
        return result

    async def _next_frame(self, iterator: Any) -> object:
        channel = self.channel
        channel.check_cancel()
        if trio.current_time() >= self.deadline:
            self._timeout()
        frame: object = None
        try:
            with channel.cancellable(self.deadline) as scope:
                frame = await iterator.__anext__()
        except StopAsyncIteration:
            raise ModelStreamError("model stream ended without a completion") from None
        except (AgentRuntimeError, Canceled):
            raise
        except Exception as error:
            channel.check_cancel()
            if trio.current_time() >= self.deadline:
                self._timeout()
            raise stream_failed(error) from error
        if scope.cancelled_caught or channel.cancel_requested:
            self._interrupted()
        return frame

    async def _take(self, frame: object) -> bool:
        """Check and record one frame; True when the producer must wait for the acknowledgement."""
        if type(frame) is TextDeltaFrame:
            assert isinstance(frame, TextDeltaFrame)
            delta: object = frame.delta
            if (
                self.calls
                or type(delta) is not str
                or not 1 <= len(delta) <= MAX_DELTA
                or has_lone_surrogate(delta)
            ):
                raise ModelStreamError("model stream sent an invalid text delta")
            sequence = len(self.deltas)
            self.deltas.append(delta)
            data = MessageDeltaData(
                **self.channel.ids,
                request_id=self.request_id,
                message_id=self.output_id,
                role="assistant",
                sequence=sequence,
                delta=delta,
            )
            return await self.channel.publish("message.delta", data)
        if type(frame) is ToolCallFrame:
            assert isinstance(frame, ToolCallFrame)
            self.calls.append(self._check_call(frame.call))
        elif type(frame) is ResponseCompletedFrame:
            assert isinstance(frame, ResponseCompletedFrame)
            self.response = check_response(frame.response, self.deltas, self.calls)
        else:
            raise ModelStreamError("model stream sent an invalid frame")
        return False

    def _check_call(self, call: object) -> ToolCall:
        """A streamed tool call, checked: ids, no repeat in the run, bounded JSON arguments."""
        if type(call) is not ToolCall:
            raise ModelStreamError("model stream sent an invalid tool call")
        assert isinstance(call, ToolCall)
        if not is_id(call.id) or not is_id(call.name):
            raise ModelStreamError("model tool call id and name must be ids")
        if call.id in self.view.model_call_ids or any(other.id == call.id for other in self.calls):
            raise ModelStreamError(f"model tool call id {call.id} repeats")
        try:
            arguments, wire = bounded_json(call.arguments)
        except BoundedJsonError as error:
            raise ModelStreamError(f"model tool call arguments are not bounded JSON: {error}") from error
        if self.view.transcript + self.transcript + len(wire) > MAX_TRANSCRIPT_BYTES:
            raise ModelStreamError("tool transcript exceeds 4 MiB")
        self.transcript += len(wire)
        return ToolCall(id=call.id, name=call.name, arguments=arguments)

    def _interrupted(self) -> None:
        """The pull's scope ended early: a run cancellation, else the round's deadline."""
        self.channel.check_cancel()
        self._timeout()

    def _timeout(self) -> None:
        timeout_ms = self.view.admitted.model_timeout_ms
        assert timeout_ms is not None
        error = ModelTimeoutError(timeout_ms)
        self.round_controller.abort(error)
        raise error


async def _record_response(
    view: RunView,
    channel: RunChannel,
    *,
    request_id: str,
    output_id: str,
    response: CompletionResponse,
    calls: list[ToolCall],
) -> AsyncGenerator[StepValue, None]:
    """``model.response`` and the assistant's message, then the token budget and the finish."""
    admitted = view.admitted
    yield ModelAnswered(response.usage, tuple(call.id for call in calls))
    finish = response.finish_reason
    recorded = ModelResponseData(
        request_id=request_id,
        model=admitted.model,
        finish_reason=finish,
        usage=event_usage(response.usage),
        **channel.ids,
    )
    if await channel.publish("model.response", recorded):
        yield None
    answer = AssistantMessage(content=response.content, tool_calls=tuple(calls) or None)
    yield MessageAdded(answer, output_id)
    message = AssistantMessageCompletedData(
        **channel.ids,
        message_id=output_id,
        request_id=request_id,
        role="assistant",
        content=response.content,
        finish_reason=finish,
        state_version=1,
        message_revision=view.revision,
    )
    if admitted.checkpoints and finish == "tool_calls":
        # The calls survive a crash with their message: one batch (issue #23 §3).
        channel.check_cancel()
        completed = channel.event("message.completed", message)
        checkpoint, checkpointed = channel.checkpoint(view, "response", request_id)
        await channel.append_batch((completed, checkpoint))
        yield checkpointed
        acknowledge = not channel.cancel_requested
    else:
        acknowledge = await channel.publish("message.completed", message)
    if acknowledge:
        yield None
    if finish != "tool_calls":
        channel.check_cancel()
        await channel.complete_unless_steered()
    another_round = channel.status != "completing"
    limit = admitted.max_model_tokens
    if limit is not None:
        total = view.usage.total_tokens
        if total > limit or (total >= limit and another_round):
            # The warning that precedes an exceed is written also while completing.
            if await channel.warning("tokens", total, limit):
                yield None
            raise RuntimeBudgetExceededError("tokens", total, limit)
        if 2 * total >= limit and "tokens" not in view.warned:
            yield Warned("tokens")
            if await channel.warning("tokens", total, limit):
                yield None
    if finish == "length":
        raise ModelStreamError("model output ended at the provider length limit")
    if finish == "error":
        raise ModelStreamError("model reported an error finish")
