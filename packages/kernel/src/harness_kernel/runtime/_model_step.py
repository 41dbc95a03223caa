"""One model round of a run: the budget checks, ``model.request``, the streamed frames, the
response and its message, then the round's tool calls (spec §8.5, §8.9).

The model is pulled only after the consumer acknowledged ``model.request`` (the producer
yields there), and every frame it sends is checked before anything is recorded: a text
delta becomes ``message.delta``, tool calls are collected, and the completion must agree
with what was streamed. The round's deadline (``model_timeout_ms``) and run cancellation
interrupt the pull; the stream is always closed, within :data:`CLEANUP_GRACE`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

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
from harness_kernel.runtime._compaction import compact_if_needed
from harness_kernel.runtime._context import check_window
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    ModelStreamError,
    ModelTimeoutError,
    RuntimeBudgetExceededError,
)
from harness_kernel.runtime._response import add_usage, check_response, close_iterator, stream_failed
from harness_kernel.runtime._shared import (
    MAX_DELTA,
    MAX_TRANSCRIPT_BYTES,
    Canceled,
)
from harness_kernel.runtime._terminal import event_usage
from harness_kernel.runtime._tool_step import ToolStep
from harness_workspace import AbortController, AbortSignal

if TYPE_CHECKING:
    from harness_kernel.runtime._run import Run

__all__ = ["model_round"]


async def model_round(run: Run) -> AsyncGenerator[None, None]:
    """One round: request, pull, record the response, then run its tool calls in order."""
    async for _ in _check_budget(run):
        yield
    run.check_cancel()
    if run.a.policy is not None:
        async for _ in compact_if_needed(run):
            yield
    request_id = run.new_id("req")
    output_id = run.new_id("msg")
    messages = await _record_request(run, request_id)
    if not run.cancel_requested:
        yield
    run.model_requests += 1
    run.check_cancel()
    pull = _Pull(run, request_id, output_id, messages)
    async for _ in pull.frames():
        yield
    response, calls = pull.completed()
    async for _ in _record_response(run, request_id, output_id, response, calls):
        yield
    if response.finish_reason == "tool_calls":
        for call in calls:
            async for _ in ToolStep(run, call, request_id).steps():
                yield


async def _check_budget(run: Run) -> AsyncGenerator[None, None]:
    """Steps and tokens before a request: an exceed ends the run, half the steps warns."""
    a = run.a
    if run.model_requests >= a.max_steps:
        if await run.warning("steps", run.model_requests, a.max_steps):
            yield
        raise RuntimeBudgetExceededError("steps", run.model_requests, a.max_steps)
    next_step = run.model_requests + 1
    if a.max_steps > 0 and "steps" not in run.warned and next_step >= max(1, math.ceil(a.max_steps / 2)):
        run.warned.add("steps")
        if await run.warning("steps", next_step, a.max_steps):
            yield
    limit = a.max_model_tokens
    if limit is not None and run.usage.total_tokens >= limit:
        if await run.warning("tokens", run.usage.total_tokens, limit):
            yield
        raise RuntimeBudgetExceededError("tokens", run.usage.total_tokens, limit)


async def _record_request(run: Run, request_id: str) -> tuple[ChatMessage, ...]:
    """Apply the pending steering, account for the context and append ``model.request``
    (spec §8.5 step 2; issue #23).

    Under the writer lock, so a ``steer`` either lands before this request (and is applied
    to it, ``steering.applied`` before ``model.request``) or waits for the next boundary; it
    is never spliced into a request already in flight. With a context policy the request is
    measured first (``context.accounted``); one over the window raises
    :class:`ContextOverflowError` before anything changes. With checkpoints on, the request's
    ``runtime.checkpoint`` goes in the same batch. The events need no acknowledgement between
    them: one batch.
    """
    a = run.a
    messages: tuple[ChatMessage, ...] = ()
    events: list[Event] = []
    with trio.CancelScope(shield=True):
        async with run.writer:
            steering = [UserMessage(content=text) for _, text in run.pending]
            policy = a.policy
            measured = None
            if policy is not None:
                measured = run.measure(steering)
                check_window(measured.tokens, policy)
            for (message_id, _), message in zip(run.pending, steering, strict=True):
                run.messages.append(message)
                run.revision += 1
                applied = SteeringAppliedData(
                    **run.ids(), message_id=message_id, request_id=request_id, message_revision=run.revision
                )
                events.append(run.event("steering.applied", applied))
            messages = tuple(run.messages)
            if policy is not None and measured is not None:
                accounted = ContextAccountedData(
                    **run.ids(),
                    request_id=request_id,
                    messages=len(messages),
                    tokens=measured.tokens,
                    method=measured.method,
                    window_tokens=policy.window_tokens,
                    threshold_tokens=policy.threshold_tokens,
                    reserve_tokens=policy.reserve_tokens,
                )
                events.append(run.event("context.accounted", accounted))
            if a.checkpoints:
                events.append(run.checkpoint("request", request_id))
            request = ModelRequestData(
                request_id=request_id,
                model=a.model,
                message_count=len(messages),
                **run.ids(),
                step=run.model_requests + 1,
                context_version=1,
                message_revision=run.revision,
            )
            events.append(run.event("model.request", request))
            await run.append_batch_locked(tuple(events))
            run.pending.clear()
    return messages


class _Pull:
    """The pull of one model stream: its deadline, its abort signal and what it sent."""

    def __init__(self, run: Run, request_id: str, output_id: str, messages: tuple[ChatMessage, ...]) -> None:
        self.run = run
        self.request_id = request_id
        self.output_id = output_id
        self.messages = messages
        self.deltas: list[str] = []
        self.calls: list[ToolCall] = []
        self.response: CompletionResponse | None = None
        self.round_controller = AbortController()
        self.deadline = math.inf

    def completed(self) -> tuple[CompletionResponse, list[ToolCall]]:
        """The checked completion and the streamed calls (after :meth:`frames` returned)."""
        assert self.response is not None
        return self.response, self.calls

    def _request(self) -> ModelRequest:
        run = self.run
        a = run.a
        limit = a.max_model_tokens
        max_tokens = a.max_tokens
        if limit is not None:
            remaining = limit - run.usage.total_tokens
            max_tokens = remaining if max_tokens is None else min(max_tokens, remaining)
        return ModelRequest(
            messages=self.messages,
            tools=a.advertised,
            model=a.model,
            max_tokens=max_tokens,
            system=a.system,
            provider_options=a.provider_options,
            signal=AbortSignal.any([self.round_controller.signal, run.controller.signal]),
            context_version=1,
            message_revision=run.revision,
        )

    async def frames(self) -> AsyncGenerator[None, None]:
        """Open the stream and take frames until the completion; always close the stream."""
        run = self.run
        round_controller = self.round_controller
        run.round_controller = round_controller
        request = self._request()
        timeout_ms = run.a.model_timeout_ms
        if timeout_ms is not None:
            self.deadline = trio.current_time() + timeout_ms / 1000
        iterator: Any = None
        try:
            iterator = self._open(request)
            while self.response is None:
                frame = await self._next_frame(iterator)
                if await self._take(frame):
                    yield
        finally:
            run.round_controller = None
            if not round_controller.signal.aborted:
                round_controller.abort(ModelStreamError("model request stream closed"))
            if iterator is not None:
                await close_iterator(iterator)

    def _open(self, request: ModelRequest) -> object:
        run = self.run
        try:
            with run.cancellable(self.deadline) as scope:
                result = run.a.stream(request)
            if scope.cancelled_caught or run.cancel_requested:
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
        run = self.run
        run.check_cancel()
        if trio.current_time() >= self.deadline:
            self._timeout()
        frame: object = None
        try:
            with run.cancellable(self.deadline) as scope:
                frame = await iterator.__anext__()
        except StopAsyncIteration:
            raise ModelStreamError("model stream ended without a completion") from None
        except (AgentRuntimeError, Canceled):
            raise
        except Exception as error:
            run.check_cancel()
            if trio.current_time() >= self.deadline:
                self._timeout()
            raise stream_failed(error) from error
        if scope.cancelled_caught or run.cancel_requested:
            self._interrupted()
        return frame

    async def _take(self, frame: object) -> bool:
        """Check and record one frame; True when the producer must wait for the acknowledgement."""
        run = self.run
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
                **run.ids(),
                request_id=self.request_id,
                message_id=self.output_id,
                role="assistant",
                sequence=sequence,
                delta=delta,
            )
            return await run.publish("message.delta", data)
        if type(frame) is ToolCallFrame:
            assert isinstance(frame, ToolCallFrame)
            self.calls.append(_check_call(run, frame.call, self.calls))
        elif type(frame) is ResponseCompletedFrame:
            assert isinstance(frame, ResponseCompletedFrame)
            self.response = check_response(frame.response, self.deltas, self.calls)
        else:
            raise ModelStreamError("model stream sent an invalid frame")
        return False

    def _interrupted(self) -> None:
        """The pull's scope ended early: a run cancellation, else the round's deadline."""
        self.run.check_cancel()
        self._timeout()

    def _timeout(self) -> None:
        timeout_ms = self.run.a.model_timeout_ms
        assert timeout_ms is not None
        error = ModelTimeoutError(timeout_ms)
        self.round_controller.abort(error)
        raise error


async def _record_response(
    run: Run, request_id: str, output_id: str, response: CompletionResponse, calls: list[ToolCall]
) -> AsyncGenerator[None, None]:
    """``model.response`` and the assistant's message, then the token budget and the finish."""
    a = run.a
    for call in calls:
        run.model_call_ids.add(call.id)
    run.usage = add_usage(run.usage, response.usage)
    finish = response.finish_reason
    recorded = ModelResponseData(
        request_id=request_id,
        model=a.model,
        finish_reason=finish,
        usage=event_usage(response.usage),
        **run.ids(),
    )
    if await run.publish("model.response", recorded):
        yield
    run.messages.append(AssistantMessage(content=response.content, tool_calls=tuple(calls) or None))
    run.revision += 1
    run.output_message_id = output_id
    message = AssistantMessageCompletedData(
        **run.ids(),
        message_id=output_id,
        request_id=request_id,
        role="assistant",
        content=response.content,
        finish_reason=finish,
        state_version=1,
        message_revision=run.revision,
    )
    if a.checkpoints and finish == "tool_calls":
        # The calls survive a crash with their message: one batch (issue #23 §3).
        acknowledge = await run.publish_batch(
            lambda: (run.event("message.completed", message), run.checkpoint("response", request_id))
        )
    else:
        acknowledge = await run.publish("message.completed", message)
    if acknowledge:
        yield
    if finish != "tool_calls":
        run.check_cancel()
        with trio.CancelScope(shield=True):
            # Under the writer lock: a steer being stored now lands before this decision, and
            # a pending steer means another round (issue #23), never a completion that drops it.
            async with run.writer:
                if not run.pending:
                    run.status = "completing"
    another_round = run.status != "completing"
    limit = a.max_model_tokens
    if limit is not None:
        total = run.usage.total_tokens
        if total > limit or (total >= limit and another_round):
            # The warning that precedes an exceed is written also while completing.
            if await run.warning("tokens", total, limit):
                yield
            raise RuntimeBudgetExceededError("tokens", total, limit)
        if 2 * total >= limit and "tokens" not in run.warned:
            run.warned.add("tokens")
            if await run.warning("tokens", total, limit):
                yield
    if finish == "length":
        raise ModelStreamError("model output ended at the provider length limit")
    if finish == "error":
        raise ModelStreamError("model reported an error finish")


def _check_call(run: Run, call: object, seen: list[ToolCall]) -> ToolCall:
    """A streamed tool call, checked: ids, no repeat in the run, bounded JSON arguments."""
    if type(call) is not ToolCall:
        raise ModelStreamError("model stream sent an invalid tool call")
    assert isinstance(call, ToolCall)
    if not is_id(call.id) or not is_id(call.name):
        raise ModelStreamError("model tool call id and name must be ids")
    if call.id in run.model_call_ids or any(other.id == call.id for other in seen):
        raise ModelStreamError(f"model tool call id {call.id} repeats")
    try:
        arguments, wire = bounded_json(call.arguments)
    except BoundedJsonError as error:
        raise ModelStreamError(f"model tool call arguments are not bounded JSON: {error}") from error
    if run.transcript + len(wire) > MAX_TRANSCRIPT_BYTES:
        raise ModelStreamError("tool transcript exceeds 4 MiB")
    run.transcript += len(wire)
    return ToolCall(id=call.id, name=call.name, arguments=arguments)
