"""Adapting one-shot models to the streaming port, and the scripted fake model (spec §4.2, §4.3)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast, final

import trio

from harness_kernel._json import encode_json
from harness_kernel.models._types import (
    CompletionRequest,
    CompletionResponse,
    FinishReason,
    Model,
    ModelAdapter,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    Usage,
    abort_reason_error,
    estimate_tokens,
    normalize_model_text_deltas,
    raise_if_aborted,
)
from harness_workspace import move_on_abort

__all__ = ["CompleteModelAdapter", "FakeModel", "ScriptedTurn", "adapt_model"]

FAKE_MODEL_NAME = "fake-model/v1"


@final
class CompleteModelAdapter:
    """A :class:`ModelAdapter` over a legacy one-shot :class:`Model`.

    ``stream(request)`` is an async generator. If ``request.signal`` is already aborted it
    raises the signal's reason without calling ``complete``; otherwise it awaits
    ``model.complete(request)`` (the same request object) raced against the signal — on
    abort the call is cancelled and the reason raised — then yields one ``ToolCallFrame``
    per completed call and a ``ResponseCompletedFrame``. It never fabricates text deltas,
    and errors of ``complete`` propagate unchanged.

    Args:
        model: The model; its ``complete`` is captured here, once.

    Raises:
        TypeError: ``model`` has no callable ``complete``.
    """

    __slots__ = ("_complete", "model")

    model: Model
    _complete: Callable[[CompletionRequest], Awaitable[CompletionResponse]]

    def __init__(self, model: Model) -> None:
        complete: object = getattr(model, "complete", None)
        if not callable(complete):
            raise TypeError("model must have a callable complete")
        self.model = model
        self._complete = cast("Callable[[CompletionRequest], Awaitable[CompletionResponse]]", complete)

    def __repr__(self) -> str:
        return f"<CompleteModelAdapter model={self.model!r}>"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer ``request`` through ``complete``: the tool-call frames, then the completion."""
        signal = request.signal
        raise_if_aborted(signal)
        if signal is None:
            response = await self._complete(request)
        else:
            outcome: list[CompletionResponse] = []
            with move_on_abort(signal):
                outcome.append(await self._complete(request))
            # The signal wins the race even if ``complete`` ignored its cancellation.
            if signal.aborted or not outcome:
                raise abort_reason_error(signal.reason)
            response = outcome[0]
        for call in response.tool_calls:
            yield ToolCallFrame(call)
        yield ResponseCompletedFrame(response)


def adapt_model(model: ModelAdapter | Model) -> ModelAdapter:
    """Return ``model`` itself if it has a callable ``stream``, else a :class:`CompleteModelAdapter`."""
    if callable(getattr(model, "stream", None)):
        return cast(ModelAdapter, model)
    return CompleteModelAdapter(cast(Model, model))


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One scripted answer of :class:`FakeModel`.

    ``content`` defaults to the joined ``text_deltas``; the deltas default to ``[content]``
    when it is non-empty; both are normalized with ``normalize_model_text_deltas``.
    ``finish_reason`` defaults to ``tool_calls`` when there are tool calls, else ``stop``.
    ``usage`` defaults to estimates (see :class:`FakeModel`); an explicit usage whose total
    is 0 gets prompt + completion as its total. ``stream``, if given, replaces the whole
    stream: its items are yielded verbatim and unvalidated (for malformed-stream scenarios);
    ``complete`` ignores it.

    Raises:
        ValueError: both ``content`` and ``text_deltas`` are given and disagree.
    """

    content: str | None = None
    text_deltas: Sequence[str] | None = None
    tool_calls: Sequence[ToolCall] | None = None
    usage: Usage | None = None
    finish_reason: FinishReason | None = None
    stream: Iterable[object] | None = None

    def __post_init__(self) -> None:
        # Snapshot the caller's lists so later changes to them do not change the script.
        if self.text_deltas is not None:
            object.__setattr__(self, "text_deltas", tuple(self.text_deltas))
        if self.tool_calls is not None:
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if isinstance(self.stream, list):
            object.__setattr__(self, "stream", tuple(self.stream))
        if (
            self.content is not None
            and self.text_deltas is not None
            and "".join(self.text_deltas) != self.content
        ):
            raise ValueError("scripted text deltas must concatenate to response content")


@dataclass(frozen=True, slots=True)
class _Reply:
    deltas: tuple[str, ...]
    response: CompletionResponse


class FakeModel:
    """A scripted model for tests: both a legacy :class:`Model` and a :class:`ModelAdapter`.

    Call N (1-based, counting ``complete`` and ``stream`` together) consumes the next
    :class:`ScriptedTurn`; once they run out it answers ``[fake-model] ack #N``. The response
    id is ``fake-N``. Default usage: prompt = ``estimate_tokens((system or "") + "\\n" +
    "\\n".join(message contents))``, completion = ``estimate_tokens("\\n".join([content,
    *compact JSON of each call's arguments]))``, total = their sum.

    ``stream`` yields the text deltas, one ``ToolCallFrame`` per call, then the completion,
    checking the request's signal before every frame (aborted: the signal's reason is
    raised and no completion follows).

    Args:
        turns: The scripted answers, in order.

    Raises:
        TypeError: an item of ``turns`` is not a :class:`ScriptedTurn`.
    """

    name: str = FAKE_MODEL_NAME

    def __init__(self, turns: Iterable[ScriptedTurn] = ()) -> None:
        queued = tuple(turns)
        for turn in queued:
            if type(turn) is not ScriptedTurn:
                raise TypeError(f"turns must be ScriptedTurn values, not {type(turn).__name__}")
        self._turns = deque(queued)
        self._calls = 0
        self._requests: list[CompletionRequest] = []

    def __repr__(self) -> str:
        return f"<FakeModel calls={self._calls} scripted_left={len(self._turns)}>"

    @property
    def requests(self) -> tuple[CompletionRequest, ...]:
        """Every request received, in order: the identical objects (``stream``: at the first pull)."""
        return tuple(self._requests)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer ``request`` with the next scripted turn."""
        self._requests.append(request)
        number, turn = self._next_turn()
        return _reply(request, turn, number).response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer ``request`` with the next scripted turn, one frame per pull."""
        self._requests.append(request)
        number, turn = self._next_turn()
        frames = _frames(_reply(request, turn, number)) if turn.stream is None else turn.stream
        for frame in frames:
            await trio.lowlevel.checkpoint()
            raise_if_aborted(request.signal)
            yield cast(ModelEvent, frame)

    def _next_turn(self) -> tuple[int, ScriptedTurn]:
        self._calls += 1
        number = self._calls
        if self._turns:
            return number, self._turns.popleft()
        return number, ScriptedTurn(content=f"[fake-model] ack #{number}")


def _reply(request: CompletionRequest, turn: ScriptedTurn, number: int) -> _Reply:
    if turn.text_deltas is not None:
        content = "".join(turn.text_deltas) if turn.content is None else turn.content
        deltas = normalize_model_text_deltas(turn.text_deltas)
    else:
        content = "" if turn.content is None else turn.content
        deltas = normalize_model_text_deltas((content,))
    calls = tuple(turn.tool_calls or ())
    finish_reason: FinishReason = turn.finish_reason or ("tool_calls" if calls else "stop")
    usage = turn.usage
    if usage is None:
        prompt_text = (request.system or "") + "\n" + "\n".join(m.content for m in request.messages)
        completion_text = "\n".join([content, *(encode_json(call.arguments).decode() for call in calls)])
        usage = _usage(estimate_tokens(prompt_text), estimate_tokens(completion_text))
    elif usage.total_tokens == 0:
        usage = _usage(usage.prompt_tokens, usage.completion_tokens)
    response = CompletionResponse(
        id=f"fake-{number}", content=content, tool_calls=calls, usage=usage, finish_reason=finish_reason
    )
    return _Reply(deltas, response)


def _usage(prompt: int, completion: int) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def _frames(reply: _Reply) -> Iterator[ModelEvent]:
    for delta in reply.deltas:
        yield TextDeltaFrame(delta)
    for call in reply.response.tool_calls:
        yield ToolCallFrame(call)
    yield ResponseCompletedFrame(reply.response)
