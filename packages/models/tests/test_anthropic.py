"""AnthropicModel on an in-memory transport: the exact request it sends, the frames it makes
of wire-exact streams, its errors, retries, cancellation and secrecy."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncGenerator
from typing import Any, cast

import pytest
import trio
from anthropic_streams import (
    HANG,
    Item,
    ScriptedTransport,
    chain,
    event,
    message_end,
    message_start,
    text_block,
    tool_block,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel.models import (
    AssistantMessage,
    ChatMessage,
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
from harness_kernel.runtime import MinimalAgentRuntime, RunInput
from harness_kernel.store import MemoryEventStore
from harness_models import (
    MODEL_CONFIG_INVALID,
    MODEL_CONNECTION_FAILED,
    MODEL_OVERLOADED,
    MODEL_PROVIDER_ERROR,
    MODEL_RATE_LIMITED,
    MODEL_SERVER_ERROR,
    MODEL_STREAM_INVALID,
    MODEL_TOOL_ARGUMENTS_INVALID,
    ModelError,
)
from harness_models._anthropic import AnthropicModel
from harness_models._wire import ApiKey, RetryPolicy, SseEvent
from harness_tools import PureBoundary, ToolRegistry, create_bounded_tool, create_tool
from harness_workspace import AbortController

SECRET = "sk-ant-test-0123456789abcdef"
NO_WAIT = RetryPolicy(max_attempts=3, base_delay_s=0, max_delay_s=0)
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}


def model_on(transport: ScriptedTransport, **options: Any) -> AnthropicModel:
    options.setdefault("retry", NO_WAIT)
    return AnthropicModel("claude-test", api_key=ApiKey(SECRET), transport=transport, **options)


def ask(*messages: ChatMessage, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=messages or (UserMessage(content="hello"),), **fields)


async def collect(model: AnthropicModel, request: ModelRequest) -> list[ModelEvent]:
    return [frame async for frame in model.stream(request)]


async def failure(model: AnthropicModel, request: ModelRequest) -> tuple[list[ModelEvent], ModelError]:
    frames: list[ModelEvent] = []

    async def pull() -> None:
        async for frame in model.stream(request):
            frames.append(frame)

    with pytest.raises(ModelError) as caught:
        await pull()
    return frames, caught.value


def completion(frames: list[ModelEvent]) -> CompletionResponse:
    last = frames[-1]
    assert type(last) is ResponseCompletedFrame
    return last.response


def plain(*pieces: str, stop: str = "end_turn") -> list[Item]:
    return chain(message_start(), text_block(0, *pieces), message_end(stop))


# ------------------------------------------------------------------ the request
async def test_a_text_request_is_posted_to_messages_with_the_documented_headers_and_body() -> None:
    transport = ScriptedTransport([plain("hi")])
    await collect(model_on(transport, base_url="https://example.test/"), ask())
    [sent] = transport.requests
    assert sent.url == "https://example.test/v1/messages"
    assert sent.headers == {
        "x-api-key": SECRET,
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
        "accept": "text/event-stream",
    }
    assert sent.json() == {
        "model": "claude-test",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "stream": True,
    }


async def test_tools_are_advertised_under_their_provider_safe_aliases() -> None:
    transport = ScriptedTransport([plain("ok")])
    tools = (
        ToolDefinition(name="fs.read", description="Read a file", input_schema=SCHEMA),
        ToolDefinition(name="grep", description="Search", input_schema={"type": "object"}),
    )
    await collect(model_on(transport), ask(tools=tools, max_tokens=100))
    body: Any = transport.requests[0].json()
    assert body["tools"] == [
        {"name": "fs_read", "description": "Read a file", "input_schema": SCHEMA},
        {"name": "grep", "description": "Search", "input_schema": {"type": "object"}},
    ]
    assert body["max_tokens"] == 100


async def test_the_history_maps_tool_calls_and_results_and_merges_turns_as_the_api_requires() -> None:
    transport = ScriptedTransport([plain("done")])
    history = (
        SystemMessage(content="Be brief."),
        UserMessage(content="read two files"),
        AssistantMessage(
            content="Reading.",
            tool_calls=(
                ToolCall(id="toolu_1", name="fs.read", arguments={"path": "a"}),
                ToolCall(id="toolu_2", name="fs.read", arguments={"path": "b"}),
            ),
        ),
        ToolMessage(content="A", name="fs.read", tool_call_id="toolu_1"),
        ToolMessage(content="B", name="fs.read", tool_call_id="toolu_2"),
        UserMessage(content="and now?"),
        AssistantMessage(content="", tool_calls=(ToolCall(id="toolu_3", name="old.tool", arguments={}),)),
        ToolMessage(content="gone", name="old.tool", tool_call_id="toolu_3"),
    )
    tools = (ToolDefinition(name="fs.read", description="Read", input_schema=SCHEMA),)
    await collect(model_on(transport), ask(*history, tools=tools, system="You are a harness."))
    body: Any = transport.requests[0].json()
    assert body["system"] == "You are a harness.\n\nBe brief."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read two files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "fs_read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_2", "name": "fs_read", "input": {"path": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B"},
                {"type": "text", "text": "and now?"},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_3", "name": "old_tool", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "gone"}]},
    ]
    assert [tool["name"] for tool in body["tools"]] == ["fs_read"]


async def test_provider_options_add_keys_but_never_replace_what_the_adapter_owns() -> None:
    transport = ScriptedTransport([plain("a"), plain("b")])
    options: dict[str, Any] = {
        "temperature": 0.2,
        "model": "other",
        "stream": False,
        "system": "sneaky",
        "messages": [],
        "tools": [],
        "max_tokens": 77,
    }
    model = model_on(transport)
    await collect(model, ask(provider_options=options))
    await collect(model, ask(provider_options=options, max_tokens=10))
    first: Any = transport.requests[0].json()
    second: Any = transport.requests[1].json()
    assert first == {
        "model": "claude-test",
        "max_tokens": 77,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "stream": True,
        "temperature": 0.2,
    }
    assert second["max_tokens"] == 10


async def test_extra_headers_are_sent_but_cannot_replace_the_adapters_own() -> None:
    transport = ScriptedTransport([plain("a")])
    await collect(model_on(transport, extra_headers={"anthropic-beta": "x"}), ask())
    assert transport.requests[0].headers["anthropic-beta"] == "x"
    for name in ("X-Api-Key", "anthropic-version", "Accept", "authorization"):
        with pytest.raises(ModelError) as caught:
            model_on(transport, extra_headers={name: "evil"})
        assert caught.value.code == MODEL_CONFIG_INVALID
    # A value that would split into a second header, a name that is no header name, framing.
    for extra in ({"X-Note": "a\r\nx-api-key: stolen"}, {"bad name": "x"}, {"Host": "evil"}):
        with pytest.raises(ModelError) as caught:
            model_on(transport, extra_headers=extra)
        assert caught.value.code == MODEL_CONFIG_INVALID
        assert "stolen" not in caught.value.message


@pytest.mark.parametrize(
    "options",
    [{"max_tokens": 0}, {"max_tokens": True}, {"api_key": SECRET}, {"base_url": " "}, {"model": ""}],
)
def test_an_unusable_configuration_is_refused(options: dict[str, Any]) -> None:
    settings: dict[str, Any] = {"model": "claude-test", "api_key": ApiKey(SECRET), **options}
    with pytest.raises(ModelError) as caught:
        AnthropicModel(**settings)
    assert caught.value.code == MODEL_CONFIG_INVALID
    assert SECRET not in str(caught.value)


async def test_without_a_key_no_key_header_is_sent() -> None:
    transport = ScriptedTransport([plain("a")])
    await collect(AnthropicModel("m", api_key=None, transport=transport), ask())
    assert "x-api-key" not in transport.requests[0].headers


# ------------------------------------------------------------------ the stream
async def test_plain_text_streams_as_deltas_then_one_completion() -> None:
    transport = ScriptedTransport([plain("Hello", "", " world")])
    frames = await collect(model_on(transport), ask())
    assert frames == [
        TextDeltaFrame("Hello"),
        TextDeltaFrame(" world"),
        ResponseCompletedFrame(
            CompletionResponse(
                id="msg_01",
                content="Hello world",
                tool_calls=(),
                usage=Usage(prompt_tokens=25, completion_tokens=15, total_tokens=40),
                finish_reason="stop",
            )
        ),
    ]
    assert transport.closed == 1


async def test_one_tool_use_becomes_one_call_with_its_canonical_name() -> None:
    stream = chain(
        message_start(),
        text_block(0, "Let me look."),
        tool_block(1, "toolu_01", "fs_read", "", '{"path": ', '"README.md"}'),
        message_end("tool_use", 40),
    )
    tools = (ToolDefinition(name="fs.read", description="Read", input_schema=SCHEMA),)
    frames = await collect(model_on(ScriptedTransport([stream])), ask(tools=tools))
    call = ToolCall(id="toolu_01", name="fs.read", arguments={"path": "README.md"})
    assert frames[:2] == [TextDeltaFrame("Let me look."), ToolCallFrame(call)]
    response = completion(frames)
    assert response.tool_calls == (call,)
    assert response.finish_reason == "tool_calls"
    assert response.content == "Let me look."


async def test_two_tool_uses_assemble_fragments_split_inside_a_string_and_an_escape() -> None:
    stream = chain(
        message_start(),
        tool_block(0, "toolu_a", "fs_read", '{"pa', 'th": "dir/fi', 'le.txt"}'),
        tool_block(1, "toolu_b", "fs_write", '{"text": "caf\\u', "00e9 \\ud83d", '\\ude00", "n": 1}'),
        message_end("tool_use"),
    )
    tools = (
        ToolDefinition(name="fs.read", description="r", input_schema=SCHEMA),
        ToolDefinition(name="fs.write", description="w", input_schema=SCHEMA),
    )
    frames = await collect(model_on(ScriptedTransport([stream])), ask(tools=tools))
    assert frames[:2] == [
        ToolCallFrame(ToolCall(id="toolu_a", name="fs.read", arguments={"path": "dir/file.txt"})),
        ToolCallFrame(ToolCall(id="toolu_b", name="fs.write", arguments={"text": "café 😀", "n": 1})),
    ]
    assert len(frames) == 3


async def test_a_tool_use_without_input_fragments_gets_an_empty_object() -> None:
    stream = chain(message_start(), tool_block(0, "toolu_1", "status"), message_end("tool_use"))
    tools = (ToolDefinition(name="status", description="s", input_schema={"type": "object"}),)
    frames = await collect(model_on(ScriptedTransport([stream])), ask(tools=tools))
    assert frames[0] == ToolCallFrame(ToolCall(id="toolu_1", name="status", arguments={}))


async def test_a_name_the_request_never_offered_is_marked_unknown() -> None:
    stream = chain(message_start(), tool_block(0, "toolu_1", "fs_read", "{}"), message_end("tool_use"))
    tools = (ToolDefinition(name="fs.write", description="w", input_schema=SCHEMA),)
    frames = await collect(model_on(ScriptedTransport([stream])), ask(tools=tools))
    assert frames[0] == ToolCallFrame(ToolCall(id="toolu_1", name="?fs_read", arguments={}))


async def test_usage_sums_cached_prompt_tokens_and_takes_the_last_cumulative_count() -> None:
    stream = chain(
        message_start(input_tokens=10, cache_creation_input_tokens=5, cache_read_input_tokens=100),
        text_block(0, "x"),
        [
            event("message_delta", delta={"stop_reason": None}, usage={"output_tokens": 3}),
            event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 9}),
            event("message_stop"),
        ],
    )
    response = completion(await collect(model_on(ScriptedTransport([stream])), ask()))
    assert response.usage == Usage(prompt_tokens=115, completion_tokens=9, total_tokens=124)


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "error"),
        ("pause_turn", "error"),
        ("a_reason_from_the_future", "error"),
    ],
)
async def test_every_stop_reason_maps_to_a_kernel_finish(stop_reason: str, finish: str) -> None:
    frames = await collect(model_on(ScriptedTransport([plain("partial", stop=stop_reason)])), ask())
    response = completion(frames)
    assert (response.finish_reason, response.content, response.tool_calls) == (finish, "partial", ())


async def test_a_call_cut_short_by_the_length_limit_is_never_handed_on() -> None:
    stream = chain(message_start(), tool_block(0, "toolu_1", "fs_read", '{"pa'), message_end("max_tokens"))
    frames = await collect(model_on(ScriptedTransport([stream])), ask())
    assert len(frames) == 1
    assert completion(frames).finish_reason == "length"


async def test_pings_unknown_events_and_unknown_blocks_are_ignored() -> None:
    stream = chain(
        [event("ping")],
        message_start(),
        [event("ping"), event("a_new_event", payload={"x": 1})],
        [
            event("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
            event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hmm"}),
            event("content_block_stop", index=0),
        ],
        text_block(1, "answer"),
        [event("ping")],
        message_end(),
    )
    frames = await collect(model_on(ScriptedTransport([stream])), ask())
    assert frames[0] == TextDeltaFrame("answer")
    assert completion(frames).content == "answer"


@pytest.mark.parametrize(
    ("error_type", "code", "retryable"),
    [
        ("overloaded_error", MODEL_OVERLOADED, True),
        ("api_error", MODEL_SERVER_ERROR, True),
        ("rate_limit_error", MODEL_RATE_LIMITED, True),
        ("invalid_request_error", MODEL_PROVIDER_ERROR, False),
    ],
)
async def test_an_error_event_mid_stream_is_a_typed_error_and_not_retried_after_text(
    error_type: str, code: str, retryable: bool
) -> None:
    stream = chain(
        message_start(),
        text_block(0, "partial"),
        [event("error", error={"type": error_type, "message": "Overloaded"})],
    )
    transport = ScriptedTransport([stream, plain("never")])
    frames, error = await failure(model_on(transport), ask())
    assert frames == [TextDeltaFrame("partial")]
    assert (error.code, error.retryable) == (code, retryable)
    assert len(transport.requests) == 1
    assert transport.closed == 1


async def test_a_retryable_error_event_before_the_first_frame_is_retried() -> None:
    overloaded = chain(message_start(), [event("error", error={"type": "overloaded_error", "message": "x"})])
    transport = ScriptedTransport([overloaded, plain("fine")])
    frames = await collect(model_on(transport), ask())
    assert completion(frames).content == "fine"
    assert len(transport.requests) == 2
    assert transport.requests[0].body == transport.requests[1].body


async def test_an_error_status_before_the_stream_is_retried_and_a_drop_after_a_frame_is_not() -> None:
    refused = ModelError(MODEL_RATE_LIMITED, "429", retryable=True, status=429)
    dropped = ModelError(MODEL_CONNECTION_FAILED, "connection dropped", retryable=True)
    transport = ScriptedTransport([refused, chain(message_start(), text_block(0, "half")[:2], [dropped])])
    frames, error = await failure(model_on(transport), ask())
    assert frames == [TextDeltaFrame("half")]
    assert error is dropped
    assert len(transport.requests) == 2


async def test_retries_stop_at_the_policys_attempts() -> None:
    refused = ModelError(MODEL_OVERLOADED, "529", retryable=True, status=529)
    transport = ScriptedTransport([refused, refused, refused, plain("unreached")])
    _, error = await failure(model_on(transport), ask())
    assert error is refused
    assert len(transport.requests) == 3


@pytest.mark.parametrize(
    "data",
    [
        "{not json",
        '"a string"',
        '{"no_type": 1}',
        '{"type": "content_block_delta", "index": "zero", "delta": {"type": "text_delta", "text": "x"}}',
        '{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": -1}}',
    ],
)
async def test_malformed_event_data_is_an_invalid_stream(data: str) -> None:
    stream = chain(message_start(), [SseEvent(event="content_block_delta", data=data)], plain("x")[1:])
    _, error = await failure(model_on(ScriptedTransport([stream])), ask())
    assert error.code == MODEL_STREAM_INVALID
    assert not error.retryable


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(chain(message_start(), text_block(0, "cut")), id="no-message-stop"),
        pytest.param(chain(text_block(0, "x"), message_end()), id="no-message-start"),
        pytest.param(chain(message_start(), text_block(0, "x")[:2], message_end()), id="block-left-open"),
        pytest.param(chain(message_start(), text_block(0, "x"), message_end(None)), id="no-stop-reason"),
        pytest.param(chain(message_start(), message_end("tool_use")), id="tool-use-without-a-block"),
        pytest.param(
            chain(message_start(), tool_block(0, "t", "n", "{}"), message_end("end_turn")),
            id="a-block-the-stop-reason-contradicts",
        ),
        pytest.param(
            chain(
                message_start(),
                [event("content_block_delta", index=3, delta={"type": "text_delta", "text": "x"})],
            ),
            id="delta-for-no-block",
        ),
        pytest.param(
            chain(message_start(), tool_block(0, "t", "n")[:1], [text_block(0, "x")[1]]),
            id="text-delta-on-a-tool-block",
        ),
        pytest.param(chain(message_start(), message_start()), id="message-start-twice"),
    ],
)
async def test_a_stream_out_of_the_documented_order_is_invalid(stream: list[Item]) -> None:
    _, error = await failure(model_on(ScriptedTransport([stream])), ask())
    assert error.code == MODEL_STREAM_INVALID


@pytest.mark.parametrize(
    "fragments", [('["a", 1]',), ("42",), ('"text"',), ("null",), ('{"a": ',), ("{} {}",)]
)
async def test_tool_input_that_is_not_one_json_object_is_a_typed_error(fragments: tuple[str, ...]) -> None:
    stream = chain(message_start(), tool_block(0, "toolu_1", "fs_read", *fragments), message_end("tool_use"))
    _, error = await failure(model_on(ScriptedTransport([stream])), ask())
    assert error.code == MODEL_TOOL_ARGUMENTS_INVALID
    assert "toolu_1" in error.message


# ------------------------------------------------------------------ cancellation and secrecy
async def test_an_aborted_signal_closes_the_stream_and_raises_its_reason() -> None:
    transport = ScriptedTransport([chain(message_start(), text_block(0, "first")[:2], [HANG])])
    controller = AbortController()
    reason = RuntimeError("operator stopped the run")
    frames: list[ModelEvent] = []

    async def consume() -> None:
        async for frame in model_on(transport).stream(ask(signal=controller.signal)):
            frames.append(frame)
            controller.abort(reason)

    with pytest.raises(RuntimeError) as caught:
        await consume()
    assert caught.value is reason
    assert frames == [TextDeltaFrame("first")]
    assert (transport.opened, transport.closed) == (1, 1)


async def test_a_signal_aborted_before_the_call_sends_nothing() -> None:
    transport = ScriptedTransport([plain("x")])
    controller = AbortController()
    controller.abort("late")
    with pytest.raises(RuntimeError, match="late"):
        await collect(model_on(transport), ask(signal=controller.signal))
    assert transport.requests == []


async def test_trio_cancellation_closes_the_stream_at_once() -> None:
    transport = ScriptedTransport([chain(message_start(), [HANG])])
    with trio.move_on_after(0.05) as scope:
        await collect(model_on(transport), ask())
    assert scope.cancelled_caught
    assert (transport.opened, transport.closed) == (1, 1)


async def test_leaving_the_stream_early_closes_the_transport() -> None:
    transport = ScriptedTransport([plain("a", "b", "c")])
    stream = cast("AsyncGenerator[ModelEvent, None]", model_on(transport).stream(ask()))
    assert await anext(stream) == TextDeltaFrame("a")
    await stream.aclose()
    assert transport.closed == 1


async def test_the_key_shows_nowhere_but_its_header() -> None:
    error_text = f"bad key {SECRET[:6]}"
    stream = chain(
        message_start(), [event("error", error={"type": "authentication_error", "message": error_text})]
    )
    transport = ScriptedTransport([plain("hi"), stream])
    model = model_on(transport)
    frames = await collect(model, ask())
    _, error = await failure(model, ask())
    assert SECRET not in repr(model)
    assert SECRET not in repr(frames)
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert all(SECRET not in request.body.decode() for request in transport.requests)


# ------------------------------------------------------------------ properties
@st.composite
def splits(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(min_value=1, max_value=max(1, len(text) - 1)), max_size=12)))
    bounds = [0, *(c for c in cuts if c < len(text)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    ensure_ascii=st.booleans(),
    data=st.data(),
)
async def test_any_split_of_the_input_json_gives_the_same_call(
    arguments: dict[str, Any], ensure_ascii: bool, data: st.DataObject
) -> None:
    wire = json.dumps(arguments, ensure_ascii=ensure_ascii)
    fragments = data.draw(splits(wire))
    stream = chain(message_start(), tool_block(0, "toolu_p", "fs_read", *fragments), message_end("tool_use"))
    tools = (ToolDefinition(name="fs.read", description="r", input_schema=SCHEMA),)
    frames = await collect(model_on(ScriptedTransport([stream])), ask(tools=tools))
    assert frames[0] == ToolCallFrame(ToolCall(id="toolu_p", name="fs.read", arguments=arguments))


# ------------------------------------------------------------------ through the runtime
async def test_a_tool_call_then_an_answer_complete_a_run_through_the_runtime() -> None:
    seen: list[object] = []

    async def read(params: object, context: object = None) -> object:
        seen.append(params)
        return "contents of a"

    tool = create_tool(name="fs.read", description="Read a file", parameters=dict[str, object], execute=read)
    transport = ScriptedTransport(
        [
            chain(
                message_start("msg_1"),
                tool_block(0, "toolu_1", "fs_read", '{"path":', ' "a"}'),
                message_end("tool_use"),
            ),
            chain(message_start("msg_2"), text_block(0, "It says ", "hi."), message_end("end_turn")),
        ]
    )
    run_input = RunInput(
        run_id="run-1",
        session_id="sess-1",
        turn_id="turn-1",
        input="read a",
        model="claude-test",
        model_adapter=model_on(transport),
        event_store=MemoryEventStore(),
        tools=ToolRegistry([create_bounded_tool(tool, PureBoundary())]),
    )
    events: list[Any] = []
    async with MinimalAgentRuntime().run(run_input) as stream:
        async for item in stream:
            events.append(item)
    assert events[-1].type == "agent.stopped"
    assert events[-1].data.status == "completed"
    assert seen == [{"path": "a"}]
    assert [e.data.tool for e in events if e.type == "tool.call"] == ["fs.read"]
    assert "".join(e.data.delta for e in events if e.type == "message.delta") == "It says hi."
    second: Any = transport.requests[1].json()
    assert second["messages"][-2]["content"][-1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "fs_read",
        "input": {"path": "a"},
    }
    assert second["messages"][-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": '"contents of a"'}],
    }
