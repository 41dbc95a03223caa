"""FakeModel and ScriptedTurn: every documented default (spec §4.3)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import cast

import pytest
import trio

from harness_kernel.models import (
    CompletionRequest,
    CompletionResponse,
    FakeModel,
    Model,
    ModelAdapter,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    ScriptedTurn,
    SystemMessage,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    Usage,
    UserMessage,
)
from harness_kernel.models._types import MAX_MODEL_TEXT_DELTA_CHARS
from harness_workspace import AbortController, AbortSignal


def request_with(
    *messages: str, system: str | None = None, signal: AbortSignal | None = None
) -> ModelRequest:
    return ModelRequest(messages=tuple(UserMessage(text) for text in messages), system=system, signal=signal)


async def collect(stream: AsyncIterator[ModelEvent]) -> list[ModelEvent]:
    return [frame async for frame in stream]


async def completion_of(model: FakeModel, request: ModelRequest) -> CompletionResponse:
    frames = await collect(model.stream(request))
    last = frames[-1]
    assert type(last) is ResponseCompletedFrame
    return last.response


def test_fake_model_is_both_a_model_and_an_adapter() -> None:
    model = FakeModel()
    as_model: Model = model
    as_adapter: ModelAdapter = model
    assert as_model.name == "fake-model/v1"
    assert as_adapter is model
    assert model.requests == ()


async def test_exhausted_queue_acknowledges_with_the_call_number_across_both_entry_points() -> None:
    model = FakeModel()
    first = await model.complete(request_with("hi"))
    second = await completion_of(model, request_with("again"))
    assert (first.id, first.content, first.finish_reason) == ("fake-1", "[fake-model] ack #1", "stop")
    assert (second.id, second.content) == ("fake-2", "[fake-model] ack #2")
    assert first.tool_calls == ()


async def test_scripted_turns_are_consumed_in_order_then_acknowledged() -> None:
    model = FakeModel([ScriptedTurn("one"), ScriptedTurn("two")])
    contents = [(await model.complete(request_with("x"))).content for _ in range(3)]
    assert contents == ["one", "two", "[fake-model] ack #3"]


async def test_content_is_streamed_as_one_delta_then_the_completion() -> None:
    frames = await collect(FakeModel([ScriptedTurn("hello")]).stream(request_with("hi")))
    assert frames[0] == TextDeltaFrame("hello")
    assert len(frames) == 2
    assert type(frames[1]) is ResponseCompletedFrame


async def test_content_defaults_to_the_joined_deltas() -> None:
    frames = await collect(FakeModel([ScriptedTurn(text_deltas=["he", "", "llo"])]).stream(request_with("x")))
    assert frames[:2] == [TextDeltaFrame("he"), TextDeltaFrame("llo")]
    last = frames[2]
    assert type(last) is ResponseCompletedFrame
    assert last.response.content == "hello"


async def test_matching_content_and_deltas_are_accepted() -> None:
    frames = await collect(FakeModel([ScriptedTurn("ab", text_deltas=("a", "b"))]).stream(request_with("x")))
    assert frames[:2] == [TextDeltaFrame("a"), TextDeltaFrame("b")]


def test_disagreeing_content_and_deltas_raise_value_error() -> None:
    with pytest.raises(ValueError, match=r"^scripted text deltas must concatenate to response content$"):
        ScriptedTurn("abc", text_deltas=["ab"])


async def test_empty_content_streams_no_delta() -> None:
    frames = await collect(FakeModel([ScriptedTurn()]).stream(request_with("x")))
    assert len(frames) == 1
    last = frames[0]
    assert type(last) is ResponseCompletedFrame
    assert (last.response.content, last.response.finish_reason) == ("", "stop")


async def test_oversized_content_is_split_into_bounded_deltas() -> None:
    content = "z" * (MAX_MODEL_TEXT_DELTA_CHARS + 5)
    frames = await collect(FakeModel([ScriptedTurn(content)]).stream(request_with("x")))
    assert frames[:2] == [TextDeltaFrame("z" * MAX_MODEL_TEXT_DELTA_CHARS), TextDeltaFrame("z" * 5)]


async def test_tool_calls_stream_after_the_deltas_and_default_the_finish_reason() -> None:
    calls = [ToolCall("c1", "echo", {"text": "a"}), ToolCall("c2", "echo", {"text": "b"})]
    frames = await collect(
        FakeModel([ScriptedTurn("using tools", tool_calls=calls)]).stream(request_with("x"))
    )
    assert frames[:3] == [TextDeltaFrame("using tools"), ToolCallFrame(calls[0]), ToolCallFrame(calls[1])]
    last = frames[3]
    assert type(last) is ResponseCompletedFrame
    assert last.response.tool_calls == tuple(calls)
    assert last.response.finish_reason == "tool_calls"


async def test_explicit_finish_reason_is_kept() -> None:
    response = await FakeModel([ScriptedTurn("cut", finish_reason="length")]).complete(request_with("x"))
    assert response.finish_reason == "length"


async def test_default_usage_estimates_prompt_and_completion() -> None:
    model = FakeModel([ScriptedTurn("abc", tool_calls=[ToolCall("c", "echo", {"a": 1})])])
    request = ModelRequest(messages=(SystemMessage("rules"), UserMessage("hello world")), system="sys")
    response = await model.complete(request)
    # prompt: "sys\nrules\nhello world" = 21 chars; completion: 'abc\n{"a":1}' = 11 chars.
    assert response.usage == Usage(prompt_tokens=6, completion_tokens=3, total_tokens=9)


async def test_default_usage_without_system_starts_with_a_newline() -> None:
    response = await FakeModel([ScriptedTurn("")]).complete(request_with("abc"))
    # prompt: "\nabc" = 4 chars -> 1 token; completion: "" -> 0 tokens.
    assert response.usage == Usage(prompt_tokens=1, completion_tokens=0, total_tokens=1)


async def test_explicit_usage_with_zero_total_gets_the_sum() -> None:
    model = FakeModel([ScriptedTurn("a", usage=Usage(7, 5, 0)), ScriptedTurn("b", usage=Usage(7, 5, 99))])
    first = await model.complete(request_with("x"))
    second = await model.complete(request_with("x"))
    assert first.usage == Usage(7, 5, 12)
    assert second.usage == Usage(7, 5, 99)


async def test_requests_records_the_identical_object() -> None:
    model = FakeModel()
    legacy = CompletionRequest(messages=[UserMessage("a")])
    streamed = request_with("b", signal=AbortController().signal)
    await model.complete(legacy)
    await collect(model.stream(streamed))
    assert len(model.requests) == 2
    assert model.requests[0] is legacy
    assert model.requests[1] is streamed
    assert model.requests[1].signal is streamed.signal


async def test_stream_records_the_request_and_consumes_a_turn_only_at_the_first_pull() -> None:
    model = FakeModel([ScriptedTurn("first")])
    stream = model.stream(request_with("x"))
    assert model.requests == ()
    response = await model.complete(request_with("y"))
    assert response.content == "first"
    frames = await collect(stream)
    last = frames[-1]
    assert type(last) is ResponseCompletedFrame
    assert last.response.content == "[fake-model] ack #2"


async def test_stream_override_is_yielded_verbatim_without_a_completion() -> None:
    junk = object()
    scripted: list[object] = [TextDeltaFrame(""), junk, ToolCallFrame(ToolCall("", "", {"x": 1}))]
    frames = await collect(FakeModel([ScriptedTurn(stream=scripted)]).stream(request_with("x")))
    assert len(frames) == 3
    assert frames[0] == TextDeltaFrame("")
    assert frames[1] is junk
    assert frames[2] is scripted[2]


async def test_stream_override_is_a_snapshot_of_the_scripted_list() -> None:
    scripted: list[object] = [TextDeltaFrame("a")]
    turn = ScriptedTurn(stream=scripted)
    scripted.append(TextDeltaFrame("b"))
    assert await collect(FakeModel([turn]).stream(request_with("x"))) == [TextDeltaFrame("a")]


async def test_stream_override_generator_errors_propagate() -> None:
    def broken() -> object:
        yield TextDeltaFrame("partial")
        raise OSError("connection reset")

    stream = FakeModel([ScriptedTurn(stream=broken())]).stream(request_with("x"))  # pyright: ignore[reportArgumentType]
    assert await anext(stream) == TextDeltaFrame("partial")
    with pytest.raises(OSError, match="connection reset"):
        await anext(stream)


async def test_pre_aborted_signal_raises_the_reason_before_any_frame() -> None:
    reason = ValueError("stop")
    model = FakeModel([ScriptedTurn("hello")])
    stream = model.stream(request_with("x", signal=AbortSignal.aborted_with(reason)))
    with pytest.raises(ValueError, match="stop") as caught:
        await anext(stream)
    assert caught.value is reason
    assert len(model.requests) == 1


async def test_abort_between_frames_raises_the_reason_and_no_completion_follows() -> None:
    controller = AbortController()
    model = FakeModel([ScriptedTurn(text_deltas=["a", "b"], tool_calls=[ToolCall("c", "t", {})])])
    stream = model.stream(request_with("x", signal=controller.signal))
    seen: list[ModelEvent] = []
    with trio.fail_after(5):
        seen.append(await anext(stream))
        controller.abort("user canceled")
        with pytest.raises(RuntimeError) as caught:
            await anext(stream)
    assert seen == [TextDeltaFrame("a")]
    assert caught.value.args == ("user canceled",)
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_abort_from_another_task_stops_a_stream_override_too() -> None:
    controller = AbortController()
    turn = ScriptedTurn(stream=[TextDeltaFrame("a"), TextDeltaFrame("b")])
    stream = FakeModel([turn]).stream(request_with("x", signal=controller.signal))
    assert await anext(stream) == TextDeltaFrame("a")

    async def abort_later() -> None:
        await trio.sleep(0.01)
        controller.abort(KeyError("late"))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort_later)
            await controller.signal.wait()
    with pytest.raises(KeyError):
        await anext(stream)


async def test_aclose_ends_the_stream_cleanly() -> None:
    stream = FakeModel([ScriptedTurn(text_deltas=["a", "b"])]).stream(request_with("x"))
    assert await anext(stream) == TextDeltaFrame("a")
    await cast("AsyncGenerator[ModelEvent, None]", stream).aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


def test_scripted_turn_snapshots_the_callers_lists() -> None:
    deltas = ["a"]
    calls = [ToolCall("c", "t", {})]
    turn = ScriptedTurn(text_deltas=deltas, tool_calls=calls)
    deltas.append("b")
    calls.clear()
    assert turn.text_deltas == ("a",)
    assert turn.tool_calls == (ToolCall("c", "t", {}),)


def test_turns_must_be_scripted_turns() -> None:
    with pytest.raises(TypeError):
        FakeModel(["hello"])  # pyright: ignore[reportArgumentType]
