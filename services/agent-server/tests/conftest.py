"""Shared fixtures: a real server on 127.0.0.1 in a temporary root, and raw-socket helpers."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection
from wsproto.events import AcceptConnection, CloseConnection, Event, Request

from agent_server import ServerConfig, ServerHandle, ToolProviderContext, serve
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_tools import Tool, create_echo_tool

TOOL_SCRIPT = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hi"})]),
    ScriptedTurn(content="done"),
)


def echo_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    return [create_echo_tool()]


def scripted() -> FakeModel:
    """A model that calls ``echo`` once (an ``ask`` without a manifest), then answers "done"."""
    return FakeModel(TOOL_SCRIPT)


async def http_exchange(port: int, request: bytes) -> bytes:
    """Send raw request bytes and read the whole reply until the server closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        reply = b""
        while chunk := await stream.receive_some(65_536):
            reply += chunk
    return reply


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A final client frame built by hand, only for payloads wsproto refuses to build (invalid UTF-8)."""
    assert len(payload) < 126
    mask = os.urandom(4)
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


class RawSocket:
    """An upgraded socket whose frames the test builds with wsproto's frame-level ``Connection``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.frames = Connection(ConnectionType.CLIENT)

    async def send_event(self, event: Event, *, connection: Connection | None = None) -> None:
        """Encode ``event`` with ``connection`` (default: this client's) and send the bytes."""
        await self.stream.send_all((connection or self.frames).send(event))

    async def send_bytes(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def events_until_end(self) -> list[Event]:
        """Every event the server sends until it ends the TCP stream."""
        events: list[Event] = []
        while True:
            try:
                data = await self.stream.receive_some(65_536)
            except trio.BrokenResourceError:
                return events
            if not data:
                return events
            self.frames.receive_data(data)
            events.extend(self.frames.events())

    async def close_code(self) -> int | None:
        """The code of the server's close frame, or ``None`` when the stream ended without one."""
        for event in await self.events_until_end():
            if isinstance(event, CloseConnection):
                return event.code
        return None


@asynccontextmanager
async def raw_websocket(handle: ServerHandle) -> AsyncGenerator[RawSocket]:
    """Complete the upgrade with wsproto, then hand over the socket for frame-level use."""
    stream = await trio.open_tcp_stream("127.0.0.1", handle.port)
    async with stream:
        handshake = WSConnection(ConnectionType.CLIENT)
        await stream.send_all(handshake.send(Request(host="127.0.0.1", target="/acp")))
        accepted = False
        while not accepted:
            data = await stream.receive_some(65_536)
            assert data, "the server ended the stream during the handshake"
            handshake.receive_data(data)
            for event in handshake.events():
                assert isinstance(event, AcceptConnection), event
                accepted = True
        yield RawSocket(stream)


class ServerFactory:
    """Starts servers rooted at ``<tmp>/root`` with the workspace ``ws`` and a store under ``<tmp>/state``."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.root = tmp_path / "root"
        self.workspace = self.root / "ws"
        self.workspace.mkdir(parents=True, exist_ok=True)

    @asynccontextmanager
    async def __call__(self, **options: Any) -> AsyncGenerator[ServerHandle]:
        settings: dict[str, Any] = {
            "port": 0,
            "workspace_root": str(self.root),
            "db_path": str(self.tmp_path / "state" / "sessions.sqlite"),
            "tools": echo_tools,
            "models": {"fake-model/v1": scripted},
        }
        settings.update(options)
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve, ServerConfig(**settings))
            try:
                yield handle
            finally:
                await handle.aclose()

    # The raw-socket helpers ride on the fixture: test modules cannot import conftest at run time.
    http_exchange = staticmethod(http_exchange)
    masked_frame = staticmethod(masked_frame)
    raw_websocket = staticmethod(raw_websocket)


@pytest.fixture
def running(tmp_path: Path) -> ServerFactory:
    """``async with running(**options) as handle`` serves until the block ends."""
    return ServerFactory(tmp_path)
