"""Clients below the ACP client: raw HTTP requests and upgraded sockets driven frame by frame."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from urllib.parse import parse_qs, urlsplit

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from agent_server.client import AcpClient, JsonObject


async def http_status(port: int, request: bytes) -> int:
    """Send raw request bytes and return the reply's HTTP status (0 when there is none)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        reply = b""
        try:
            while chunk := await stream.receive_some(65_536):
                reply += chunk
        except trio.BrokenResourceError:
            pass
    parts = reply.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


async def health(port: int) -> int:
    """The HTTP status of ``GET /health``."""
    return await http_status(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")


async def replay_all(client: AcpClient, session_id: str) -> list[JsonObject]:
    """Every stored event of ``session_id``, restored page by page from ``afterSeq`` -1."""
    notes: list[JsonObject] = []
    after = -1
    while True:
        params = {"sessionId": session_id, "afterSeq": after, "limit": 1000}
        result = await client.request("session/restore", params)
        notes.extend(note["params"] for note in client.drain_notifications())
        after = result["replayedThroughSeq"]
        if not result["hasMore"]:
            return notes


def url_token(url: str) -> str:
    """The ``?token=`` of a URL this benchmark built (every connection here authenticates)."""
    return parse_qs(urlsplit(url).query)["token"][0]


class RawSocket:
    """An upgraded socket driven frame by frame with wsproto's frame-level ``Connection``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.frames = Connection(ConnectionType.CLIENT)
        self._parts: list[str] = []

    async def send(self, data: bytes) -> None:
        """Send raw bytes."""
        await self.stream.send_all(data)

    async def send_request(self, request_id: int, method: str, params: JsonObject) -> None:
        """Send one JSON-RPC request as a text message."""
        document = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.send(self.frames.send(TextMessage(data=json.dumps(document))))

    async def messages(self) -> list[str]:
        """Read once; the text messages completed by what arrived (raises once the stream ends)."""
        data = await self.stream.receive_some(65_536)
        if not data:
            raise ConnectionError("the server ended the stream")
        self.frames.receive_data(data)
        complete: list[str] = []
        for event in self.frames.events():
            if isinstance(event, TextMessage):
                self._parts.append(event.data)
                if event.message_finished:
                    complete.append("".join(self._parts))
                    self._parts.clear()
        return complete

    async def close_code(self) -> int | None:
        """Read until the server ends the stream; the code of its close frame, if one came."""
        code: int | None = None
        while True:
            try:
                data = await self.stream.receive_some(65_536)
            except trio.BrokenResourceError:
                return code
            if not data:
                return code
            self.frames.receive_data(data)
            for event in self.frames.events():
                if isinstance(event, CloseConnection):
                    code = event.code


@asynccontextmanager
async def raw_websocket(
    port: int, token: str, *, receive_buffer: int | None = None
) -> AsyncGenerator[RawSocket]:
    """A WebSocket to ``/acp`` upgraded by hand, optionally with a small receive buffer."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)
    async with stream:
        handshake = WSConnection(ConnectionType.CLIENT)
        bearer = [(b"authorization", f"Bearer {token}".encode())]
        await stream.send_all(handshake.send(Request(host="127.0.0.1", target="/acp", extra_headers=bearer)))
        accepted = False
        while not accepted:
            data = await stream.receive_some(65_536)
            if not data:
                raise ConnectionError("the server ended the stream during the handshake")
            handshake.receive_data(data)
            accepted = any(isinstance(event, AcceptConnection) for event in handshake.events())
        yield RawSocket(stream)


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A final client frame built by hand, only for a payload wsproto refuses to build (bad UTF-8)."""
    mask = os.urandom(4)
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked
