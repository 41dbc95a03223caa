"""HTTP routes, upgrade checks, WebSocket limits and close codes (spec §2)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from wsproto.connection import Connection, ConnectionType
from wsproto.events import CloseConnection, Ping, Pong, TextMessage

from agent_server.client import HandshakeRejectedError, connect, initialize_params
from harness_kernel.models import ModelEvent, ModelRequest, TextDeltaFrame
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import ServerFactory


def _status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def _body(reply: bytes) -> object:
    return json.loads(reply.split(b"\r\n\r\n", 1)[1])


async def test_health_routes_answer_plain_http(running: ServerFactory) -> None:
    async with running() as handle:
        for path, status in (("/health", 200), ("/health/live", 200), ("/health/ready", 200), ("/nope", 404)):
            reply = await running.http_exchange(
                handle.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            )
            assert _status(reply) == status, (path, reply)
        live = await running.http_exchange(handle.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _body(live) == {"service": "agent-server", "live": True}
        missing = await running.http_exchange(handle.port, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _body(missing) == {"error": {"code": "NOT_FOUND", "message": "not found"}}
        anonymous = await running.http_exchange(handle.port, b"GET /acp HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _status(anonymous) == 403
        bearer = f"Authorization: Bearer {handle.token}\r\n".encode()
        plain = await running.http_exchange(
            handle.port, b"GET /acp HTTP/1.1\r\nHost: x\r\n" + bearer + b"\r\n"
        )
        assert _status(plain) == 400
        assert b"connection: close" in plain.lower()


async def test_health_routes_refuse_other_methods_with_405(running: ServerFactory) -> None:
    async with running() as handle:
        for method in ("POST", "PUT", "DELETE"):
            request = f"{method} /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode()
            assert _status(await running.http_exchange(handle.port, request)) == 405


async def test_a_request_head_over_16_kib_gets_431(running: ServerFactory) -> None:
    async with running() as handle:
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * 20_000 + b"\r\n\r\n"
        assert _status(await running.http_exchange(handle.port, head)) == 431


async def test_a_slow_request_head_gets_408(
    running: ServerFactory, mock_clock: trio.testing.MockClock
) -> None:
    async with running(persistence=False, db_path=None) as handle:
        stream = await trio.open_tcp_stream("127.0.0.1", handle.port)
        async with stream:
            await stream.send_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            # Only the 10 s head deadline is pending, so the clock jumps straight to it.
            mock_clock.autojump_threshold = 0.05
            reply = b""
            while chunk := await stream.receive_some(65_536):
                reply += chunk
            mock_clock.autojump_threshold = float("inf")
        assert _status(reply) == 408


async def test_upgrades_beyond_max_connections_get_503(running: ServerFactory) -> None:
    async with running(max_connections=1) as handle, handle.connect() as first:
        await first.initialize()
        with pytest.raises(HandshakeRejectedError) as refused:
            async with handle.connect():
                pass
        assert refused.value.status == 503


async def test_readiness_checks_the_path_and_caches_the_answer_for_a_second(
    running: ServerFactory, mock_clock: trio.testing.MockClock
) -> None:
    probe = b"GET /health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
    async with running(readiness_path="ready.flag") as handle:
        reply = await running.http_exchange(handle.port, probe)
        assert _status(reply) == 503
        assert b"cache-control: no-store" in reply.lower()
        assert _body(reply) == {"error": {"code": "AGENT_NOT_READY", "message": "agent server is not ready"}}
        (running.root / "ready.flag").write_text("")
        assert _status(await running.http_exchange(handle.port, probe)) == 503
        mock_clock.jump(0.9)
        assert _status(await running.http_exchange(handle.port, probe)) == 503
        mock_clock.jump(0.2)
        ready = await running.http_exchange(handle.port, probe)
        assert _status(ready) == 200
        assert _body(ready) == {"service": "agent-server", "ready": True}


async def test_origin_and_token_are_checked_before_upgrade(running: ServerFactory) -> None:
    secret = "s3cret-" + "0123456789abcdef" * 2
    async with running(auth_token=secret, allowed_origins=("https://ok.example",)) as handle:
        with pytest.raises(HandshakeRejectedError) as no_token:
            async with connect(handle.url):
                pass
        assert no_token.value.status == 403
        with pytest.raises(HandshakeRejectedError) as wrong_token:
            async with handle.connect(token=secret[:-1]):
                pass
        assert wrong_token.value.status == 403
        with pytest.raises(HandshakeRejectedError) as wrong_origin:
            async with handle.connect(token=secret, origin="https://evil.example"):
                pass
        assert wrong_origin.value.status == 403
        async with handle.connect(token=secret, origin="https://ok.example") as client:
            assert (await client.initialize())["protocolVersion"] == "harness/acp/1"
        async with connect(handle.url, token=secret, token_in_query=True) as client:
            assert (await client.initialize())["protocolVersion"] == "harness/acp/1"


async def test_binary_message_closes_with_1003(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
        await client.send_binary(b"\x00\x01")
        assert await client.wait_closed() == 1003


async def test_oversized_message_closes_with_1009(running: ServerFactory) -> None:
    async with running(max_message_bytes=1024) as handle, handle.connect() as client:
        await client.send_text("x" * 2048)
        assert await client.wait_closed() == 1009


async def test_a_message_of_more_than_1024_fragments_closes_with_1009(running: ServerFactory) -> None:
    async with running() as handle:
        async with handle.connect() as client:
            await client.send_fragments(["x"] * 1024)
            assert (await client.strays.receive())["error"]["code"] == -32700
        async with handle.connect() as client:
            await client.send_fragments(["x"] * 1025)
            assert await client.wait_closed() == 1009


# These clients never answer the close: a short grace spares the test the 1 s default wait
# (the grace's length is pinned on the mock clock below).
async def test_an_unmasked_client_frame_closes_with_1002(running: ServerFactory) -> None:
    async with running(close_grace_ms=100) as handle, running.raw_websocket(handle) as raw:
        # A server-side wsproto connection builds the frame, which is unmasked by design.
        await raw.send_event(TextMessage(data="{}"), connection=Connection(ConnectionType.SERVER))
        assert await raw.close_code() == 1002


async def test_invalid_utf8_in_a_text_frame_closes_with_1007(running: ServerFactory) -> None:
    async with running(close_grace_ms=100) as handle, running.raw_websocket(handle) as raw:
        await raw.send_bytes(running.masked_frame(0x1, b"\xff\xfe"))
        assert await raw.close_code() == 1007


@pytest.mark.parametrize(("configured", "grace"), [({}, 1.0), ({"close_grace_ms": 250}, 0.25)])
async def test_a_peer_that_never_answers_the_close_is_cut_off_after_the_configured_grace(
    running: ServerFactory, mock_clock: trio.testing.MockClock, configured: dict[str, int], grace: float
) -> None:
    options = {"persistence": False, "db_path": None, **configured}
    async with running(**options) as handle, running.raw_websocket(handle) as raw:
        started = trio.current_time()
        await raw.send_bytes(running.masked_frame(0x1, b"\xff\xfe"))
        # Only the grace is pending once the close is sent, so the clock jumps straight to it.
        mock_clock.autojump_threshold = 0.05
        with trio.fail_after(60):
            code = await raw.close_code()
        mock_clock.autojump_threshold = float("inf")
        assert code == 1007
        assert trio.current_time() - started == pytest.approx(grace)


async def test_pings_get_pongs_and_a_peer_close_is_echoed(running: ServerFactory) -> None:
    async with running() as handle, running.raw_websocket(handle) as raw:
        await raw.send_event(Ping(payload=b"are you there"))
        await raw.send_event(CloseConnection(code=1000, reason="bye"))
        events = await raw.events_until_end()
        assert [(type(e), getattr(e, "payload", None)) for e in events[:1]] == [(Pong, b"are you there")]
        closing = events[-1]
        assert isinstance(closing, CloseConnection)
        assert (closing.code, closing.reason) == (1000, "bye")


async def test_a_connection_that_fails_during_setup_closes_with_1011(running: ServerFactory) -> None:
    def new_id(prefix: str) -> str:
        if prefix == "connection":
            raise RuntimeError("id source failed")
        return f"{prefix}-1"

    async with running(new_id=new_id) as handle, handle.connect() as client:
        assert await client.wait_closed() == 1011
        reply = await running.http_exchange(handle.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _status(reply) == 200


class DeltaFlood:
    """A model factory whose model streams 4 KiB text deltas until its run is cancelled."""

    limit = 5000

    def __init__(self) -> None:
        self.emitted = 0
        self.aborted = trio.Event()

    def __call__(self) -> DeltaFlood:
        return self

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            while True:
                assert self.emitted < self.limit, "the server never pushed back"
                # No checkpoint between the count and the frame: each counted frame is handed
                # to the runtime, which stores it before it pulls the next one.
                self.emitted += 1
                yield TextDeltaFrame("x" * 4096)
        finally:
            self.aborted.set()


async def test_a_client_that_stops_reading_is_closed_with_1013_and_its_events_stay_stored(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "flood.sqlite")
    flood = DeltaFlood()
    # 16 KiB messages give the smallest outbound cap, 64 KiB. A short stall, so the test does not
    # sit out the 5 s default (the stall's length is pinned on the mock clock below).
    options = {
        "db_path": None,
        "session_store": store,
        "models": {"fake-model/v1": flood},
        "max_message_bytes": 16_384,
        "outbound_stall_ms": 500,
    }
    async with store, running(**options) as handle:
        async with running.raw_websocket(handle, receive_buffer=4096) as raw:
            await raw.send_request(1, "initialize", initialize_params())
            assert "result" in await raw.next_message()
            await raw.send_request(2, "session/new", {"workspace": "ws"})
            session_id = (await raw.next_message())["result"]["sessionId"]
            await raw.send_request(3, "session/prompt", {"sessionId": session_id, "content": "go"})
            # Not reading: the socket buffers fill, then the outbound queue reaches its cap.
            with trio.fail_after(10):
                await flood.aborted.wait()
            # Reading again within the 1 s grace lets the frame in flight and the close through.
            events = await raw.events_until_end()
        closing = events[-1]
        assert isinstance(closing, CloseConnection)
        assert closing.code == 1013
        texts = [event for event in events if isinstance(event, TextMessage)]
        # wsproto hands over a frame in pieces as it arrives; the last piece of each is final.
        assert texts[-1].message_finished
        joined = "".join(event.data + ("\n" if event.message_finished else "") for event in texts)
        streamed = [json.loads(line) for line in joined.splitlines()]
        # Only notifications, gapless from 0; the queued rest was dropped, the prompt never answered.
        assert {message.get("method") for message in streamed} == {"session/event"}
        assert [message["params"]["seq"] for message in streamed] == list(range(len(streamed)))
        assert len(streamed) < flood.emitted

        await running.wait_for_closed_row(store, session_id)
        async with handle.connect() as fresh:
            await fresh.initialize()
            replayed = await running.replay_all(fresh, session_id, page=8)
        assert [note["seq"] for note in replayed] == list(range(await store.size(session_id)))
        # Every delta the model streamed was stored, in order, and the run's canceled pair ends it.
        deltas = [note["event"]["data"] for note in replayed if note["event"]["type"] == "message.delta"]
        assert [delta["sequence"] for delta in deltas] == list(range(flood.emitted))
        assert [note["event"]["type"] for note in replayed[-2:]] == ["turn.completed", "agent.stopped"]
        assert replayed[-1]["event"]["data"]["status"] == "canceled"
        assert replayed[: len(streamed)] == [message["params"] for message in streamed]


@pytest.mark.parametrize(("configured", "stall"), [({}, 5.0), ({"outbound_stall_ms": 2_000}, 2.0)])
async def test_a_client_that_stops_reading_is_closed_with_1013_after_the_configured_stall(
    running: ServerFactory, mock_clock: trio.testing.MockClock, configured: dict[str, int], stall: float
) -> None:
    flood = DeltaFlood()
    options = {
        "persistence": False,
        "db_path": None,
        "models": {"fake-model/v1": flood},
        "max_message_bytes": 16_384,
        **configured,
    }
    async with running(**options) as handle, running.raw_websocket(handle, receive_buffer=4096) as raw:
        await raw.send_request(1, "initialize", initialize_params())
        assert "result" in await raw.next_message()
        await raw.send_request(2, "session/new", {"workspace": "ws"})
        session_id = (await raw.next_message())["result"]["sessionId"]
        await raw.send_request(3, "session/prompt", {"sessionId": session_id, "content": "go"})
        started = trio.current_time()
        # Without a store file, the stall is the only deadline once the queue is full: the
        # clock stands still until every task waits, then jumps straight to it.
        mock_clock.autojump_threshold = 0.05
        with trio.fail_after(60):
            await flood.aborted.wait()
        stalled_for = trio.current_time() - started
        # The clock stops again, so the close grace cannot run out while loopback TCP takes
        # real time to reopen its window as the test reads.
        mock_clock.autojump_threshold = float("inf")
        closing: CloseConnection | None = None
        while closing is None:
            data = await raw.stream.receive_some(65_536)
            assert data, "the server ended the stream before its close frame"
            raw.frames.receive_data(data)
            closing = next((e for e in raw.frames.events() if isinstance(e, CloseConnection)), None)
    assert closing.code == 1013
    assert stalled_for == pytest.approx(stall)


@pytest.mark.parametrize(
    "unfinished",
    [
        "half a frame header",
        "a frame missing its payload end",
        "an open fragmented message",
        "half a frame after a whole one",
    ],
)
async def test_an_unfinished_frame_or_message_closes_with_1002_after_30_s(
    running: ServerFactory, mock_clock: trio.testing.MockClock, unfinished: str
) -> None:
    async with running(persistence=False, db_path=None) as handle, running.raw_websocket(handle) as raw:
        whole = raw.frames.send(TextMessage(data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "nope"})))
        data = {
            "half a frame header": whole[:1],
            "a frame missing its payload end": whole[:-3],
            "an open fragmented message": raw.frames.send(TextMessage(data='{"a', message_finished=False)),
            "half a frame after a whole one": whole + whole[:1],
        }[unfinished]
        await raw.send_bytes(data)
        if unfinished == "half a frame after a whole one":
            assert (await raw.next_message())["error"]["code"] == -32601
        started = trio.current_time()
        # Only the 30 s frame deadline (then the 1 s close grace) is pending, so the clock jumps.
        mock_clock.autojump_threshold = 0.05
        with trio.fail_after(60):
            events = await raw.events_until_end()
        mock_clock.autojump_threshold = float("inf")
        closing = events[-1]
        assert isinstance(closing, CloseConnection)
        assert closing.code == 1002
        assert 30 <= trio.current_time() - started < 32
