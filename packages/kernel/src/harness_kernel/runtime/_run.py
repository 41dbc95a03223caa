"""One run of ``MinimalAgentRuntime``: the producer and its drivers (spec §8.4 to §8.11).

The producer is an async generator advanced by exactly one driver at a time (the consumer
inside ``__anext__``, or a control). It yields only where it waits for the consumer's
acknowledgement, never inside a cancel scope, so any task may resume it.
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import contextmanager
from typing import Any, Final

import trio

from harness_kernel._bounded import BoundedJsonError, bounded_json
from harness_kernel._gate import (
    ToolGate,
    ToolInputError,
    convert_arguments,
    permission_intent,
    resolution_of,
)
from harness_kernel._ids import is_id
from harness_kernel._json import MAX_SAFE_INTEGER, JsonValue, encode_json, has_lone_surrogate
from harness_kernel.events._codec import create_event
from harness_kernel.events._model import Event, EventType
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    CompletionResponse,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    ToolMessage,
    Usage,
    UserMessage,
)
from harness_kernel.policy._permission import PermissionRequest
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    BudgetMetric,
    EventAppendError,
    InvalidRunInputError,
    ModelStreamError,
    ModelTimeoutError,
    RunTerminalError,
    RuntimeBudgetExceededError,
)
from harness_kernel.runtime._input import Admitted
from harness_tools import Tool, ToolExecutionContext, ToolPermissionIntent
from harness_workspace import AbortController, AbortSignal, WorkspaceOperationError, move_on_abort

__all__ = ["Run"]

MAX_TEXT: Final = 4096
MAX_CONTENT: Final = 16 * 1_048_576
MAX_DELTA: Final = 1_048_576
MAX_CALLS: Final = 128
MAX_TRANSCRIPT_BYTES: Final = 4 * 1_048_576
CLEANUP_GRACE: Final = 0.1
FINISHED: Final = frozenset({"completed", "failed", "canceled", "budget_exceeded"})


class _Canceled(Exception):
    """Internal: the run's cancellation was observed."""


def _cut(text: str) -> str:
    return text[:MAX_TEXT]


def _pct(used: int, limit: int) -> int:
    return 100 if limit == 0 else (used * 200 + limit) // (2 * limit)


class Run:
    """The state and producer of one admitted run."""

    def __init__(self, admitted: Admitted, on_finish: Callable[[Run], None]) -> None:
        self.a = admitted
        self.status = "registered"
        self.queue: deque[Event] = deque()
        self.driver = trio.Lock()
        self.writer = trio.Lock()
        self.admitted = trio.Event()
        self.finished = trio.Event()
        self.admission_error: AgentRuntimeError | None = None
        self.poison: EventAppendError | None = None
        self.pairless: AgentRuntimeError | None = None
        self.error: BaseException | None = None
        self.cancel_requested = False
        self.finishing_as: str | None = None
        self.abandoned = False
        self.steering_open = True
        self.pending: list[str] = []
        self.controller = AbortController()
        self.round_controller: AbortController | None = None
        self.active_scope: trio.CancelScope | None = None
        self.producer_done = False
        self.driver_cancelled = False
        self._on_finish = on_finish
        self._producer = self._produce()
        self.messages: list[ChatMessage] = list(admitted.context)
        self.revision = len(admitted.context)
        self.model_requests = 0
        self.tool_calls = 0
        self.usage = Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
        self.warned: set[BudgetMetric] = set()
        self.gate = ToolGate(workspace=admitted.workspace, decide=admitted.decide, profile="runtime")
        self.model_call_ids: set[str] = set()
        self.transcript = 0
        self.agent_id = ""
        self.input_message_id = ""
        self.output_message_id: str | None = None
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
                    await self._terminal("canceled", "run canceled", None)
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

    # ------------------------------------------------------------ events
    def new_id(self, prefix: str) -> str:
        value = self.a.new_id(prefix)
        if not is_id(value):
            raise InvalidRunInputError(f'new_id("{prefix}") returned an invalid id')
        return value

    def event(self, event_type: EventType, data: dict[str, object], actor: str = "kernel") -> Event:
        event_id = self.new_id("evt")
        at: object = self.a.now()
        if type(at) is not str:
            raise InvalidRunInputError("now() must return a str")
        try:
            return create_event(event_type, data, event_id=event_id, at=at, actor=actor)
        except Exception as error:
            raise InvalidRunInputError(f"cannot build {event_type} event: {error}") from error

    def _ids(self) -> dict[str, object]:
        return {"runId": self.a.run_id, "sessionId": self.a.session_id, "turnId": self.a.turn_id}

    async def _append_locked(self, event: Event) -> None:
        if self.poison is not None:
            raise self.poison
        with trio.CancelScope(shield=True):
            await self._append_shielded(event)

    async def _append_shielded(self, event: Event) -> None:
        """The store call itself; the caller holds the writer lock inside a shielded scope."""
        if self.poison is not None:
            raise self.poison
        try:
            result = self.a.append(event)
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            poison = EventAppendError(event.type)
            poison.__cause__ = error
            self.poison = poison
            raise poison from error

    async def append(self, event: Event) -> None:
        """Append under the writer lock, shielded from cancellation."""
        with trio.CancelScope(shield=True):
            async with self.writer:
                # Already shielded here, so no second scope (``_append_locked`` opens one).
                await self._append_shielded(event)

    def enqueue(self, event: Event) -> None:
        if not self.abandoned:
            self.queue.append(event)

    def check_cancel(self) -> None:
        if self.status == "completing":
            return
        signal = self.a.signal
        if signal is not None and signal.aborted:
            self.request_cancel()
        if self.cancel_requested:
            raise _Canceled

    async def publish(
        self, event_type: EventType, data: dict[str, object], *, actor: str = "kernel", force: bool = False
    ) -> bool:
        """Append and queue one event; True when the producer must wait for the acknowledgement."""
        if not force:
            self.check_cancel()
        event = self.event(event_type, data, actor)
        await self.append(event)
        self.enqueue(event)
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
            await self._admit()
        except AgentRuntimeError as error:
            self.admission_error = error
            self.error = error
            self.admitted.set()
            self._end("failed")
            return
        self.admitted.set()
        if not self.cancel_requested:
            yield
        status, note, error = "completed", None, None
        try:
            async for _ in self._loop():
                yield
        except EventAppendError as poison:
            self.error = poison
            self._end("failed")
            return
        except _Canceled:
            status, note = "canceled", "run canceled"
        except RuntimeBudgetExceededError as exceeded:
            status, note, error = "budget_exceeded", exceeded.message, exceeded
        except AgentRuntimeError as failed:
            status, note, error = "failed", failed.message, failed
        except Exception as fault:
            error = ModelStreamError("model stream failed")
            error.__cause__ = fault
            status, note = "failed", error.message
        await self._terminal(status, note, error)

    async def _admit(self) -> None:
        if self.status == "registered":
            self.status = "running"
        a = self.a
        self.agent_id = self.new_id("agent")
        started: dict[str, object] = {"agentId": self.agent_id, "sessionId": a.session_id}
        if a.task_id is not None:
            started["taskId"] = a.task_id
        started |= {"model": a.model, "runId": a.run_id, "turnId": a.turn_id}
        event = self.event("agent.started", started)
        await self.append(event)
        self.enqueue(event)
        self.input_message_id = self.new_id("msg")
        event = self.event("turn.started", {**self._ids(), "inputMessageId": self.input_message_id})
        await self.append(event)
        self.enqueue(event)
        self.messages.append(UserMessage(content=a.input))
        self.revision += 1
        event = self.event(
            "message.completed",
            {
                **self._ids(),
                "messageId": self.input_message_id,
                "role": "user",
                "content": a.input,
                "stateVersion": 1,
                "messageRevision": self.revision,
            },
        )
        await self.append(event)
        self.enqueue(event)

    def _end(self, status: str) -> None:
        self.status = status
        self.producer_done = True
        self.finished.set()
        self._on_finish(self)

    async def _terminal(self, status: str, note: str | None, error: BaseException | None) -> None:
        if self.poison is not None:
            self.error = self.poison
            self._end("failed")
            return
        try:
            pair = self._terminal_pair(status, note)
        except Exception as fault:
            if isinstance(fault, AgentRuntimeError):
                error = fault
            else:
                error = ModelStreamError("terminal event construction failed")
                error.__cause__ = fault
            status, note = "failed", _cut(error.message)
            try:
                pair = self._terminal_pair(status, note)
            except Exception:
                # No pair at all: the consumer gets the error, and so does a control driving
                # the end.
                self.error = self.pairless = error
                self._end("failed")
                return
        self.finishing_as = status
        self.status = "completing"
        try:
            for event in pair:
                await self.append(event)
                self.enqueue(event)
        except EventAppendError as poison:
            self.error = poison
            self._end("failed")
            return
        self.error = error
        self._end(status)

    def _terminal_pair(self, status: str, note: str | None) -> tuple[Event, Event]:
        a = self.a
        completed: dict[str, object] = {**self._ids(), "status": status}
        if status == "completed" and self.output_message_id is not None:
            completed["outputMessageId"] = self.output_message_id
        completed |= {
            "modelRequests": self.model_requests,
            "toolCalls": self.tool_calls,
            "usage": self._usage_data(self.usage),
            "stateVersion": 1,
            "messageRevision": self.revision,
        }
        stopped: dict[str, object] = {
            "agentId": self.agent_id,
            "status": status,
            "steps": self.model_requests,
            "toolCalls": self.tool_calls,
        }
        if note is not None:
            completed["note"] = _cut(note)
            stopped["note"] = _cut(note)
        stopped |= {"runId": a.run_id, "sessionId": a.session_id, "turnId": a.turn_id}
        return self.event("turn.completed", completed), self.event("agent.stopped", stopped)

    @staticmethod
    def _usage_data(usage: Usage) -> dict[str, object]:
        return {
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "totalTokens": usage.total_tokens,
        }

    async def _warning(self, metric: BudgetMetric, used: int, limit: int) -> bool:
        data: dict[str, object] = {}
        if self.a.task_id is not None:
            data["taskId"] = self.a.task_id
        data |= {**self._ids(), "metric": metric, "used": used, "limit": limit, "pct": _pct(used, limit)}
        return await self.publish("budget.warning", data)

    async def _loop(self) -> AsyncGenerator[None, None]:
        while True:
            async for _ in self._round():
                yield
            if self.status == "completing":
                return

    # ------------------------------------------------------------ one model round
    async def _round(self) -> AsyncGenerator[None, None]:  # noqa: PLR0915 - one round reads top to bottom
        a = self.a
        if self.model_requests >= a.max_steps:
            if await self._warning("steps", self.model_requests, a.max_steps):
                yield
            raise RuntimeBudgetExceededError("steps", self.model_requests, a.max_steps)
        next_step = self.model_requests + 1
        if a.max_steps > 0 and "steps" not in self.warned and next_step >= max(1, math.ceil(a.max_steps / 2)):
            self.warned.add("steps")
            if await self._warning("steps", next_step, a.max_steps):
                yield
        limit = a.max_model_tokens
        if limit is not None and self.usage.total_tokens >= limit:
            if await self._warning("tokens", self.usage.total_tokens, limit):
                yield
            raise RuntimeBudgetExceededError("tokens", self.usage.total_tokens, limit)
        self.check_cancel()
        request_id = self.new_id("req")
        output_id = self.new_id("msg")
        messages: tuple[ChatMessage, ...] = ()
        event: Event | None = None
        with trio.CancelScope(shield=True):
            async with self.writer:
                self.steering_open = False
                for text in self.pending:
                    self.messages.append(UserMessage(content=text))
                    self.revision += 1
                messages = tuple(self.messages)
                event = self.event(
                    "model.request",
                    {
                        "requestId": request_id,
                        "model": a.model,
                        "messageCount": len(messages),
                        **self._ids(),
                        "step": self.model_requests + 1,
                        "contextVersion": 1,
                        "messageRevision": self.revision,
                    },
                )
                await self._append_locked(event)
                self.pending.clear()
        assert event is not None
        self.enqueue(event)
        if not self.cancel_requested:
            yield
        self.model_requests += 1
        self.check_cancel()
        max_tokens = a.max_tokens
        if limit is not None:
            remaining = limit - self.usage.total_tokens
            max_tokens = remaining if max_tokens is None else min(max_tokens, remaining)
        round_controller = AbortController()
        self.round_controller = round_controller
        request = ModelRequest(
            messages=messages,
            tools=a.advertised,
            model=a.model,
            max_tokens=max_tokens,
            system=a.system,
            provider_options=a.provider_options,
            signal=AbortSignal.any([round_controller.signal, self.controller.signal]),
            context_version=1,
            message_revision=self.revision,
        )
        deadline = math.inf if a.model_timeout_ms is None else trio.current_time() + a.model_timeout_ms / 1000
        iterator: Any = None
        deltas: list[str] = []
        calls: list[ToolCall] = []
        response: CompletionResponse | None = None
        try:
            try:
                with self.cancellable(deadline) as scope:
                    result = a.stream(request)
                if scope.cancelled_caught or self.cancel_requested:
                    self._round_interrupted(round_controller)
            except (AgentRuntimeError, _Canceled):
                raise
            except Exception as error:
                raise ModelStreamError("model stream failed") from error
            if inspect.iscoroutine(result):
                result.close()
                raise ModelStreamError("model stream must return an async iterator")
            if not callable(getattr(type(result), "__anext__", None)):
                raise ModelStreamError("model stream must return an async iterator")
            iterator = result
            while response is None:
                self.check_cancel()
                if trio.current_time() >= deadline:
                    self._timeout(round_controller)
                frame: object = None
                try:
                    with self.cancellable(deadline) as scope:
                        frame = await iterator.__anext__()
                except StopAsyncIteration:
                    raise ModelStreamError("model stream ended without a completion") from None
                except (AgentRuntimeError, _Canceled):
                    raise
                except Exception as error:
                    self.check_cancel()
                    if trio.current_time() >= deadline:
                        self._timeout(round_controller)
                    raise ModelStreamError("model stream failed") from error
                if scope.cancelled_caught or self.cancel_requested:
                    self._round_interrupted(round_controller)
                if type(frame) is TextDeltaFrame:
                    assert isinstance(frame, TextDeltaFrame)
                    delta: object = frame.delta
                    if (
                        calls
                        or type(delta) is not str
                        or not 1 <= len(delta) <= MAX_DELTA
                        or has_lone_surrogate(delta)
                    ):
                        raise ModelStreamError("model stream sent an invalid text delta")
                    sequence = len(deltas)
                    deltas.append(delta)
                    data = {
                        **self._ids(),
                        "requestId": request_id,
                        "messageId": output_id,
                        "role": "assistant",
                    }
                    if await self.publish("message.delta", {**data, "sequence": sequence, "delta": delta}):
                        yield
                elif type(frame) is ToolCallFrame:
                    assert isinstance(frame, ToolCallFrame)
                    calls.append(self._check_call(frame.call, calls))
                elif type(frame) is ResponseCompletedFrame:
                    assert isinstance(frame, ResponseCompletedFrame)
                    response = self._check_response(frame.response, deltas, calls)
                else:
                    raise ModelStreamError("model stream sent an invalid frame")
        finally:
            self.round_controller = None
            if not round_controller.signal.aborted:
                round_controller.abort(ModelStreamError("model request stream closed"))
            if iterator is not None:
                await self._close_iterator(iterator)
        for call in calls:
            self.model_call_ids.add(call.id)
        self.usage = self._add_usage(response.usage)
        finish = response.finish_reason
        if await self.publish(
            "model.response",
            {
                "requestId": request_id,
                "model": a.model,
                "finishReason": finish,
                "usage": self._usage_data(response.usage),
                **self._ids(),
            },
        ):
            yield
        self.messages.append(AssistantMessage(content=response.content, tool_calls=tuple(calls) or None))
        self.revision += 1
        self.output_message_id = output_id
        if await self.publish(
            "message.completed",
            {
                **self._ids(),
                "messageId": output_id,
                "requestId": request_id,
                "role": "assistant",
                "content": response.content,
                "finishReason": finish,
                "stateVersion": 1,
                "messageRevision": self.revision,
            },
        ):
            yield
        if finish != "tool_calls":
            self.check_cancel()
            self.status = "completing"
        if limit is not None:
            total = self.usage.total_tokens
            if total > limit or (total >= limit and finish == "tool_calls"):
                if await self.publish_warning_forced("tokens", total, limit):
                    yield
                raise RuntimeBudgetExceededError("tokens", total, limit)
            if 2 * total >= limit and "tokens" not in self.warned:
                self.warned.add("tokens")
                if await self._warning("tokens", total, limit):
                    yield
        if finish == "length":
            raise ModelStreamError("model output ended at the provider length limit")
        if finish == "error":
            raise ModelStreamError("model reported an error finish")
        if finish == "tool_calls":
            for call in calls:
                async for _ in self._tool_call(call, request_id):
                    yield

    async def publish_warning_forced(self, metric: BudgetMetric, used: int, limit: int) -> bool:
        """A warning that precedes an exceed (also while completing)."""
        return await self._warning(metric, used, limit)

    def _round_interrupted(self, round_controller: AbortController) -> None:
        self.check_cancel()
        self._timeout(round_controller)

    def _timeout(self, round_controller: AbortController) -> None:
        assert self.a.model_timeout_ms is not None
        error = ModelTimeoutError(self.a.model_timeout_ms)
        round_controller.abort(error)
        raise error

    async def _close_iterator(self, iterator: Any) -> None:
        close: object = getattr(iterator, "aclose", None)
        if not callable(close):
            return
        with trio.CancelScope(deadline=trio.current_time() + CLEANUP_GRACE, shield=True):
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                pass

    def _add_usage(self, usage: Usage) -> Usage:
        total = Usage(
            prompt_tokens=self.usage.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens + usage.completion_tokens,
            total_tokens=self.usage.total_tokens + usage.total_tokens,
        )
        if max(total.prompt_tokens, total.completion_tokens, total.total_tokens) > MAX_SAFE_INTEGER:
            raise ModelStreamError("cumulative model usage exceeds 2**53-1")
        return total

    def _check_call(self, call: object, seen: list[ToolCall]) -> ToolCall:
        if type(call) is not ToolCall:
            raise ModelStreamError("model stream sent an invalid tool call")
        assert isinstance(call, ToolCall)
        if not is_id(call.id) or not is_id(call.name):
            raise ModelStreamError("model tool call id and name must be ids")
        if call.id in self.model_call_ids or any(other.id == call.id for other in seen):
            raise ModelStreamError(f"model tool call id {call.id} repeats")
        try:
            arguments, wire = bounded_json(call.arguments)
        except BoundedJsonError as error:
            raise ModelStreamError(f"model tool call arguments are not bounded JSON: {error}") from error
        if self.transcript + len(wire) > MAX_TRANSCRIPT_BYTES:
            raise ModelStreamError("tool transcript exceeds 4 MiB")
        self.transcript += len(wire)
        return ToolCall(id=call.id, name=call.name, arguments=arguments)

    def _check_response(
        self, response: object, deltas: list[str], calls: list[ToolCall]
    ) -> CompletionResponse:
        if type(response) is not CompletionResponse:
            raise ModelStreamError("model completion must be a CompletionResponse")
        assert isinstance(response, CompletionResponse)
        content: object = response.content
        if type(content) is not str or len(content) > MAX_CONTENT or has_lone_surrogate(content):
            raise ModelStreamError("model completion content is invalid")
        usage: object = response.usage
        if type(usage) is not Usage:
            raise ModelStreamError("model completion usage must be a Usage")
        assert isinstance(usage, Usage)
        counts: tuple[object, ...] = (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
        if not all(type(n) is int and 0 <= n <= MAX_SAFE_INTEGER for n in counts) or (
            usage.total_tokens != usage.prompt_tokens + usage.completion_tokens
        ):
            raise ModelStreamError("model completion usage is invalid")
        finish: object = response.finish_reason
        if type(finish) is not str or finish not in ("stop", "tool_calls", "length", "error"):
            raise ModelStreamError("model completion finish reason is invalid")
        if deltas and "".join(deltas) != content:
            raise ModelStreamError("model completion content differs from the streamed text")
        completed: object = response.tool_calls
        if type(completed) is not tuple and type(completed) is not list:
            raise ModelStreamError("model completion tool calls are invalid")
        assert isinstance(completed, tuple | list)
        if len(completed) > MAX_CALLS:  # pyright: ignore[reportUnknownArgumentType]
            raise ModelStreamError(f"model completion has more than {MAX_CALLS} tool calls")
        if (finish == "tool_calls") != bool(completed) or len(completed) != len(calls):  # pyright: ignore[reportUnknownArgumentType]
            raise ModelStreamError("model completion tool calls do not match the stream")
        for streamed, final in zip(calls, completed, strict=True):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            if type(final) is not ToolCall:
                raise ModelStreamError("model completion tool calls are invalid")
            assert isinstance(final, ToolCall)
            try:
                arguments, _ = bounded_json(final.arguments)
            except BoundedJsonError as error:
                raise ModelStreamError("model completion tool call arguments are not bounded JSON") from error
            if final.id != streamed.id or final.name != streamed.name or arguments != streamed.arguments:
                raise ModelStreamError("model completion tool calls do not match the stream")
        return response

    # ------------------------------------------------------------ one tool call
    async def _tool_call(self, call: ToolCall, request_id: str) -> AsyncGenerator[None, None]:
        a = self.a
        call_id = self.new_id("call")
        self.tool_calls += 1
        if await self.publish(
            "tool.call",
            {
                "callId": call_id,
                "tool": call.name,
                "input": call.arguments,
                **self._ids(),
                "requestId": request_id,
                "modelCallId": call.id,
            },
        ):
            yield
        limit = a.max_tool_calls
        if limit is not None:
            if self.tool_calls > limit:
                if await self._warning("tool_calls", self.tool_calls, limit):
                    yield
                raise RuntimeBudgetExceededError("tool_calls", self.tool_calls, limit)
            if self.tool_calls >= max(1, math.ceil(limit / 2)) and "tool_calls" not in self.warned:
                self.warned.add("tool_calls")
                if await self._warning("tool_calls", self.tool_calls, limit):
                    yield
        observation: tuple[JsonValue, None] | tuple[None, tuple[str, str]]
        tool = a.tools.get(call.name)
        if tool is None:
            observation = (None, ("TOOL_NOT_FOUND", f"unknown tool: {call.name}"))
        else:
            try:
                params = convert_arguments(tool, call.arguments)
            except ToolInputError as bad:
                observation = (None, ("TOOL_BAD_INPUT", str(bad)))
            else:
                async for _ in self._authorize_and_execute(tool, call, call_id, params):
                    yield
                observation = self.observation
        async for _ in self._observe(call, call_id, observation):
            yield
        if self.cancel_after_observation:
            raise _Canceled

    observation: tuple[JsonValue, None] | tuple[None, tuple[str, str]] = (None, None)
    cancel_after_observation = False
    ask_denial: tuple[str, str] | None = None

    async def _authorize_and_execute(
        self, tool: Tool[Any], call: ToolCall, call_id: str, params: object
    ) -> AsyncGenerator[None, None]:
        a = self.a
        verdict = self.gate.judge(tool, permission_intent(tool, params))
        intent, effect, reason = verdict.intent, verdict.effect, verdict.reason
        decision: dict[str, object] = {}
        if a.task_id is not None:
            decision["taskId"] = a.task_id
        decision |= {"sessionId": a.session_id, "runId": a.run_id, "turnId": a.turn_id, "callId": call_id}
        decision["action"] = intent.action
        if intent.subject is not None:
            decision["subject"] = intent.subject
        decision |= {"effect": effect, "reason": reason}
        if verdict.rule_id is not None:
            decision["ruleId"] = verdict.rule_id
        if await self.publish("policy.decision", decision):
            yield
        if effect == "deny":
            self.observation = (None, (verdict.denial, _cut(reason)))
            return
        if effect == "ask" and not self.gate.granted(intent):
            self.ask_denial = None
            async for _ in self._ask(intent, call_id, reason):
                yield
            if self.ask_denial is not None:
                self.observation = (None, self.ask_denial)
                return
        self.check_cancel()
        execute_params = convert_arguments(tool, call.arguments)
        context = ToolExecutionContext(
            signal=self.controller.signal,
            workspace=self.gate.capability(tool),
            session_id=a.session_id,
            task_id=a.task_id,
            call_id=call_id,
        )
        result: object = None
        failure: Exception | None = None
        with self.cancellable():
            try:
                result = tool.execute(execute_params, context)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as error:
                failure = error
        if self.cancel_requested:
            self.observation = (None, ("TOOL_CANCELED", "tool canceled"))
            self.cancel_after_observation = True
        elif failure is not None:
            code = failure.code if isinstance(failure, WorkspaceOperationError) else "TOOL_EXECUTION_FAILED"
            self.observation = (None, (code, _cut(f"tool {tool.name} failed: {failure}")))
        else:
            try:
                output, wire = bounded_json(result)
                if self.transcript + len(wire) > MAX_TRANSCRIPT_BYTES:
                    raise BoundedJsonError("transcript")
                self.transcript += len(wire)
                self.observation = (output, None)
            except BoundedJsonError:
                self.observation = (None, ("TOOL_INVALID_RESULT", "tool result is not bounded JSON"))

    async def _ask(
        self, intent: ToolPermissionIntent, call_id: str, reason: str
    ) -> AsyncGenerator[None, None]:
        a = self.a
        scope_name = intent.scope or "once"
        permission_id = self.new_id("perm")
        base: dict[str, object] = {
            "permissionId": permission_id,
            "sessionId": a.session_id,
            "runId": a.run_id,
        }
        base |= {"turnId": a.turn_id, "callId": call_id, "action": intent.action}
        if intent.subject is not None:
            base["subject"] = intent.subject
        base["scope"] = scope_name
        if await self.publish("permission.requested", {**base, "reason": reason}):
            yield
        decision, note, actor = "deny", "no permission resolver", "kernel"
        canceled = False
        if a.resolve is not None:
            request = PermissionRequest(
                permission_id=permission_id,
                session_id=a.session_id,
                call_id=call_id,
                action=intent.action,
                subject=intent.subject,
                scope=scope_name,
                reason=reason,
                run_id=a.run_id,
                turn_id=a.turn_id,
            )
            answer: object = None
            failed = False
            with self.cancellable():
                try:
                    pending = a.resolve(request, self.controller.signal)
                    if not inspect.isawaitable(pending):
                        failed = True
                    else:
                        answer = await pending
                except Exception:
                    failed = True
            resolution = None if failed else resolution_of(answer)
            if self.cancel_requested:
                canceled = True
                decision, note = "deny", "run canceled while awaiting permission"
            elif resolution is None:
                note = "permission resolver failed closed"
            else:
                decision, note, actor = resolution.decision, resolution.note, "operator"
        resolved = {**base, "decision": decision}
        if note is not None:
            resolved["note"] = note
        ack = await self.publish("permission.resolved", resolved, actor=actor, force=True)
        if canceled or self.cancel_requested:
            self.ask_denial = ("TOOL_CANCELED", "tool canceled")
            self.cancel_after_observation = True
            return
        if ack:
            yield
        if decision == "deny":
            self.ask_denial = ("TOOL_PERMISSION_DENIED", note or "operator denied permission")
            return
        self.gate.grant(intent)

    async def _observe(
        self, call: ToolCall, call_id: str, observation: tuple[JsonValue, None] | tuple[None, tuple[str, str]]
    ) -> AsyncGenerator[None, None]:
        output, error = observation
        force = self.cancel_after_observation
        result: dict[str, object] = {"callId": call_id, "tool": call.name, "ok": error is None}
        if error is None:
            result["output"] = output
            content = encode_json(output).decode()
        else:
            result["error"] = {"code": error[0], "message": error[1]}
            content = encode_json({"error": {"code": error[0], "message": error[1]}}).decode()
        if await self.publish("tool.result", {**result, **self._ids()}, force=force) and not force:
            yield
        message_id = self.new_id("msg")
        self.messages.append(ToolMessage(content=content, name=call.name, tool_call_id=call.id))
        self.revision += 1
        data: dict[str, object] = {**self._ids(), "messageId": message_id, "role": "tool", "name": call.name}
        data |= {
            "toolCallId": call.id,
            "content": content,
            "stateVersion": 1,
            "messageRevision": self.revision,
        }
        if await self.publish("message.completed", data, force=force) and not force:
            yield
