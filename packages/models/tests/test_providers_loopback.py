"""Both adapters over real HTTP: HttpSseTransport against the loopback fake provider.

The adapters' own tests pin the wire with an in-memory transport; these prove the whole
path — headers and body on the socket, SSE framing split at awkward bytes, an error status
retried after its ``Retry-After``, a stream cut mid-event, a stalled stream cancelled — and
the model choice by name (``model_factory``) that agent-server and harness-eval use.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from fake_provider import Reply, fake_provider, sse

from harness_kernel.models import (
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    ToolCallFrame,
    ToolDefinition,
    UserMessage,
)
from harness_models import (
    MODEL_AUTH_FAILED,
    MODEL_CONNECTION_FAILED,
    AnthropicModel,
    ApiKey,
    HttpSseTransport,
    ModelError,
    ModelSpec,
    OpenAIChatModel,
    RetryPolicy,
    Timeouts,
    model_factory,
    parse_model_spec,
)

KEY = "sk-loopback-0123456789"
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.0, max_delay_s=1.0, max_total_s=5.0)
TOOLS = (ToolDefinition(name="fs.read", description="read", input_schema={"type": "object"}),)


def request(**fields: Any) -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content="hi"),), **fields)


async def collect(stream: Any) -> list[ModelEvent]:
    return [frame async for frame in stream]


def split_everywhere(body: bytes, size: int) -> list[bytes]:
    return [body[index : index + size] for index in range(0, len(body), size)]


def openai_chunk(delta: dict[str, object], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]})


OPENAI_TOOL_STREAM = sse(
    openai_chunk({"role": "assistant", "content": "Réading "}),
    openai_chunk({"content": "the file"}),
    openai_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                  "function": {"name": "fs_read", "arguments": '{"pa'}}]}),
    openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a/é.txt"}'}}]}),
    openai_chunk({}, "tool_calls"),
    json.dumps({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5,
                                                            "total_tokens": 12}}),
    "[DONE]",
)  # fmt: skip


@pytest.mark.parametrize("size", [1, 3, 7, 64, 10_000])
async def test_openai_over_http_with_the_stream_split_anywhere(size: int) -> None:
    async with fake_provider() as server, HttpSseTransport(Timeouts()) as transport:
        server.script(Reply(chunks=split_everywhere(OPENAI_TOOL_STREAM, size)))
        model = OpenAIChatModel(
            "gpt-test", api_key=ApiKey(KEY), base_url=server.url + "/v1", transport=transport
        )
        frames = await collect(model.stream(request(tools=TOOLS)))
    assert [frame for frame in frames if type(frame) is TextDeltaFrame] == [
        TextDeltaFrame("Réading "),
        TextDeltaFrame("the file"),
    ]
    (call,) = [frame.call for frame in frames if type(frame) is ToolCallFrame]
    assert (call.id, call.name, call.arguments) == ("call_1", "fs.read", {"path": "a/é.txt"})
    completed = frames[-1]
    assert type(completed) is ResponseCompletedFrame
    assert completed.response.finish_reason == "tool_calls"
    assert completed.response.usage.total_tokens == 12
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.header("authorization") == f"Bearer {KEY}"
    body: Any = sent.json()
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert [tool["function"]["name"] for tool in body["tools"]] == ["fs_read"]


ANTHROPIC_STREAM = sse(
    ("message_start", json.dumps({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
        "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 1}}})),
    ("content_block_start", json.dumps({"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}})),
    ("ping", json.dumps({"type": "ping"})),
    ("content_block_delta", json.dumps({"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": "Bonjour "}})),
    ("content_block_stop", json.dumps({"type": "content_block_stop", "index": 0})),
    ("content_block_start", json.dumps({"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "toolu_1", "name": "fs_read", "input": {}}})),
    ("content_block_delta", json.dumps({"type": "content_block_delta", "index": 1, "delta": {
        "type": "input_json_delta", "partial_json": '{"path": "\\u00e9'}})),
    ("content_block_delta", json.dumps({"type": "content_block_delta", "index": 1,
                                        "delta": {"type": "input_json_delta", "partial_json": '.txt"}'}})),
    ("content_block_stop", json.dumps({"type": "content_block_stop", "index": 1})),
    ("message_delta", json.dumps({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                  "usage": {"output_tokens": 15}})),
    ("message_stop", json.dumps({"type": "message_stop"})),
)  # fmt: skip


@pytest.mark.parametrize("size", [1, 5, 4096])
async def test_anthropic_over_http_with_the_stream_split_anywhere(size: int) -> None:
    async with fake_provider() as server, HttpSseTransport(Timeouts()) as transport:
        server.script(Reply(chunks=split_everywhere(ANTHROPIC_STREAM, size)))
        model = AnthropicModel("claude-test", api_key=ApiKey(KEY), base_url=server.url, transport=transport)
        frames = await collect(model.stream(request(tools=TOOLS, system="be brief")))
    assert frames[0] == TextDeltaFrame("Bonjour ")
    (call,) = [frame.call for frame in frames if type(frame) is ToolCallFrame]
    assert (call.id, call.name, call.arguments) == ("toolu_1", "fs.read", {"path": "é.txt"})
    completed = frames[-1]
    assert type(completed) is ResponseCompletedFrame
    assert (completed.response.finish_reason, completed.response.usage.prompt_tokens) == ("tool_calls", 9)
    (sent,) = server.requests
    assert sent.path == "/v1/messages"
    assert sent.header("x-api-key") == KEY
    assert sent.header("anthropic-version") == "2023-06-01"
    body: Any = sent.json()
    assert (body["model"], body["system"], body["stream"]) == ("claude-test", "be brief", True)
    assert body["tools"][0]["name"] == "fs_read"


async def test_a_429_is_retried_after_its_retry_after_and_the_answer_comes_once() -> None:
    limited = Reply(status=429, headers=(("content-type", "application/json"), ("retry-after-ms", "20")),
                    chunks=[b'{"error": {"message": "slow down", "type": "rate_limit"}}'])  # fmt: skip
    answer = Reply(chunks=[sse(openai_chunk({"content": "ok"}), openai_chunk({}, "stop"), "[DONE]")])
    async with fake_provider() as server, HttpSseTransport(Timeouts()) as transport:
        server.script(limited, answer)
        model = OpenAIChatModel(
            "m", api_key=None, base_url=server.url + "/v1", transport=transport, retry=FAST_RETRY
        )
        started = trio.current_time()
        frames = await collect(model.stream(request()))
        waited = trio.current_time() - started
    assert [frame for frame in frames if type(frame) is TextDeltaFrame] == [TextDeltaFrame("ok")]
    assert len(server.requests) == 2
    assert waited >= 0.02


async def test_a_stream_cut_mid_event_after_a_frame_fails_without_a_retry() -> None:
    body = sse(openai_chunk({"content": "partial"}), openai_chunk({"content": "never"}))
    async with fake_provider() as server, HttpSseTransport(Timeouts()) as transport:
        server.script(Reply(chunks=[body], cut_after=len(body) - 10), Reply(chunks=[b""]))
        model = OpenAIChatModel("m", api_key=None, base_url=server.url + "/v1", transport=transport,
                                retry=FAST_RETRY)  # fmt: skip
        seen: list[ModelEvent] = []

        async def consume() -> None:
            async for frame in model.stream(request()):
                seen.append(frame)

        with pytest.raises(ModelError) as caught:
            await consume()
    assert seen == [TextDeltaFrame("partial")]
    assert caught.value.code == MODEL_CONNECTION_FAILED
    assert len(server.requests) == 1  # never retried once a frame was handed on


async def test_a_refused_key_is_a_typed_error_that_never_shows_the_key() -> None:
    echoed = (
        f'{{"error": {{"message": "Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}}}'
    )
    async with fake_provider() as server, HttpSseTransport(Timeouts()) as transport:
        server.script(
            Reply(status=401, headers=(("content-type", "application/json"),), chunks=[echoed.encode()])
        )
        model = OpenAIChatModel("m", api_key=ApiKey(KEY), base_url=server.url + "/v1", transport=transport)
        with pytest.raises(ModelError) as caught:
            await collect(model.stream(request()))
    assert caught.value.code == MODEL_AUTH_FAILED
    assert caught.value.retryable is False
    assert KEY not in str(caught.value)
    assert KEY not in repr(caught.value)
    assert len(server.requests) == 1


async def test_cancelling_a_stalled_stream_closes_the_connection_at_once() -> None:
    async with fake_provider() as server, HttpSseTransport(Timeouts()) as transport:
        server.script(Reply(chunks=[sse(openai_chunk({"content": "a"}))], stall=True))
        model = OpenAIChatModel("m", api_key=None, base_url=server.url + "/v1", transport=transport)
        with trio.move_on_after(0.3):
            await collect(model.stream(request()))
        with trio.fail_after(2):
            await server.connections[0].closed.wait()


# ------------------------------------------------------------------ choosing a model by name


def test_a_model_is_chosen_by_name_and_checked_at_once() -> None:
    assert parse_model_spec("openai:gpt-4.1") == ("openai", "gpt-4.1")
    assert parse_model_spec("openai-compatible:qwen2.5:7b") == ("openai-compatible", "qwen2.5:7b")
    for bad in ("fake", "gpt-4", "azure:x", "openai:", "openai:a b"):
        with pytest.raises(ModelError, match=r"MODEL|model|choose"):
            parse_model_spec(bad)


def test_a_missing_key_names_its_variable() -> None:
    with pytest.raises(ModelError) as caught:
        model_factory(ModelSpec(provider="anthropic", model="claude"), {})
    assert "ANTHROPIC_API_KEY" in caught.value.message
    with pytest.raises(ModelError) as caught:
        model_factory(ModelSpec(provider="openai", model="m", api_key_env="MY_KEY"), {"OPENAI_API_KEY": KEY})
    assert "MY_KEY" in caught.value.message
    assert KEY not in caught.value.message


def test_a_compatible_server_needs_a_base_url_and_plain_http_only_on_loopback() -> None:
    with pytest.raises(ModelError, match="base URL"):
        model_factory(ModelSpec(provider="openai-compatible", model="m"), {})
    with pytest.raises(ModelError, match="loopback"):
        model_factory(ModelSpec(provider="openai-compatible", model="m", base_url="http://10.0.0.8/v1"), {})
    remote = ModelSpec(
        provider="openai-compatible", model="m", base_url="http://10.0.0.8/v1", allow_insecure_http=True
    )
    assert isinstance(model_factory(remote, {})(), OpenAIChatModel)
    local = model_factory(
        ModelSpec(provider="openai-compatible", model="m", base_url="http://127.0.0.1:11434/v1"), {}
    )
    first, second = local(), local()
    assert isinstance(first, OpenAIChatModel)
    assert first is not second
    assert KEY not in repr(model_factory(ModelSpec(provider="openai", model="m"), {"OPENAI_API_KEY": KEY})())


# ------------------------------------------------------------------ the kernel's own tool definitions


async def _frozen_definitions() -> tuple[ToolDefinition, ...]:
    """The definitions the runtime really sends: frozen JSON (FrozenDict, FrozenList) schemas."""
    from harness_kernel.models import FakeModel, ScriptedTurn  # noqa: PLC0415
    from harness_kernel.runtime import MinimalAgentRuntime, RunInput  # noqa: PLC0415
    from harness_kernel.store import MemoryEventStore  # noqa: PLC0415
    from harness_tools import ToolRegistry, create_development_tools  # noqa: PLC0415
    from harness_workspace import MemoryWorkspace  # noqa: PLC0415

    model = FakeModel([ScriptedTurn(content="ok")])
    run_input = RunInput(
        run_id="r",
        session_id="s",
        turn_id="t",
        input="hi",
        model="m",
        model_adapter=model,
        event_store=MemoryEventStore(),
        tools=ToolRegistry(create_development_tools("/repo")),
        workspace=MemoryWorkspace(),
    )
    async for _ in MinimalAgentRuntime().run(run_input):
        pass
    tools = model.requests[0].tools
    assert tools is not None
    return tuple(tools)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_development_tools_schemas_as_the_runtime_sends_them_reach_the_wire(provider: str) -> None:
    # Regression: FrozenList (a schema's "required") was not encodable by the OpenAI wire.
    definitions = await _frozen_definitions()
    stream = (
        sse(openai_chunk({"content": "ok"}), openai_chunk({}, "stop"), "[DONE]")
        if provider == "openai"
        else ANTHROPIC_STREAM
    )
    async with fake_provider() as server, HttpSseTransport(Timeouts()) as transport:
        server.script(Reply(chunks=[stream]))
        model: OpenAIChatModel | AnthropicModel
        if provider == "openai":
            model = OpenAIChatModel("m", api_key=None, base_url=server.url + "/v1", transport=transport)
        else:
            model = AnthropicModel("m", api_key=None, base_url=server.url, transport=transport)
        await collect(model.stream(request(tools=definitions)))
        body: Any = server.requests[0].json()
    schemas = (
        [tool["function"]["parameters"] for tool in body["tools"]]
        if provider == "openai"
        else [tool["input_schema"] for tool in body["tools"]]
    )
    assert [schema.get("required") for schema in schemas] == [
        ["path"],
        ["path"],
        ["path", "contents"],
        ["argv"],
        [],
    ]
