"""OpenAIChatModel against an in-memory SSE transport: the exact request bodies, the
assembly of streamed chunks into frames, typed errors, retries, cancellation and secrets."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from openai_streams import (
    DONE,
    STALL,
    ScriptedTransport,
    chunk,
    text_stream,
    tool_stream,
    usage_chunk,
)
from runtime_helpers import d, drain, make_input, pure_tool, registry, types

from harness_kernel.models import (
    AssistantMessage,
    CompletionResponse,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    SystemMessage,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from harness_kernel.runtime import MinimalAgentRuntime
from harness_models import (
    MODEL_CONFIG_INVALID,
    MODEL_PROVIDER_ERROR,
    MODEL_RATE_LIMITED,
    MODEL_SERVER_ERROR,
    MODEL_STREAM_INVALID,
    MODEL_TOOL_ARGUMENTS_INVALID,
    ModelError,
)
from harness_models._openai import OpenAIChatModel
from harness_models._wire import ApiKey, RetryPolicy, SseEvent
from harness_workspace import AbortController

KEY = "sk-proj-SECRET0123456789abcdef"
URL = "https://api.example.test/v1"
NO_WAIT = RetryPolicy(max_attempts=3, base_delay_s=0, max_delay_s=0)
READ = ToolDefinition(
    name="fs.read",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
LIST = ToolDefinition(name="list_dir", description="List a folder.", input_schema={"type": "object"})


def _model(transport: ScriptedTransport, **options: Any) -> OpenAIChatModel:
    options.setdefault("api_key", ApiKey(KEY))
    options.setdefault("base_url", URL)
    options.setdefault("retry", NO_WAIT)
    return OpenAIChatModel("gpt-4.1", transport=transport, **options)


def _request(*messages: Any, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=list(messages) or [UserMessage(content="hi")], **fields)


async def _frames(model: OpenAIChatModel, request: ModelRequest) -> list[ModelEvent]:
    return [frame async for frame in model.stream(request)]


async def _collect(model: OpenAIChatModel, request: ModelRequest, seen: list[ModelEvent]) -> None:
    async for frame in model.stream(request):
        seen.append(frame)


async def _answer(
    events: Sequence[SseEvent | ModelError | str], request: ModelRequest | None = None
) -> list[ModelEvent]:
    return await _frames(_model(ScriptedTransport([events])), request or _request(tools=[READ, LIST]))


async def _error(
    events: Sequence[SseEvent | ModelError | str], request: ModelRequest | None = None
) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await _answer(events, request)
    return caught.value


async def _body(request: ModelRequest, **options: Any) -> dict[str, object]:
    transport = ScriptedTransport([text_stream("ok")])
    await _frames(_model(transport, **options), request)
    return transport.requests[0].json()


def _completion(frames: list[ModelEvent]) -> CompletionResponse:
    last = frames[-1]
    assert isinstance(last, ResponseCompletedFrame)
    return last.response


# ------------------------------------------------------------------ the request
async def test_a_text_only_request_is_the_documented_body_and_headers() -> None:
    transport = ScriptedTransport([text_stream("ok")])
    await _frames(_model(transport, base_url=URL + "/"), _request())
    (sent,) = transport.requests
    assert sent.url == "https://api.example.test/v1/chat/completions"
    assert sent.headers == {
        "Authorization": f"Bearer {KEY}",
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
    }
    assert sent.body == (
        b'{"model":"gpt-4.1","messages":[{"role":"user","content":"hi"}],'
        b'"stream":true,"stream_options":{"include_usage":true}}'
    )


async def test_without_a_key_no_authorization_header_is_sent_and_extra_headers_are() -> None:
    transport = ScriptedTransport([text_stream("ok")])
    model = _model(
        transport, api_key=None, base_url="http://127.0.0.1:11434/v1", extra_headers={"X-Org": "a"}
    )
    await _frames(model, _request())
    assert transport.requests[0].headers == {
        "X-Org": "a",
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
    }


async def test_tools_are_advertised_under_their_aliases() -> None:
    body = await _body(_request(tools=[READ, LIST]))
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "fs_read", "description": "Read a file.", "parameters": READ.input_schema},
        },
        {
            "type": "function",
            "function": {
                "name": "list_dir",
                "description": "List a folder.",
                "parameters": {"type": "object"},
            },
        },
    ]
    assert list(body) == ["model", "messages", "tools", "stream", "stream_options"]


async def test_the_system_prompt_and_a_history_of_tool_calls_and_results_are_mapped() -> None:
    history = [
        SystemMessage(content="earlier rule"),
        UserMessage(content="read a.txt"),
        AssistantMessage(
            content="Reading.",
            tool_calls=(
                ToolCall(id="call_1", name="fs.read", arguments={"path": "a.txt"}),
                ToolCall(id="call_2", name="git.diff", arguments={}),
            ),
        ),
        ToolMessage(content="hello", name="fs.read", tool_call_id="call_1"),
        ToolMessage(content="no diff", name="git.diff", tool_call_id="call_2"),
        AssistantMessage(content="It says hello."),
    ]
    body = await _body(_request(*history, tools=[READ], system="Be brief."))
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "earlier rule"},
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "fs_read", "arguments": '{"path":"a.txt"}'},
                },
                # A tool of an earlier tool set still has an alias to replay (decision 040).
                {"id": "call_2", "type": "function", "function": {"name": "git_diff", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
        {"role": "tool", "tool_call_id": "call_2", "content": "no diff"},
        {"role": "assistant", "content": "It says hello."},
    ]
    assert [tool["function"]["name"] for tool in body["tools"]] == ["fs_read"]  # type: ignore[index,union-attr]


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
async def test_max_tokens_goes_in_the_chosen_field_and_provider_options_are_merged(field: str) -> None:
    request = _request(max_tokens=256, provider_options={"temperature": 0.2, "parallel_tool_calls": False})
    body = await _body(request, max_tokens_field=field)
    assert {key: body[key] for key in list(body)[2:]} == {
        "stream": True,
        "stream_options": {"include_usage": True},
        field: 256,
        "temperature": 0.2,
        "parallel_tool_calls": False,
    }


@pytest.mark.parametrize("key", ["model", "messages", "tools", "stream", "stream_options", "n", "max_tokens"])
async def test_provider_options_cannot_override_what_the_adapter_owns(key: str) -> None:
    transport = ScriptedTransport([text_stream("ok")])
    request = _request(max_tokens=10, provider_options={key: "other"})
    with pytest.raises(ModelError) as caught:
        await _frames(_model(transport), request)
    assert caught.value.code == MODEL_CONFIG_INVALID
    assert transport.requests == []


# ------------------------------------------------------------------ the stream
async def test_text_deltas_are_handed_on_as_they_arrive_then_the_completion() -> None:
    frames = await _answer(text_stream("Hel", "lo ", "wörld"))
    assert frames[:3] == [TextDeltaFrame("Hel"), TextDeltaFrame("lo "), TextDeltaFrame("wörld")]
    assert frames[3] == ResponseCompletedFrame(
        CompletionResponse(
            id="chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            content="Hello wörld",
            tool_calls=(),
            usage=Usage(prompt_tokens=9, completion_tokens=3, total_tokens=12),
            finish_reason="stop",
        )
    )
    assert len(frames) == 4


async def test_one_tool_call_comes_back_under_its_canonical_name() -> None:
    frames = await _answer(
        tool_stream([("call_a", "fs_read", ['{"pa', 'th": "a.', 'txt"}'])], text=["Let me look."])
    )
    call = ToolCall(id="call_a", name="fs.read", arguments={"path": "a.txt"})
    assert frames[:2] == [TextDeltaFrame("Let me look."), ToolCallFrame(call)]
    response = _completion(frames)
    assert (response.content, response.tool_calls, response.finish_reason) == (
        "Let me look.",
        (call,),
        "tool_calls",
    )
    assert response.usage == Usage(prompt_tokens=20, completion_tokens=10, total_tokens=30)


async def test_parallel_calls_split_inside_strings_and_escapes_are_assembled_in_index_order() -> None:
    # "café" written as \u00e9 split inside the escape; an emoji's surrogate pair split between its halves.
    first = ['{"path": "caf\\u00', "e9/", "x.txt", '"}']
    second = ['{"pa', 'th": "\\ud83d', '\\ude00.md", "n": 1', "2}"]
    events = [
        chunk({"role": "assistant", "content": None}),
        chunk(
            {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "fs_read"}}]}
        ),
        chunk(
            {"tool_calls": [{"index": 1, "id": "c1", "type": "function", "function": {"name": "list_dir"}}]}
        ),
    ]
    for a, b in zip(first, second, strict=True):  # interleaved, as some servers send them
        events.append(chunk({"tool_calls": [{"index": 1, "function": {"arguments": b}}]}))
        events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}))
    events += [chunk({}, "tool_calls"), usage_chunk(5, 5), DONE]
    frames = await _answer(events)
    assert frames[:2] == [
        ToolCallFrame(ToolCall(id="c0", name="fs.read", arguments={"path": "café/x.txt"})),
        ToolCallFrame(ToolCall(id="c1", name="list_dir", arguments={"path": "😀.md", "n": 12})),
    ]
    assert _completion(frames).finish_reason == "tool_calls"


async def test_empty_arguments_are_an_empty_object() -> None:
    frames = await _answer(tool_stream([("c0", "list_dir", [])]))
    assert frames[0] == ToolCallFrame(ToolCall(id="c0", name="list_dir", arguments={}))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("fs_write", r"\?fs_write"),
        ("FS_READ", r"\?FS_READ"),
        # The canonical spelling is not an alias the request issued: never taken for fs.read.
        ("fs.read", r"\?fs_read_[0-9a-f]{12}"),
        ("multi_tool_use.parallel", r"\?multi_tool_use_parallel_[0-9a-f]{12}"),
    ],
)
async def test_an_invented_tool_name_comes_back_marked_unknown(name: str, expected: str) -> None:
    frames = await _answer(tool_stream([("c0", name, ["{}"])]))
    assert isinstance(frames[0], ToolCallFrame)
    assert re.fullmatch(expected, frames[0].call.name)


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "error"), ("something_new", "error")],
)
async def test_finish_reasons_are_mapped(reason: str, mapped: str) -> None:
    frames = await _answer(text_stream("partial", finish=reason))
    assert _completion(frames).finish_reason == mapped
    assert _completion(frames).content == "partial"


async def test_a_legacy_function_call_finish_and_a_stop_after_calls_both_mean_tool_calls() -> None:
    for reason in ("function_call", "stop"):
        frames = await _answer(tool_stream([("c0", "list_dir", ["{}"])], finish=reason))
        assert _completion(frames).finish_reason == "tool_calls"


async def test_calls_cut_by_the_length_limit_are_not_handed_on() -> None:
    frames = await _answer(tool_stream([("c0", "fs_read", ['{"path": "a'])], finish="length"))
    assert [type(frame) for frame in frames] == [ResponseCompletedFrame]
    assert _completion(frames).finish_reason == "length"


async def test_usage_is_zero_when_the_server_sends_none() -> None:
    frames = await _answer([chunk({"content": "x"}), chunk({}, "stop"), DONE])
    assert _completion(frames).usage == Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([chunk({"content": "x"}), chunk({}, "stop")], id="no-done"),
        pytest.param([chunk({"content": "x"}), DONE], id="no-finish"),
        pytest.param([SseEvent(data='{"id": "x", "choices": [')], id="malformed-json"),
        pytest.param([SseEvent(data='{"choices": "text"}')], id="wrong-shape"),
        pytest.param(
            [SseEvent(data='{"choices": [{"delta": {"tool_calls": [{"id": "c"}]}}]}')], id="no-index"
        ),
        pytest.param(
            [SseEvent(data='{"choices": [{"index": 1, "delta": {"content": "b"}}]}')], id="second-choice"
        ),
        pytest.param([chunk({}, "tool_calls"), DONE], id="tool-calls-without-a-call"),
        pytest.param(
            [SseEvent(data='{"choices": [{"delta": {"content": "\\ud800"}}]}')], id="lone-surrogate"
        ),
        pytest.param(
            [
                chunk({"tool_calls": [{"index": 0, "function": {"name": "fs_read"}}]}),
                chunk({}, "tool_calls"),
                DONE,
            ],
            id="call-without-id",
        ),
        pytest.param([*text_stream("x"), chunk({"content": "y"})], id="after-done-is-ignored"),
    ],
)
async def test_a_broken_stream_is_a_typed_stream_error(events: list[SseEvent]) -> None:
    if events[-1].data != "[DONE]" and events[-2:-1] == [DONE]:
        # Nothing is read after [DONE]: the answer stands.
        assert _completion(await _answer(events)).content == "x"
        return
    error = await _error(events)
    assert error.code == MODEL_STREAM_INVALID
    assert not error.retryable


@pytest.mark.parametrize("arguments", ['{"path": ', "[1, 2]", '"a.txt"', "null", "12", '{"a": 1}{'])
async def test_arguments_that_are_not_a_json_object_are_a_typed_error(arguments: str) -> None:
    error = await _error(tool_stream([("c0", "fs_read", [arguments[:3], arguments[3:]])]))
    assert error.code == MODEL_TOOL_ARGUMENTS_INVALID


async def test_an_error_object_in_the_stream_is_a_provider_error_without_the_key() -> None:
    payload = {"error": {"message": f"bad key {KEY} used", "type": "invalid_request_error", "code": None}}
    error = await _error([chunk({"content": "x"}), SseEvent(data=json.dumps(payload))])
    assert error.code == MODEL_PROVIDER_ERROR
    assert KEY not in str(error)
    assert "invalid_request_error" in str(error)
    named = await _error([SseEvent(event="error", data='{"message": "overloaded"}')])
    assert (named.code, "overloaded" in str(named)) == (MODEL_PROVIDER_ERROR, True)


# ------------------------------------------------------------------ retries
async def test_an_error_before_the_first_frame_is_retried_and_output_comes_once() -> None:
    limited = ModelError(MODEL_RATE_LIMITED, "429", retryable=True, status=429, retry_after_s=0)
    dropped = ModelError(MODEL_SERVER_ERROR, "dropped", retryable=True)
    transport = ScriptedTransport(
        [limited, [chunk({"role": "assistant", "content": ""}), dropped], text_stream("ok")]
    )
    frames = await _frames(_model(transport), _request())
    assert frames[0] == TextDeltaFrame("ok")
    assert len(frames) == 2
    assert len(transport.requests) == 3
    assert transport.requests[0].body == transport.requests[2].body
    assert transport.closed == 2


async def test_an_error_after_the_first_frame_is_not_retried() -> None:
    dropped = ModelError(MODEL_SERVER_ERROR, "dropped", retryable=True)
    transport = ScriptedTransport([[chunk({"content": "Hel"}), dropped], text_stream("Hello")])
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as caught:
        await _collect(_model(transport), _request(), seen)
    assert caught.value is dropped
    assert seen == [TextDeltaFrame("Hel")]
    assert len(transport.requests) == 1


async def test_a_non_retryable_error_is_raised_at_once() -> None:
    transport = ScriptedTransport([[SseEvent(data="{")], text_stream("ok")])
    with pytest.raises(ModelError):
        await _frames(_model(transport), _request())
    assert len(transport.requests) == 1


# ------------------------------------------------------------------ cancellation
async def test_an_abort_raises_the_reason_and_closes_the_transport() -> None:
    transport = ScriptedTransport([[chunk({"content": "x"}), STALL]])
    controller = AbortController()
    reason = RuntimeError("stop")
    seen: list[ModelEvent] = []
    failures: list[BaseException] = []

    async def consume() -> None:
        try:
            await _collect(_model(transport), _request(signal=controller.signal), seen)
        except RuntimeError as error:
            failures.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        assert transport.closed == 0
        controller.abort(reason)
    assert failures == [reason]
    assert seen == [TextDeltaFrame("x")]
    assert transport.closed == 1


async def test_an_abort_during_a_retry_wait_ends_it_at_once() -> None:
    limited = ModelError(MODEL_RATE_LIMITED, "429", retryable=True, status=429, retry_after_s=30)
    transport = ScriptedTransport([limited, text_stream("late")])
    slow = RetryPolicy(max_attempts=2, base_delay_s=30, max_delay_s=30, max_total_s=60)
    controller = AbortController()
    failures: list[BaseException] = []

    async def consume() -> None:
        try:
            await _frames(_model(transport, retry=slow), _request(signal=controller.signal))
        except RuntimeError as error:
            failures.append(error)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await trio.testing.wait_all_tasks_blocked()
            controller.abort(RuntimeError("stop waiting"))
    assert [str(error) for error in failures] == ["stop waiting"]
    assert len(transport.requests) == 1


async def test_a_refusal_is_part_of_the_answer_text() -> None:
    frames = await _answer(
        [
            chunk({"role": "assistant", "content": None, "refusal": "I can"}),
            chunk({"refusal": "not."}, "stop"),
            DONE,
        ]
    )
    assert frames[:2] == [TextDeltaFrame("I can"), TextDeltaFrame("not.")]
    assert _completion(frames).content == "I cannot."


async def test_an_already_aborted_signal_sends_nothing() -> None:
    transport = ScriptedTransport([text_stream("ok")])
    controller = AbortController()
    controller.abort(ValueError("late"))
    with pytest.raises(ValueError, match="late"):
        await _frames(_model(transport), _request(signal=controller.signal))
    assert transport.requests == []


async def test_trio_cancellation_closes_the_stream_at_once() -> None:
    transport = ScriptedTransport([[chunk({"content": "x"}), STALL]])
    with trio.move_on_after(0.05) as scope:
        await _frames(_model(transport), _request())
    assert scope.cancelled_caught
    assert transport.closed == 1


# ------------------------------------------------------------------ configuration and secrets
def test_the_repr_shows_model_and_base_url_only() -> None:
    model = _model(ScriptedTransport([]))
    assert repr(model) == "OpenAIChatModel(model='gpt-4.1', base_url='https://api.example.test/v1')"


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"base_url": "http://api.example.test/v1"}, "plain http"),
        ({"base_url": "https://user:pw@api.example.test/v1"}, "user name or password"),
        ({"base_url": "https://api.example.test/v1?key=x"}, "query or fragment"),
        ({"base_url": "ftp://api.example.test/v1"}, "http:// or https://"),
        ({"base_url": "https://api.example.test:99999/v1"}, "port must be 1..65535"),
        ({"extra_headers": {"Authorization": "Bearer x"}}, "set by the adapter"),
        ({"extra_headers": {"X-Bad": "a\r\nInjected: 1"}}, "valid header value"),
        ({"max_tokens_field": "tokens"}, "max_tokens_field"),
    ],
)
def test_unusable_configuration_is_refused(options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ModelError, match=fragment.replace("(", r"\(").replace(")", r"\)")) as caught:
        _model(ScriptedTransport([]), **options)
    assert caught.value.code == MODEL_CONFIG_INVALID


@pytest.mark.parametrize("url", ["http://localhost:8000/v1", "http://127.0.0.1/v1", "http://[::1]:1234/v1"])
def test_plain_http_is_allowed_to_loopback_and_with_the_flag(url: str) -> None:
    assert _model(ScriptedTransport([]), base_url=url).base_url == url
    remote = _model(ScriptedTransport([]), base_url="http://gpu-box:8000/v1", allow_insecure_http=True)
    assert remote.base_url == "http://gpu-box:8000/v1"


async def test_the_key_shows_in_no_frame_and_no_error() -> None:
    transport = ScriptedTransport([text_stream("ok"), [SseEvent(data="{")]])
    model = _model(transport)
    frames = await _frames(model, _request())
    assert KEY not in repr(frames)
    assert KEY not in repr(model)
    with pytest.raises(ModelError) as caught:
        await _frames(model, _request())
    assert KEY not in f"{caught.value} {caught.value!r}"


# ------------------------------------------------------------------ properties
@given(
    arguments=st.dictionaries(
        st.text(max_size=8),
        st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none()),
        max_size=4,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    ascii_only=st.booleans(),
)
def test_any_split_of_the_arguments_gives_the_same_call(
    arguments: dict[str, str | int | bool | None], cuts: list[int], ascii_only: bool
) -> None:
    text = json.dumps(arguments, ensure_ascii=ascii_only)
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    fragments = [text[a:b] for a, b in itertools.pairwise(points)]
    frames = trio.run(_answer, tool_stream([("c0", "fs_read", fragments)]))
    assert frames[0] == ToolCallFrame(ToolCall(id="c0", name="fs.read", arguments=arguments))


# ------------------------------------------------------------------ through the runtime
async def test_a_run_through_the_runtime_calls_a_tool_and_answers() -> None:
    async def add(params: dict[str, object], context: object = None) -> object:
        return {"sum": int(params["a"]) + int(params["b"])}  # type: ignore[call-overload]

    transport = ScriptedTransport(
        [
            tool_stream([("call_1", "calc_add", ['{"a": 2,', ' "b": 3}'])], text=["Adding."]),
            text_stream("The sum is ", "5."),
        ]
    )
    model = _model(transport)
    run_input = make_input(model, tools=registry(pure_tool("calc.add", add)), input="2+3?")
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert error is None
    assert types(events)[-2:] == ["turn.completed", "agent.stopped"]
    assert d(events[-1]).status == "completed"
    (call,) = [d(event) for event in events if event.type == "tool.call"]
    assert (call.tool, call.input, call.model_call_id) == ("calc.add", {"a": 2, "b": 3}, "call_1")
    (result,) = [d(event) for event in events if event.type == "tool.result"]
    assert (result.ok, result.output) == (True, {"sum": 5})
    second = transport.requests[1].json()
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "calc_add"
    assert second["messages"][-1]["role"] == "tool"
    assert [d(event).content for event in events if event.type == "message.completed"][-1] == "The sum is 5."
