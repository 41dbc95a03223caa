"""Compaction at a model-request boundary (issue #23 §2).

Before a request, a run with a context policy measures what it would send (its messages and
the pending steering). At the policy's threshold the prefix before the kept tail (see
:func:`~harness_kernel.runtime._context.tail_start`: a tool result is never separated from
its call) is summarised by the same model, with a fixed instruction, no tools and no system
text. The summary must be non-empty and must shrink the context; otherwise, or when the
summary request fails, the run fails with a typed error and nothing is stored or changed.

A usable summary is stored first, ``context.checkpoint`` (summary, tail start, compaction
revision) and ``context.compacted`` (sizes before and after, the summary's usage) in one
batch; only then does the run's context become summary + tail. The original messages stay
in the session's history. The summary's usage counts against the token budget, which is
checked again before the next request is made.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncGenerator
from typing import Any

import trio

from harness_kernel._gate import error_code
from harness_kernel.events._model import ContextCheckpointData, ContextCompactedData
from harness_kernel.models._types import (
    ChatMessage,
    CompletionResponse,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    Usage,
    UserMessage,
)
from harness_kernel.runtime._channel import RunChannel
from harness_kernel.runtime._context import (
    check_summary,
    compacted_messages,
    needs_compaction,
    summary_request_messages,
    tail_start,
)
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    ContextCompactionError,
    ModelTimeoutError,
)
from harness_kernel.runtime._response import check_response, close_iterator
from harness_kernel.runtime._state import Compacted, RunView, StepValue, UsageSpent
from harness_kernel.runtime._terminal import event_usage
from harness_workspace import AbortController, AbortSignal

__all__ = ["compact_if_needed"]


async def compact_if_needed(view: RunView, channel: RunChannel) -> AsyncGenerator[StepValue, None]:
    """Compact the run's context when the next request would reach the threshold.

    Yields :class:`UsageSpent` (the summary's usage) once the summary is usable and
    :class:`Compacted` once it is stored.
    """
    policy = view.admitted.policy
    assert policy is not None
    steering = [UserMessage(content=text) for _, text in channel.pending]
    before = view.measure(steering)
    if not needs_compaction(before.tokens, policy):
        return
    messages = view.messages
    start = tail_start(messages, policy.tail_messages)
    if start < 2:
        # Nothing (or one message) before the tail: a summary would not shorten the context
        # by a message. The window check at the request decides.
        return
    prefix, tail = tuple(messages[:start]), tuple(messages[start:])
    summary, usage = await _summarise(view, channel, prefix)
    after_messages = compacted_messages(summary, tail) if summary else ()
    after_sizes: list[int] = []
    after = view.measure_of(after_messages, after_sizes, steering) if summary else before
    summary = check_summary(summary, before_bytes=before.tokens, after_bytes=after.tokens)
    yield UsageSpent(usage)
    revision = view.compactions + 1
    summary_id = channel.new_id("msg")
    checkpoint = ContextCheckpointData(
        **channel.ids,
        revision=revision,
        summary_message_id=summary_id,
        summary=summary,
        tail_start=start,
        message_revision=view.revision + 1,
    )
    compacted = ContextCompactedData(
        **channel.ids,
        summary_message_id=summary_id,
        summary=summary,
        before_messages=len(messages) + len(steering),
        after_messages=len(after_messages) + len(steering),
        before_tokens=before.tokens,
        after_tokens=after.tokens,
        usage=event_usage(usage),
    )
    acknowledge = await channel.publish_batch(
        lambda: (
            channel.event("context.checkpoint", checkpoint),
            channel.event("context.compacted", compacted),
        )
    )
    yield Compacted(revision, after_messages, after_sizes)
    if acknowledge:
        yield None
    # The summary may have spent the rest of the budget: then no request is made (the budget
    # gate's warning, then the exceed).
    async for value in channel.refuse_spent_tokens(view.usage.total_tokens):
        yield value


def _summary_request(
    view: RunView, channel: RunChannel, prefix: tuple[ChatMessage, ...], controller: AbortController
) -> ModelRequest:
    """The summary request: the prefix and the fixed instruction, no tools, no system text."""
    admitted = view.admitted
    max_tokens = admitted.max_tokens
    if admitted.max_model_tokens is not None:
        remaining = max(1, admitted.max_model_tokens - view.usage.total_tokens)
        max_tokens = remaining if max_tokens is None else min(max_tokens, remaining)
    return ModelRequest(
        messages=summary_request_messages(prefix),
        tools=None,
        model=admitted.model,
        max_tokens=max_tokens,
        system=None,
        provider_options=admitted.provider_options,
        signal=AbortSignal.any([controller.signal, channel.controller.signal]),
        context_version=1,
        message_revision=view.revision,
    )


async def _pull(iterator: Any) -> CompletionResponse:
    """Take the summary stream's frames up to its checked completion."""
    deltas: list[str] = []
    while True:
        frame: object = await iterator.__anext__()
        if type(frame) is TextDeltaFrame:
            assert isinstance(frame, TextDeltaFrame)
            deltas.append(frame.delta)
        elif type(frame) is ResponseCompletedFrame:
            assert isinstance(frame, ResponseCompletedFrame)
            return check_response(frame.response, deltas, [])
        else:
            raise ContextCompactionError("the summary stream sent a tool call or an invalid frame")


async def _summarise(
    view: RunView, channel: RunChannel, prefix: tuple[ChatMessage, ...]
) -> tuple[str, Usage]:
    """Ask the model for the summary of ``prefix``; its text and usage.

    Raises:
        ContextCompactionError: the request failed, or its answer is not a plain summary.
        ModelTimeoutError: the round's deadline passed.
        Canceled: the run was canceled meanwhile.
    """
    controller = AbortController()
    timeout_ms = view.admitted.model_timeout_ms
    deadline = math.inf if timeout_ms is None else trio.current_time() + timeout_ms / 1000
    response: CompletionResponse | None = None
    iterator: object = None
    try:
        with channel.cancellable(deadline) as scope:
            try:
                iterator = view.admitted.stream(_summary_request(view, channel, prefix, controller))
                if inspect.iscoroutine(iterator) or not hasattr(iterator, "__anext__"):
                    raise ContextCompactionError("the summary stream is not an async iterator")
                response = await _pull(iterator)
            except StopAsyncIteration:
                raise ContextCompactionError("the summary stream ended without a completion") from None
            except ContextCompactionError:
                raise
            except AgentRuntimeError as error:
                channel.check_cancel()
                raise ContextCompactionError(f"the summary is unusable: {error.message}") from error
            except Exception as error:
                channel.check_cancel()  # an adapter raising its aborted signal's reason
                code = error_code(error)
                reason = "the summary request failed" + ("" if code is None else f": {code}")
                raise ContextCompactionError(reason) from error
        if scope.cancelled_caught or channel.cancel_requested:
            channel.check_cancel()
            assert timeout_ms is not None
            raise ModelTimeoutError(timeout_ms)
    finally:
        if not controller.signal.aborted:
            controller.abort(ContextCompactionError("summary request closed"))
        if iterator is not None:
            if inspect.iscoroutine(iterator):
                iterator.close()
            else:
                await close_iterator(iterator)
    assert response is not None
    if response.finish_reason != "stop":
        raise ContextCompactionError(f"the summary request finished with {response.finish_reason}")
    return response.content, response.usage
