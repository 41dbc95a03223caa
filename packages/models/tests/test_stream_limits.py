"""One response is bounded, and never carries the adapter's key: both adapters over real HTTP.

A loopback provider streams without end (text, tool-call arguments, or keep-alive comments);
each adapter must fail with ``MODEL_STREAM_TOO_LARGE`` once the limit is crossed, having
handed on no more than the limit, after one request (it is not retried). A provider that
echoes the key, however it splits it over deltas, hands on ``[REDACTED]`` instead.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from fake_provider import Reply, fake_provider, sse
from hypothesis import given
from hypothesis import strategies as st

from harness_kernel.events import REDACTED
from harness_kernel.models import (
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    ToolDefinition,
    UserMessage,
)
from harness_models import (
    MODEL_STREAM_TOO_LARGE,
    AnthropicModel,
    ApiKey,
    HttpSseTransport,
    ModelError,
    OpenAIChatModel,
    StreamLimits,
    Timeouts,
)
from harness_models._answer import Answer

KEY = "sk-echoed-0123456789abcdef"
SMALL = StreamLimits(
    max_text_bytes=64 * 1024, max_argument_bytes=32 * 1024, max_response_bytes=4 * 1024 * 1024
)
# A safety net only: without the limits these streams would run until this deadline.
TIMEOUTS = Timeouts(connect_s=5, read_s=10, total_s=30)
TOOLS = (ToolDefinition(name="fs.write", description="write", input_schema={"type": "object"}),)


def request() -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content="hi"),), tools=TOOLS)


def openai_chunk(delta: dict[str, object], finish: str | None = None) -> str:
    return json.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def anthropic_event(kind: str, **fields: object) -> tuple[str, str]:
    return kind, json.dumps({"type": kind, **fields})


def anthropic_start(block: dict[str, object]) -> bytes:
    message: dict[str, object] = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                  "model": "m", "stop_reason": None,
                                  "usage": {"input_tokens": 3, "output_tokens": 1}}  # fmt: skip
    return sse(
        anthropic_event("message_start", message=message),
        anthropic_event("content_block_start", index=0, content_block=block),
    )


def anthropic_delta(delta: dict[str, object]) -> bytes:
    return sse(anthropic_event("content_block_delta", index=0, delta=delta))


def adapter(provider: str, url: str, transport: HttpSseTransport, limits: StreamLimits) -> Any:
    if provider == "openai":
        return OpenAIChatModel(
            "m", api_key=ApiKey(KEY), base_url=url + "/v1", transport=transport, stream_limits=limits
        )
    return AnthropicModel("m", api_key=ApiKey(KEY), base_url=url, transport=transport, stream_limits=limits)


OPENAI_CALL_START = {
    "index": 0,
    "id": "call_1",
    "type": "function",
    "function": {"name": "fs_write", "arguments": ""},
}


async def drain(model: Any, frames: list[ModelEvent]) -> None:
    async for frame in model.stream(request()):
        frames.append(frame)


ENDLESS: dict[tuple[str, str], Reply] = {
    ("openai", "text"): Reply(
        chunks=[sse(openai_chunk({"role": "assistant", "content": "Ready: "}))],
        forever=sse(openai_chunk({"content": "é" * 700})),
    ),
    ("openai", "arguments"): Reply(
        chunks=[sse(openai_chunk({"tool_calls": [OPENAI_CALL_START]}))],
        forever=sse(openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "x" * 1000}}]})),
    ),
    ("anthropic", "text"): Reply(
        chunks=[anthropic_start({"type": "text", "text": ""})],
        forever=anthropic_delta({"type": "text_delta", "text": "é" * 700}),
    ),
    ("anthropic", "arguments"): Reply(
        chunks=[anthropic_start({"type": "tool_use", "id": "toolu_1", "name": "fs_write", "input": {}})],
        forever=anthropic_delta({"type": "input_json_delta", "partial_json": "x" * 1000}),
    ),
}


@pytest.mark.parametrize(("provider", "kind"), sorted(ENDLESS))
async def test_an_endless_response_fails_as_too_large_once_past_its_limit(provider: str, kind: str) -> None:
    frames: list[ModelEvent] = []
    async with fake_provider() as server, HttpSseTransport(TIMEOUTS) as transport:
        server.script(ENDLESS[provider, kind])
        model = adapter(provider, server.url, transport, SMALL)
        with pytest.raises(ModelError) as caught:
            await drain(model, frames)
        await server.connections[0].closed.wait()
    assert caught.value.code == MODEL_STREAM_TOO_LARGE
    assert caught.value.retryable is False
    assert len(server.requests) == 1
    limit = SMALL.max_text_bytes if kind == "text" else SMALL.max_argument_bytes
    assert f"more than {limit} bytes" in caught.value.message
    text = "".join(frame.delta for frame in frames if type(frame) is TextDeltaFrame)
    assert len(text.encode()) <= SMALL.max_text_bytes
    if kind == "text":
        # Failed when crossing the limit, not later: at most one more delta (1 400 bytes) than it.
        assert len(text.encode()) > SMALL.max_text_bytes - 1_400


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_an_endless_stream_of_tiny_deltas_fails_at_the_event_limit(provider: str) -> None:
    limits = StreamLimits(max_events=500)
    start, delta = (
        (sse(openai_chunk({"role": "assistant"})), sse(openai_chunk({"content": "y"})))
        if provider == "openai"
        else (
            anthropic_start({"type": "text", "text": ""}),
            anthropic_delta({"type": "text_delta", "text": "y"}),
        )
    )
    frames: list[ModelEvent] = []
    async with fake_provider() as server, HttpSseTransport(TIMEOUTS) as transport:
        server.script(Reply(chunks=[start], forever=delta))
        with pytest.raises(ModelError, match="more than 500 events") as caught:
            await drain(adapter(provider, server.url, transport, limits), frames)
    assert caught.value.code == MODEL_STREAM_TOO_LARGE
    assert len(frames) < 500


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_an_endless_body_of_keep_alive_comments_fails_at_the_body_limit(provider: str) -> None:
    limits = StreamLimits(max_response_bytes=256 * 1024)
    async with fake_provider() as server:
        server.script(Reply(chunks=[b": ping\n\n"], forever=b": keep-alive " + b"." * 500 + b"\n\n"))
        async with HttpSseTransport(TIMEOUTS, max_response_bytes=limits.max_response_bytes) as transport:
            model = adapter(provider, server.url, transport, limits)
            with pytest.raises(ModelError, match="longer than 262144 bytes") as caught:
                await drain(model, [])
    assert caught.value.code == MODEL_STREAM_TOO_LARGE
    assert len(server.requests) == 1


def test_stream_limits_refuse_nonsense() -> None:
    for bad in (0, -1, 2**40, 1.5, True):
        with pytest.raises(ValueError, match="max_text_bytes"):
            StreamLimits(max_text_bytes=bad)  # pyright: ignore[reportArgumentType]
        with pytest.raises(ValueError, match="max_events"):
            StreamLimits(max_events=bad)  # pyright: ignore[reportArgumentType]


# ---------------------------------------------------------------- the key echoed in the text


def split_into(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[start:end] for start, end in itertools.pairwise(points)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_key_the_provider_echoes_split_over_deltas_is_handed_on_redacted(provider: str) -> None:
    said = f"Your key is {KEY}. Again: {KEY[:5]}{KEY}!"
    pieces = split_into(said, list(range(0, len(said), 3)))
    if provider == "openai":
        body = sse(
            *(openai_chunk({"content": piece}) for piece in pieces), openai_chunk({}, "stop"), "[DONE]"
        )
    else:
        body = (
            anthropic_start({"type": "text", "text": ""})
            + b"".join(anthropic_delta({"type": "text_delta", "text": piece}) for piece in pieces)
            + sse(
                anthropic_event("content_block_stop", index=0),
                anthropic_event(
                    "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 9}
                ),
                anthropic_event("message_stop"),
            )
        )
    async with fake_provider() as server, HttpSseTransport(TIMEOUTS) as transport:
        server.script(Reply(chunks=[body]))
        frames = [
            frame
            async for frame in adapter(provider, server.url, transport, StreamLimits()).stream(request())
        ]
    deltas = [frame.delta for frame in frames if type(frame) is TextDeltaFrame]
    expected = f"Your key is {REDACTED}. Again: {KEY[:5]}{REDACTED}!"
    assert "".join(deltas) == expected
    completed = frames[-1]
    assert type(completed) is ResponseCompletedFrame
    assert completed.response.content == expected
    assert all(KEY[:12] not in delta for delta in deltas)


@given(
    before=st.text(max_size=30),
    after=st.text(max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12),
)
def test_the_answer_text_never_hands_on_the_key_however_it_is_split(
    before: str, after: str, cuts: list[int]
) -> None:
    said = before + KEY + after + KEY[:-1]
    answer = Answer(StreamLimits(), secret=KEY)
    handed: list[str] = []
    for piece in split_into(said, cuts):
        handed.extend(frame.delta for frame in answer.add(piece))
    handed.extend(frame.delta for frame in answer.end())
    assert "".join(handed) == answer.content == said.replace(KEY, REDACTED)
    assert KEY not in "".join(handed)
