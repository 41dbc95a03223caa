"""A model's completion, checked; usage sums; closing a model stream (spec §8.5).

Shared by the model round (``_model_step``) and the summary request of a compaction
(``_compaction``).
"""

from __future__ import annotations

import inspect
from typing import Any, cast

import trio

from harness_kernel._bounded import BoundedJsonError, bounded_json
from harness_kernel._gate import error_code
from harness_kernel._json import MAX_SAFE_INTEGER, has_lone_surrogate
from harness_kernel.models._types import CompletionResponse, ToolCall, Usage
from harness_kernel.runtime._errors import ModelStreamError
from harness_kernel.runtime._shared import CLEANUP_GRACE, MAX_CALLS, MAX_CONTENT

__all__ = ["add_usage", "check_response", "close_iterator", "stream_failed"]


async def close_iterator(iterator: Any) -> None:
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


def add_usage(used: Usage, usage: Usage) -> Usage:
    total = Usage(
        prompt_tokens=used.prompt_tokens + usage.prompt_tokens,
        completion_tokens=used.completion_tokens + usage.completion_tokens,
        total_tokens=used.total_tokens + usage.total_tokens,
    )
    if max(total.prompt_tokens, total.completion_tokens, total.total_tokens) > MAX_SAFE_INTEGER:
        raise ModelStreamError("cumulative model usage exceeds 2**53-1")
    return total


def check_response(response: object, deltas: list[str], calls: list[ToolCall]) -> CompletionResponse:
    """The completion, checked against its own rules and against what was streamed."""
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
    _check_completed_calls(response.tool_calls, finish, calls)
    return response


def _check_completed_calls(completed: object, finish: str, calls: list[ToolCall]) -> None:
    if type(completed) is not tuple and type(completed) is not list:
        raise ModelStreamError("model completion tool calls are invalid")
    items = cast("tuple[object, ...] | list[object]", completed)
    if len(items) > MAX_CALLS:
        raise ModelStreamError(f"model completion has more than {MAX_CALLS} tool calls")
    if (finish == "tool_calls") != bool(items) or len(items) != len(calls):
        raise ModelStreamError("model completion tool calls do not match the stream")
    for streamed, final in zip(calls, items, strict=True):
        if type(final) is not ToolCall:
            raise ModelStreamError("model completion tool calls are invalid")
        assert isinstance(final, ToolCall)
        try:
            arguments, _ = bounded_json(final.arguments)
        except BoundedJsonError as error:
            raise ModelStreamError("model completion tool call arguments are not bounded JSON") from error
        if final.id != streamed.id or final.name != streamed.name or arguments != streamed.arguments:
            raise ModelStreamError("model completion tool calls do not match the stream")


def stream_failed(error: Exception) -> ModelStreamError:
    """The run's failure for an adapter's exception: with its stable code when it has one
    (a provider's ``ModelError``: ``MODEL_AUTH_FAILED``, ``MODEL_RATE_LIMITED`` …), never
    its message, which a foreign adapter might have filled with anything."""
    code = error_code(error)
    return ModelStreamError("model stream failed" if code is None else f"model stream failed: {code}")
