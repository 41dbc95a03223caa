"""Shared fixtures: a real server on 127.0.0.1 in a temporary root, and raw-socket helpers."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections.abc import AsyncGenerator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection
from wsproto.events import AcceptConnection, CloseConnection, Event, Request, TextMessage

from agent_server import ServerConfig, ServerHandle, ToolProviderContext
from agent_server._config import ServerHooks
from agent_server._server import serve_with_hooks
from agent_server.client import AcpClient, JsonObject
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.store import MemorySessionStore, SessionStore, SqliteSessionStore
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
        self._backlog: list[Event] = []
        self._parts: list[str] = []

    async def send_event(self, event: Event, *, connection: Connection | None = None) -> None:
        """Encode ``event`` with ``connection`` (default: this client's) and send the bytes."""
        await self.stream.send_all((connection or self.frames).send(event))

    async def send_bytes(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send_request(self, request_id: int, method: str, params: dict[str, Any]) -> None:
        """Send one JSON-RPC request as a single text frame."""
        document = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.send_event(TextMessage(data=json.dumps(document)))

    async def _receive(self) -> bool:
        """Read once into the backlog; ``False`` when the server ended the stream."""
        try:
            data = await self.stream.receive_some(65_536)
        except trio.BrokenResourceError:
            return False
        if not data:
            return False
        self.frames.receive_data(data)
        self._backlog.extend(self.frames.events())
        return True

    async def next_message(self) -> dict[str, Any]:
        """The next whole text message from the server, decoded as JSON."""
        while True:
            while self._backlog:
                event = self._backlog.pop(0)
                assert isinstance(event, TextMessage), event
                self._parts.append(event.data)
                if event.message_finished:
                    text, self._parts = "".join(self._parts), []
                    return json.loads(text)
            assert await self._receive(), "the server ended the stream"

    async def events_until_end(self) -> list[Event]:
        """Every event the server sends (or sent and was not consumed) until it ends the TCP stream."""
        while await self._receive():
            pass
        events, self._backlog = self._backlog, []
        return events

    async def close_code(self) -> int | None:
        """The code of the server's close frame, or ``None`` when the stream ended without one."""
        for event in await self.events_until_end():
            if isinstance(event, CloseConnection):
                return event.code
        return None


@asynccontextmanager
async def raw_websocket(
    handle: ServerHandle, *, receive_buffer: int | None = None
) -> AsyncGenerator[RawSocket]:
    """Complete the upgrade with wsproto, then hand over the socket for frame-level use.

    ``receive_buffer`` sets ``SO_RCVBUF`` before connecting, so a client that stops reading
    pushes back on the server after a few kilobytes rather than megabytes.
    """
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    await sock.connect(("127.0.0.1", handle.port))
    stream = trio.SocketStream(sock)
    async with stream:
        handshake = WSConnection(ConnectionType.CLIENT)
        assert handle.token is not None
        authorization = [(b"authorization", f"Bearer {handle.token}".encode())]
        await stream.send_all(
            handshake.send(Request(host="127.0.0.1", target="/acp", extra_headers=authorization))
        )
        accepted = False
        while not accepted:
            data = await stream.receive_some(65_536)
            assert data, "the server ended the stream during the handshake"
            handshake.receive_data(data)
            for event in handshake.events():
                assert isinstance(event, AcceptConnection), event
                accepted = True
        yield RawSocket(stream)


async def replay_all(client: AcpClient, session_id: str, *, page: int = 1000) -> list[JsonObject]:
    """Every stored event of ``session_id``, restored page by page from ``afterSeq`` -1."""
    notes: list[JsonObject] = []
    after = -1
    while True:
        params = {"sessionId": session_id, "afterSeq": after, "limit": page}
        result = await client.request("session/restore", params)
        notes.extend(note["params"] for note in client.drain_notifications())
        after = result["replayedThroughSeq"]
        if not result["hasMore"]:
            return notes


async def wait_for_closed_row(store: SessionStore, session_id: str) -> None:
    """Wait until the server has finished the session and closed its row (30 s at most: a busy machine).

    Not for a session the server continues (``session/continue``, ``--resume-interrupted``):
    marking it interrupted closes its row for the moment before the continuation reopens it,
    so there a closed row must also end with ``agent.stopped`` (``test_continue.py``).
    """
    # The store signals nothing, so polling is the only way to observe the row from outside.
    with trio.fail_after(30):
        while (await store.get(session_id)).status != "closed":  # noqa: ASYNC110
            await trio.sleep(0.01)


def nested_config(**settings: Any) -> tuple[ServerConfig, ServerHooks]:
    """A :class:`ServerConfig` and :class:`ServerHooks` from settings named by their field alone.

    Every field name is unique across the records, so a test says ``max_sessions=2`` and this
    puts it in ``limits``; a name no record has fails the test.
    """
    records: dict[str, type[Any]] = {
        item.name: type(getattr(ServerConfig(), item.name)) for item in dataclasses.fields(ServerConfig)
    }
    owner = {
        item.name: record_name
        for record_name, record in (*records.items(), ("hooks", ServerHooks))
        for item in dataclasses.fields(record)
    }
    grouped: dict[str, dict[str, Any]] = {name: {} for name in (*records, "hooks")}
    for name, value in settings.items():
        grouped[owner[name]][name] = value
    hooks = ServerHooks(**grouped.pop("hooks"))
    built = {name: records[name](**values) for name, values in grouped.items()}
    return ServerConfig(**built), hooks


class ServerFactory:
    """Starts servers rooted at ``<tmp>/root`` with the workspace ``ws``.

    With ``store_kind="sqlite"`` a server keeps its sessions in a file under ``<tmp>/state``;
    with ``"memory"`` in a :class:`MemorySessionStore` the factory opens and closes around
    it. A test that names its own ``session_store``, ``db_path`` or ``persistence`` gets
    exactly that.
    """

    def __init__(self, tmp_path: Path, store_kind: str = "sqlite") -> None:
        self.tmp_path = tmp_path
        self.store_kind = store_kind
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
        own_store = not {"session_store", "db_path", "persistence"} & options.keys()
        settings.update(options)
        async with AsyncExitStack() as stack:
            if own_store and self.store_kind == "memory":
                del settings["db_path"]
                settings["session_store"] = await stack.enter_async_context(MemorySessionStore())
            nursery = await stack.enter_async_context(trio.open_nursery())
            config, hooks = nested_config(**settings)
            handle: ServerHandle = await nursery.start(serve_with_hooks, config, hooks)
            try:
                yield handle
            finally:
                await handle.aclose()

    @asynccontextmanager
    async def session_store(self) -> AsyncGenerator[SessionStore]:
        """An open store of this factory's kind, for a test to pass as ``session_store`` and watch."""
        store: SessionStore
        if self.store_kind == "memory":
            store = MemorySessionStore()
        else:
            (self.tmp_path / "state").mkdir(exist_ok=True)
            store = SqliteSessionStore(self.tmp_path / "state" / "watched.sqlite")
        async with store:
            yield store

    # The raw-socket helpers ride on the fixture: test modules cannot import conftest at run time.
    http_exchange = staticmethod(http_exchange)
    masked_frame = staticmethod(masked_frame)
    raw_websocket = staticmethod(raw_websocket)
    replay_all = staticmethod(replay_all)
    wait_for_closed_row = staticmethod(wait_for_closed_row)
    nested_config = staticmethod(nested_config)


@pytest.fixture(params=["sqlite", "memory"])
def running(tmp_path: Path, request: pytest.FixtureRequest) -> ServerFactory:
    """``async with running(**options) as handle`` serves until the block ends.

    Every test runs twice: once with the server's sessions in SQLite, once in memory
    (issue #16: the server's test suite runs with both stores).
    """
    return ServerFactory(tmp_path, request.param)
