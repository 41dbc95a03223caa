"""CompleteModelAdapter and adapt_model (spec §4.2)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from harness_kernel.models import (
    CompletionRequest,
    CompletionResponse,
    FakeModel,
    ModelAdapter,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    ToolCall,
    ToolCallFrame,
    Usage,
    UserMessage,
    adapt_model,
)
from harness_kernel.models._adapters import CompleteModelAdapter
from harness_workspace import AbortController, AbortSignal

RESPONSE = CompletionResponse(
    id="r1",
    content="calling",
    tool_calls=(ToolCall("a", "echo", {"x": 1}), ToolCall("b", "echo", [2])),
    usage=Usage(1, 1, 2),
    finish_reason="tool_calls",
)


class RecordingModel:
    """A legacy model answering RESPONSE, or blocking until cancelled when told to."""

    name = "recording"

    def __init__(self, *, block: bool = False, error: Exception | None = None) -> None:
        self.block = block
        self.error = error
        self.requests: list[CompletionRequest] = []
        self.entered = trio.Event()
        self.cancelled = False

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.requests.append(request)
        self.entered.set()
        if self.error is not None:
            raise self.error
        if self.block:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled = True
                raise
        return RESPONSE


def request_with(signal: AbortSignal | None = None) -> ModelRequest:
    return ModelRequest(messages=(UserMessage("hi"),), signal=signal, context_version=1, message_revision=1)


async def collect(stream: AsyncIterator[ModelEvent]) -> list[ModelEvent]:
    return [frame async for frame in stream]


async def test_stream_yields_one_frame_per_call_then_the_completion_without_deltas() -> None:
    model = RecordingModel()
    request = request_with(AbortController().signal)
    frames = await collect(CompleteModelAdapter(model).stream(request))
    assert frames == [
        ToolCallFrame(RESPONSE.tool_calls[0]),
        ToolCallFrame(RESPONSE.tool_calls[1]),
        ResponseCompletedFrame(RESPONSE),
    ]
    assert len(model.requests) == 1
    assert model.requests[0] is request


async def test_stream_without_a_signal_completes() -> None:
    frames = await collect(CompleteModelAdapter(RecordingModel()).stream(request_with()))
    assert frames[-1] == ResponseCompletedFrame(RESPONSE)


async def test_pre_aborted_signal_raises_the_reason_and_never_calls_complete() -> None:
    model = RecordingModel()
    reason = KeyError("gone")
    with pytest.raises(KeyError) as caught:
        await collect(CompleteModelAdapter(model).stream(request_with(AbortSignal.aborted_with(reason))))
    assert caught.value is reason
    assert model.requests == []


async def test_non_exception_reason_is_raised_as_runtime_error_carrying_it() -> None:
    with pytest.raises(RuntimeError) as caught:
        await collect(
            CompleteModelAdapter(RecordingModel()).stream(request_with(AbortSignal.aborted_with("why")))
        )
    assert caught.value.args == ("why",)


async def test_abort_during_complete_cancels_the_call_and_raises_the_reason() -> None:
    model = RecordingModel(block=True)
    controller = AbortController()
    reason = ValueError("user pressed stop")
    outcome: list[BaseException] = []

    async def consume() -> None:
        try:
            await collect(CompleteModelAdapter(model).stream(request_with(controller.signal)))
        except ValueError as error:
            outcome.append(error)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await model.entered.wait()
            controller.abort(reason)
    assert model.cancelled
    assert outcome == [reason]
    assert outcome[0] is reason


async def test_errors_of_complete_propagate_unchanged() -> None:
    error = LookupError("provider down")
    with pytest.raises(LookupError) as caught:
        await collect(CompleteModelAdapter(RecordingModel(error=error)).stream(request_with()))
    assert caught.value is error


def test_adapter_requires_a_callable_complete() -> None:
    with pytest.raises(TypeError, match="callable complete"):
        CompleteModelAdapter(object())  # pyright: ignore[reportArgumentType]


def test_adapt_model_returns_a_streaming_model_unchanged() -> None:
    model = FakeModel()
    assert adapt_model(model) is model


def test_adapt_model_wraps_a_legacy_model() -> None:
    legacy = RecordingModel()
    adapted = adapt_model(legacy)
    assert type(adapted) is CompleteModelAdapter
    assert adapted.model is legacy


def test_adapt_model_wraps_when_stream_is_not_callable() -> None:
    class LegacyWithStreamData(RecordingModel):
        stream = "not callable"

    assert type(adapt_model(LegacyWithStreamData())) is CompleteModelAdapter


def test_adapters_satisfy_the_port() -> None:
    ports: list[ModelAdapter] = [CompleteModelAdapter(RecordingModel()), FakeModel()]
    assert all(callable(port.stream) for port in ports)
