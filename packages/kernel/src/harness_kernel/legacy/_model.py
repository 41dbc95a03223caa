"""The legacy one-shot model as the runtime's model adapter (kernel.md §9.3).

``run_agent`` takes a :class:`~harness_kernel.models.Model` (one ``complete`` per step) and
checks its answer by §9's rules, with §9's texts. :class:`OneShotAdapter` is what the runtime
streams from: it shows the model every registered tool and the conversation with the model's
own call ids, checks the answer, and hands the runtime a response it accepts — or raises,
leaving a :class:`ModelFailure` that the facade publishes in §9's shape.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from harness_kernel._gate import valid_text
from harness_kernel._json import MAX_SAFE_INTEGER, JsonValue, encode_json, has_lone_surrogate, is_exact_array
from harness_kernel.legacy._records import InvalidToolResultError, normalize_tool_json
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    ToolCall,
    ToolCallFrame,
    ToolDefinition,
    ToolMessage,
    Usage,
    add_usage,
)
from harness_workspace import AbortSignal

__all__ = ["ModelFailure", "OneShotAdapter", "is_safe_count"]

_MAX_RESPONSE_ID_CHARS: Final = 512
_MAX_CONTENT_JSON_BYTES: Final = 512 * 1024
_MAX_CALLS: Final = 128
_MAX_CALL_ID_CHARS: Final = 512
_MAX_TOOL_NAME_CHARS: Final = 256
MAX_TRANSCRIPT_BYTES: Final = 4 * 1024 * 1024
_FINISH_REASONS: Final = ("stop", "tool_calls", "length", "error")
_ERROR_CODE: Final = re.compile(r"[A-Z0-9_]{2,80}")


def is_safe_count(value: object) -> bool:
    """``value`` is an exact int of 0..2**53-1."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


class _Refused(Exception):
    """Internal: the answer broke a §9 rule; the run's :class:`ModelFailure` says which."""


@dataclass(frozen=True, slots=True)
class ModelFailure:
    """Why a model request failed, as §9 publishes it.

    Attributes:
        problem: The ``MODEL_INVALID_RESPONSE`` message, or ``None`` when ``complete`` raised.
        error: What ``complete`` raised (re-raised unchanged), or ``None``.
        response: The answer when the problem was found after ``model.response`` (its finish
            reason and usage are published), else ``None`` (published as an ``error`` finish).
    """

    problem: str | None
    error: Exception | None = None
    response: CompletionResponse | None = None


class OneShotAdapter:
    """A runtime model adapter over one legacy ``complete`` per request.

    Args:
        complete: The model's ``complete``, captured once.
        definitions: What the model is shown: every registered tool (§9.3).
        signal: The run's signal, passed to the model as §9 passes it.
        usage: The run's usage so far, read before each answer (its sum must stay safe).
    """

    def __init__(
        self,
        complete: Callable[[CompletionRequest], Awaitable[CompletionResponse]],
        definitions: tuple[ToolDefinition, ...] | None,
        signal: AbortSignal | None,
        usage: Callable[[], Usage],
    ) -> None:
        self._complete = complete
        self._definitions = definitions
        self._signal = signal
        self._usage = usage
        self._calls: dict[str, ToolCall] = {}
        """The runtime's call id → the model's own call (ids a model repeats stay its own)."""
        self.transcript_bytes = 0
        """Call arguments and results (JSON) so far; at most 4 MiB (§9.4)."""
        self.failure: ModelFailure | None = None
        self.content = ""
        """The last accepted answer's text."""
        self.call_count = 0
        """How many calls the last accepted answer asked for."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """One ``complete`` call, as the frames of a stream (runtime §8.5)."""
        return self._frames(request)

    async def _frames(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        asked = CompletionRequest(
            messages=tuple(self._model_view(request.messages)), tools=self._definitions, signal=self._signal
        )
        try:
            response: object = await self._complete(asked)
        except Exception as error:
            self.failure = ModelFailure(None, error=error)
            raise
        problem = _response_problem(response)
        if problem is not None:
            self.failure = ModelFailure(problem)
            raise _Refused(problem)
        assert isinstance(response, CompletionResponse)
        problem, calls = self._check_calls(response)
        if problem is not None:
            self.failure = ModelFailure(problem, response=response)
            raise _Refused(problem)
        self.content = response.content
        self.call_count = len(calls)
        renamed: list[ToolCall] = []
        for call, arguments in calls:
            runtime_id = f"model-call-{len(self._calls) + 1}"
            self._calls[runtime_id] = call
            renamed.append(ToolCall(id=runtime_id, name=call.name, arguments=arguments))
        for call in renamed:
            yield ToolCallFrame(call=call)
        yield ResponseCompletedFrame(
            response=CompletionResponse(
                id=response.id,
                content=response.content,
                tool_calls=tuple(renamed),
                usage=response.usage,
                finish_reason=response.finish_reason,
            )
        )

    def _model_view(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The conversation as the model wrote it: its own calls and call ids."""
        view: list[ChatMessage] = []
        for message in messages:
            if type(message) is AssistantMessage and message.tool_calls:
                calls = tuple(self._calls[call.id] for call in message.tool_calls)
                view.append(AssistantMessage(message.content, calls))
            elif type(message) is ToolMessage:
                view.append(ToolMessage(message.content, message.name, self._calls[message.tool_call_id].id))
            else:
                view.append(message)
        return view

    def _check_calls(
        self, response: CompletionResponse
    ) -> tuple[str | None, tuple[tuple[ToolCall, JsonValue], ...]]:
        """The checks §9 makes after ``model.response``: usage, finish and calls, the arguments."""
        if add_usage(self._usage(), response.usage).total_tokens > MAX_SAFE_INTEGER:
            return "cumulative usage overflows", ()
        if response.finish_reason == "error":
            return "model reported an error finish", ()
        if (response.finish_reason == "tool_calls") != bool(response.tool_calls):
            return "finish reason and tool calls disagree", ()
        checked: list[tuple[ToolCall, JsonValue]] = []
        transcript = self.transcript_bytes
        for call in response.tool_calls:
            if not valid_text(call.id, 1, _MAX_CALL_ID_CHARS) or not call.id.strip():
                return "tool call id must be a str of 1..512 characters", ()
            if not valid_text(call.name, 1, _MAX_TOOL_NAME_CHARS) or not call.name.strip():
                return "tool call name must be a str of 1..256 characters", ()
            try:
                arguments, wire = normalize_tool_json(call.arguments)
            except InvalidToolResultError:
                return "tool call arguments are not a bounded JSON value", ()
            transcript += len(wire)
            if transcript > MAX_TRANSCRIPT_BYTES:
                return "tool transcript exceeds 4 MiB", ()
            checked.append((call, arguments))
        self.transcript_bytes = transcript
        return None, tuple(checked)


def completion_error_code(code: object) -> str:
    """A failed ``complete``'s published code: its own, when well formed."""
    return code if type(code) is str and _ERROR_CODE.fullmatch(code) else "MODEL_COMPLETION_FAILED"


def _response_problem(response: object) -> str | None:
    """The checks §9 makes before ``model.response``; ``None`` when the answer is well formed."""
    if type(response) is not CompletionResponse:
        return "model response must be a CompletionResponse"
    if not valid_text(response.id, 1, _MAX_RESPONSE_ID_CHARS):
        return "model response id must be a str of 1..512 characters"
    if type(response.content) is not str or has_lone_surrogate(response.content):
        return "model response content must be a str"
    if len(encode_json(response.content)) > _MAX_CONTENT_JSON_BYTES:
        return "model response content exceeds 512 KiB"
    calls: object = response.tool_calls
    if not is_exact_array(calls):
        return "model response tool calls must be a sequence"
    items = calls
    if len(items) > _MAX_CALLS:
        return f"model response has more than {_MAX_CALLS} tool calls"
    if any(type(item) is not ToolCall for item in items):
        return "model response tool calls must be ToolCall values"
    usage: object = response.usage
    if type(usage) is not Usage:
        return "model response usage must be a Usage"
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
    if not all(is_safe_count(count) for count in counts):
        return "model response usage must hold safe integers >= 0"
    if usage.total_tokens != usage.prompt_tokens + usage.completion_tokens:
        return "model response usage total must equal prompt + completion"
    if type(response.finish_reason) is not str or response.finish_reason not in _FINISH_REASONS:
        return "model response finish reason is not valid"
    return None
