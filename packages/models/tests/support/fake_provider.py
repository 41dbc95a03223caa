"""A loopback fake model provider: real HTTP/1.1 on 127.0.0.1, answering from a script.

Every request is recorded (method, path, headers, body) and answered by the next scripted
:class:`Reply`: a status, headers, and a body sent as the given byte chunks (so a test can
split a stream at any byte), with pauses between them; or the headers and then a stall; or
the connection cut after a number of body bytes. Requests are parsed with h11; responses
are written by hand so that the framing (chunked, content-length, or close-delimited) and
the cuts are exactly what the test asks for. Every response closes its connection, and
each connection's end is recorded, so a test can see the client hang up.

Usage::

    async with fake_provider() as server:
        server.script(Reply(chunks=[b"data: hi\\n\\n"]))
        ... request server.url + "/v1/chat/completions" ...
        assert server.requests[0].json()["model"] == "m"
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Literal

import h11
import msgspec
import trio

__all__ = ["Connection", "FakeProvider", "RecordedRequest", "Reply", "fake_provider", "sse"]

Framing = Literal["chunked", "content-length", "close"]


def sse(*events: str | tuple[str, str]) -> bytes:
    """Serialise events as an SSE body: a string is one ``data`` event, a pair (type, data)."""
    out = bytearray()
    for event in events:
        if isinstance(event, tuple):
            out += f"event: {event[0]}\n".encode()
            data = event[1]
        else:
            data = event
        for line in data.split("\n"):
            out += f"data: {line}\n".encode()
        out += b"\n"
    return bytes(out)


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted answer.

    Attributes:
        status: The HTTP status.
        headers: Response headers (``content-type`` defaults to ``text/event-stream``).
        chunks: The body, each item written on its own (one HTTP chunk when chunked).
        pause_s: Seconds to wait before each chunk after the first.
        framing: How the body's end is marked.
        stall: After the chunks, send nothing more and keep the connection open.
        cut_after: Close the connection once this many body bytes were sent.
        forever: After the chunks, send this chunk again and again until the client hangs up
            (an endless stream).
    """

    status: int = 200
    headers: Sequence[tuple[str, str]] = (("content-type", "text/event-stream"),)
    chunks: Sequence[bytes] = ()
    pause_s: float = 0.0
    framing: Framing = "chunked"
    stall: bool = False
    cut_after: int | None = None
    forever: bytes | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), if sent."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)

    def json(self) -> object:
        """The body decoded as JSON."""
        return msgspec.json.decode(self.body)


@dataclass
class Connection:
    """One accepted connection; ``closed`` is set when it ended (either side)."""

    closed: trio.Event = field(default_factory=trio.Event)
    closed_at: float | None = None
    body_bytes_sent: int = 0


class FakeProvider:
    """The running server: script replies, read what was requested."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.requests: list[RecordedRequest] = []
        self.connections: list[Connection] = []
        self._replies: deque[Reply] = deque()

    def script(self, *replies: Reply) -> None:
        """Queue ``replies``, one per request, in order."""
        self._replies.extend(replies)

    @property
    def unused_replies(self) -> int:
        """How many scripted replies no request has taken yet."""
        return len(self._replies)

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        """Answer the one request of ``stream`` (the handler ``trio.serve_listeners`` runs)."""
        connection = Connection()
        self.connections.append(connection)
        try:
            request = await _read_request(stream)
            if request is not None:
                self.requests.append(request)
                reply = self._replies.popleft() if self._replies else _UNSCRIPTED
                await _send(stream, reply, connection)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass  # the client went away; that is what some tests are about
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            connection.closed_at = trio.current_time()
            connection.closed.set()


_UNSCRIPTED = Reply(
    status=500,
    headers=(("content-type", "application/json"),),
    chunks=(b'{"error": {"message": "the fake provider has no scripted reply left"}}',),
    framing="content-length",
)


async def _read_request(stream: trio.SocketStream) -> RecordedRequest | None:
    parser = h11.Connection(h11.SERVER)
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = parser.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data and head is None:
                return None
            parser.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            headers = tuple((key.decode().lower(), value.decode("latin-1")) for key, value in head.headers)
            return RecordedRequest(head.method.decode(), head.target.decode(), headers, bytes(body))
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _send(stream: trio.SocketStream, reply: Reply, connection: Connection) -> None:
    headers = list(reply.headers)
    total = sum(len(chunk) for chunk in reply.chunks)
    if reply.framing == "chunked":
        headers.append(("transfer-encoding", "chunked"))
    elif reply.framing == "content-length":
        headers.append(("content-length", str(total)))
    headers.append(("connection", "close"))
    try:
        reason = HTTPStatus(reply.status).phrase
    except ValueError:
        reason = "Unknown"  # 529 and friends are not in the standard library's table
    head = f"HTTP/1.1 {reply.status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    await stream.send_all(head.encode("latin-1"))
    budget = reply.cut_after
    for index, chunk in enumerate(reply.chunks):
        if index and reply.pause_s:
            await trio.sleep(reply.pause_s)
        piece = chunk if budget is None else chunk[:budget]
        if piece:
            framed = b"%x\r\n%s\r\n" % (len(piece), piece) if reply.framing == "chunked" else piece
            await stream.send_all(framed)
            connection.body_bytes_sent += len(piece)
        if budget is not None:
            budget -= len(piece)
            if budget <= 0:
                return  # cut: the caller closes the connection
    if reply.forever:
        framed = b"%x\r\n%s\r\n" % (len(reply.forever), reply.forever)
        while True:  # until the client hangs up: the send fails
            await stream.send_all(framed if reply.framing == "chunked" else reply.forever)
            connection.body_bytes_sent += len(reply.forever)
    if reply.stall:
        while await stream.receive_some(65536):
            pass  # wait for the client to hang up
        return
    if reply.framing == "chunked":
        await stream.send_all(b"0\r\n\r\n")


@asynccontextmanager
async def fake_provider() -> AsyncGenerator[FakeProvider, None]:
    """Run a fake provider on 127.0.0.1 (a free port) for the duration of the block."""
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        server = FakeProvider(port)
        await nursery.start(trio.serve_listeners, server.serve_connection, listeners)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
