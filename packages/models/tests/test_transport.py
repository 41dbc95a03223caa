"""HttpSseTransport against the loopback fake provider: events, statuses, timeouts, hang-ups."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
import trio
from fake_provider import FakeProvider, Reply, fake_provider, sse

from harness_models import (
    MODEL_AUTH_FAILED,
    MODEL_BAD_REQUEST,
    MODEL_CONNECTION_FAILED,
    MODEL_NOT_FOUND,
    MODEL_OVERLOADED,
    MODEL_PROVIDER_ERROR,
    MODEL_RATE_LIMITED,
    MODEL_SERVER_ERROR,
    MODEL_STREAM_INVALID,
    MODEL_TIMEOUT,
    ModelError,
)
from harness_models._transport import MAX_ERROR_MESSAGE_CHARS, HttpSseTransport, retry_after_s
from harness_models._wire import SseEvent, Timeouts

KEY = "sk-test-SECRET-0123456789"
HEADERS = {"authorization": f"Bearer {KEY}", "x-api-key": KEY, "content-type": "application/json"}
FAST = Timeouts(connect_s=2, read_s=2, total_s=5)


@pytest.fixture
async def server() -> AsyncGenerator[FakeProvider, None]:
    async with fake_provider() as running:
        yield running


async def collect(transport: HttpSseTransport, url: str) -> list[SseEvent]:
    async with transport.stream(url, headers=HEADERS, body=b'{"model": "m"}') as events:
        return [event async for event in events]


async def failure(server: FakeProvider, reply: Reply, timeouts: Timeouts = FAST) -> ModelError:
    server.script(reply)
    async with HttpSseTransport(timeouts) as transport:
        with pytest.raises(ModelError) as caught:
            await collect(transport, server.url + "/v1/chat")
    return caught.value


async def test_events_split_at_awkward_bytes_arrive_whole_and_the_request_is_recorded(
    server: FakeProvider,
) -> None:
    body = sse(("delta", '{"text": "Grüße 🌍"}'), "[DONE]")
    cuts = [1, 9, body.index("ü".encode()) + 1, body.index("🌍".encode()) + 2, len(body) - 1]
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    server.script(Reply(chunks=chunks, pause_s=0.01))
    async with HttpSseTransport(FAST) as transport:
        events = await collect(transport, server.url + "/v1/chat")
    assert events == [SseEvent(event="delta", data='{"text": "Grüße 🌍"}'), SseEvent(data="[DONE]")]
    (request,) = server.requests
    assert (request.method, request.path, request.json()) == ("POST", "/v1/chat", {"model": "m"})
    assert request.header("authorization") == f"Bearer {KEY}"


@pytest.mark.parametrize("framing", ["chunked", "content-length", "close"])
async def test_every_body_framing_ends_the_stream_cleanly(server: FakeProvider, framing: str) -> None:
    server.script(Reply(chunks=[sse("a"), sse("b")], framing=framing))  # pyright: ignore[reportArgumentType]
    async with HttpSseTransport(FAST) as transport:
        assert [e.data for e in await collect(transport, server.url)] == ["a", "b"]


@pytest.mark.parametrize(
    ("status", "body", "code", "retryable"),
    [
        (
            400,
            b'{"error": {"message": "bad messages", "type": "invalid_request_error"}}',
            MODEL_BAD_REQUEST,
            False,
        ),
        (422, b"unprocessable", MODEL_BAD_REQUEST, False),
        (
            401,
            b'{"type": "error", "error": {"type": "authentication_error", "message": "no"}}',
            MODEL_AUTH_FAILED,
            False,
        ),
        (403, b"", MODEL_AUTH_FAILED, False),
        (404, b'{"error": {"message": "no such model", "code": "model_not_found"}}', MODEL_NOT_FOUND, False),
        (408, b"", MODEL_TIMEOUT, True),
        (409, b"", MODEL_RATE_LIMITED, True),
        (429, b'{"error": {"message": "slow down", "type": "rate_limit_error"}}', MODEL_RATE_LIMITED, True),
        (
            500,
            b'{"type": "error", "error": {"type": "api_error", "message": "boom"}}',
            MODEL_SERVER_ERROR,
            True,
        ),
        (503, b"<html>down</html>", MODEL_SERVER_ERROR, True),
        (
            529,
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}',
            MODEL_OVERLOADED,
            True,
        ),
        (
            500,
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}',
            MODEL_OVERLOADED,
            True,
        ),
        (302, b"", MODEL_PROVIDER_ERROR, False),
        (418, b"teapot", MODEL_PROVIDER_ERROR, False),
    ],
)
async def test_each_error_status_maps_to_its_code(
    server: FakeProvider, status: int, body: bytes, code: str, retryable: bool
) -> None:
    reply = Reply(status=status, headers=(("content-type", "application/json"),), chunks=[body])
    error = await failure(server, reply)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert f"HTTP {status}" in error.message
    assert error.retry_after_s is None


async def test_the_provider_error_type_and_message_are_in_the_message(server: FakeProvider) -> None:
    body = b'{"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too big"}}'
    error = await failure(server, Reply(status=400, chunks=[body]))
    assert error.message == "the provider answered HTTP 400 (invalid_request_error): max_tokens: too big"


async def test_a_header_value_echoed_by_the_provider_never_reaches_the_message(server: FakeProvider) -> None:
    body = (
        b'{"error": {"message": "Incorrect API key provided: %s\\u001b[2J", "type": "auth"}}' % KEY.encode()
    )
    error = await failure(server, Reply(status=401, chunks=[body]))
    assert KEY not in error.message
    assert KEY not in repr(error)
    assert "<redacted>" in error.message
    assert "\x1b" not in error.message  # no terminal control sequences either


async def test_a_long_error_message_is_bounded(server: FakeProvider) -> None:
    body = b'{"error": {"message": "%s"}}' % (b"x" * 20_000)
    error = await failure(server, Reply(status=400, chunks=[body]))
    assert len(error.message) == MAX_ERROR_MESSAGE_CHARS


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ((("retry-after", "7"),), 7.0),
        ((("retry-after", "1.5"),), 1.5),
        ((("retry-after-ms", "250"), ("retry-after", "9")), 0.25),
        ((("retry-after-ms", "soon"), ("retry-after", "3")), 3.0),
        ((("retry-after", "-3"),), None),
        ((("retry-after", "nan"),), None),
        ((("retry-after", "whenever"),), None),
    ],
)
async def test_the_retry_hint_comes_from_the_headers(
    server: FakeProvider, headers: tuple[tuple[str, str], ...], expected: float | None
) -> None:
    error = await failure(server, Reply(status=429, headers=headers, chunks=[b"{}"]))
    assert error.retry_after_s == expected


def test_a_retry_after_date_is_measured_from_now() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC), usegmt=True)
    assert retry_after_s(httpx.Headers({"retry-after": later}), now=now.timestamp()) == 30.0
    assert retry_after_s(httpx.Headers({"retry-after": later}), now=now.timestamp() + 60) == 0.0


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", None])
async def test_a_success_that_is_not_an_event_stream_is_invalid(
    server: FakeProvider, content_type: str | None
) -> None:
    headers = (("content-type", content_type),) if content_type else ()
    error = await failure(server, Reply(headers=headers, chunks=[b'{"choices": []}']))
    assert (error.code, error.status) == (MODEL_STREAM_INVALID, 200)


async def test_an_event_stream_content_type_with_parameters_is_accepted(server: FakeProvider) -> None:
    server.script(Reply(headers=(("content-type", "Text/Event-Stream; charset=utf-8"),), chunks=[sse("x")]))
    async with HttpSseTransport(FAST) as transport:
        assert [e.data for e in await collect(transport, server.url)] == ["x"]


async def test_invalid_utf8_in_the_stream_is_invalid(server: FakeProvider) -> None:
    error = await failure(server, Reply(chunks=[b"data: \xff\xfe\n\n"]))
    assert error.code == MODEL_STREAM_INVALID


@pytest.mark.parametrize("framing", ["chunked", "content-length", "close"])
async def test_a_connection_cut_mid_event_is_a_retryable_connection_failure(
    server: FakeProvider, framing: str
) -> None:
    body = sse("first", "second")
    reply = Reply(chunks=[body], cut_after=len(sse("first")) + 5, framing=framing)  # pyright: ignore[reportArgumentType]
    server.script(reply)
    seen: list[str] = []

    async def read() -> None:
        async with transport.stream(server.url, headers=HEADERS, body=b"{}") as events:
            async for event in events:
                seen.append(event.data)

    async with HttpSseTransport(FAST) as transport:
        with pytest.raises(ModelError) as caught:
            await read()
    assert seen == ["first"]
    assert (caught.value.code, caught.value.retryable) == (MODEL_CONNECTION_FAILED, True)


async def test_nothing_listening_is_a_retryable_connection_failure() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    async with HttpSseTransport(FAST) as transport:
        with pytest.raises(ModelError) as caught:
            await collect(transport, f"http://127.0.0.1:{port}/v1")
    assert (caught.value.code, caught.value.retryable) == (MODEL_CONNECTION_FAILED, True)
    assert str(port) not in caught.value.message


async def test_a_stalled_stream_times_out_between_reads(server: FakeProvider) -> None:
    error = await failure(server, Reply(chunks=[sse("a")], stall=True), Timeouts(read_s=0.2, total_s=30))
    assert (error.code, error.retryable) == (MODEL_TIMEOUT, True)


async def test_a_trickling_stream_hits_the_whole_attempt_deadline(server: FakeProvider) -> None:
    # Each read comes well inside the read timeout; only the whole-attempt deadline stops it.
    reply = Reply(chunks=[b": ping\n"] * 200, pause_s=0.02)
    started = trio.current_time()
    error = await failure(server, reply, Timeouts(read_s=5, total_s=0.3))
    assert (error.code, error.retryable) == (MODEL_TIMEOUT, True)
    assert "0.3 s" in error.message
    assert trio.current_time() - started < 2


async def test_a_stalled_error_body_hits_the_deadline_too(server: FakeProvider) -> None:
    reply = Reply(status=500, chunks=[b'{"error": '], stall=True)
    error = await failure(server, reply, Timeouts(read_s=5, total_s=0.3))
    assert error.code == MODEL_TIMEOUT


async def test_cancelling_while_the_server_stalls_closes_the_connection_at_once(server: FakeProvider) -> None:
    server.script(Reply(chunks=[sse("a")], stall=True))
    async with HttpSseTransport(FAST) as transport:
        with trio.move_on_after(0.3) as scope:
            async with transport.stream(server.url, headers=HEADERS, body=b"{}") as events:
                async for _ in events:
                    pass
        assert scope.cancelled_caught
        cancelled_at = trio.current_time()
        (connection,) = server.connections
        with trio.fail_after(1):
            await connection.closed.wait()
        assert connection.closed_at is not None
        assert connection.closed_at - cancelled_at < 0.5


async def test_leaving_early_closes_the_connection(server: FakeProvider) -> None:
    server.script(Reply(chunks=[sse("a"), sse("b")], stall=True))
    async with HttpSseTransport(FAST) as transport:
        async with transport.stream(server.url, headers=HEADERS, body=b"{}") as events:
            async for _ in events:
                break
        with trio.fail_after(1):
            await server.connections[0].closed.wait()


async def test_a_given_client_stays_open_and_an_own_client_is_closed(server: FakeProvider) -> None:
    server.script(Reply(chunks=[sse("a")]), Reply(chunks=[sse("b")]))
    async with httpx.AsyncClient() as client:
        async with HttpSseTransport(FAST, client=client) as transport:
            assert [e.data for e in await collect(transport, server.url)] == ["a"]
        assert not client.is_closed
    transport = HttpSseTransport(FAST)
    assert [e.data for e in await collect(transport, server.url)] == ["b"]
    await transport.aclose()
    with pytest.raises(RuntimeError, match="closed"):  # using a closed transport is a programming error
        await collect(transport, server.url)


async def test_the_fake_provider_answers_an_unscripted_request_with_a_500(server: FakeProvider) -> None:
    async with HttpSseTransport(FAST) as transport:
        with pytest.raises(ModelError) as caught:
            await collect(transport, server.url)
    assert caught.value.status == 500
    assert "no scripted reply" in caught.value.message
