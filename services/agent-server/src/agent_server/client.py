"""A small trio ``harness/acp/1`` client over wsproto, used by the demo, the tests and the load script.

``async with connect(url) as client`` performs the WebSocket handshake and reads in the
background: responses go to the awaiting :meth:`AcpClient.request`, ``session/event``
notifications to :attr:`AcpClient.notifications`, and anything else (an error for a
frame without a usable id, for example) to :attr:`AcpClient.strays`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final, cast
from urllib.parse import parse_qs, quote, urlsplit

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError

__all__ = [
    "AcpClient",
    "AcpClientError",
    "ConnectionClosedError",
    "HandshakeRejectedError",
    "JsonObject",
    "connect",
    "initialize_params",
]

JsonObject = dict[str, Any]
"""A decoded JSON object (arbitrary JSON values)."""

_RECEIVE_BYTES: Final = 65_536


class AcpClientError(Exception):
    """An error response: the JSON-RPC ``code``, the ``ACP_*`` data code (or ``None``) and the message."""

    def __init__(self, code: int, data_code: str | None, message: str) -> None:
        super().__init__(f"{code} {data_code}: {message}")
        self.code = code
        self.data_code = data_code
        self.message = message


class ConnectionClosedError(Exception):
    """The server closed the WebSocket (``code`` and ``reason``) or the socket ended (code 1006)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"connection closed: {code} {reason}")
        self.code = code
        self.reason = reason


class HandshakeRejectedError(Exception):
    """The server answered the upgrade with an HTTP status instead of 101."""

    def __init__(self, status: int) -> None:
        super().__init__(f"upgrade rejected with HTTP {status}")
        self.status = status


def initialize_params(client_name: str = "agent-server-client") -> JsonObject:
    """The ``initialize`` params of a client that supports streaming and permissioning."""
    return {
        "protocolVersion": "harness/acp/1",
        "clientName": client_name,
        "capabilities": {"streaming": True, "permissioning": True, "sessions": True},
    }


@dataclass(eq=False)
class _Waiter:
    done: trio.Event
    message: JsonObject | None = None


class AcpClient:
    """One client WebSocket; build it with :func:`connect`."""

    def __init__(self, stream: trio.SocketStream, ws: WSConnection) -> None:
        self._stream = stream
        self._ws = ws
        self._ids = itertools.count(1)
        self._waiters: dict[object, _Waiter] = {}
        self._send_lock = trio.Lock()
        self._notify_in, self.notifications = trio.open_memory_channel[JsonObject](math.inf)
        self._stray_in, self.strays = trio.open_memory_channel[JsonObject](math.inf)
        self.closed = trio.Event()
        self.close_code: int | None = None
        self.close_reason = ""

    async def _write(self, data: bytes) -> None:
        async with self._send_lock:
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._mark_closed(1006, "socket ended")

    async def send_text(self, text: str) -> None:
        """Send one text message as is (for malformed-frame tests and custom requests)."""
        await self._write(self._ws.send(TextMessage(data=text)))

    async def send_fragments(self, parts: Sequence[str]) -> None:
        """Send one text message split into ``parts`` fragments."""
        data = b""
        for index, part in enumerate(parts):
            data += self._ws.send(TextMessage(data=part, message_finished=index == len(parts) - 1))
        await self._write(data)

    async def send_binary(self, data: bytes) -> None:
        """Send one binary message."""
        await self._write(self._ws.send(BytesMessage(data=data)))

    async def request(self, method: str, params: JsonObject | None = None) -> JsonObject:
        """Send a request and return its ``result``.

        Raises:
            AcpClientError: the server answered with an error.
            ConnectionClosedError: the connection closed first.
        """
        request_id = next(self._ids)
        waiter = self._waiters[request_id] = _Waiter(trio.Event())
        document: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            document["params"] = params
        try:
            await self.send_text(json.dumps(document))
            await waiter.done.wait()
        finally:
            self._waiters.pop(request_id, None)
        message = waiter.message
        if message is None:
            raise ConnectionClosedError(self.close_code or 1006, self.close_reason)
        if "error" in message:
            error = cast(JsonObject, message["error"])
            data = cast("JsonObject | None", error.get("data"))
            raise AcpClientError(error["code"], None if data is None else data.get("code"), error["message"])
        return cast(JsonObject, message["result"])

    def drain_notifications(self) -> list[JsonObject]:
        """The ``session/event`` notifications received so far and not yet consumed."""
        notes: list[JsonObject] = []
        while True:
            try:
                notes.append(self.notifications.receive_nowait())
            except trio.WouldBlock:
                return notes

    async def prompt(
        self, session_id: str, content: str, *, decision: str = "allow"
    ) -> tuple[JsonObject, list[JsonObject]]:
        """Run ``session/prompt``, answer every permission request with ``decision``.

        Returns the result and the session's notifications, which the server writes before
        the response. Notifications of other sessions on this client are consumed too.

        Raises:
            AcpClientError: the prompt (or a permission answer) failed.
            ConnectionClosedError: the connection closed first.
        """
        notes: list[JsonObject] = []

        async def answer_permissions() -> None:
            async for note in self.notifications:
                notes.append(note)
                event = note["params"]["event"]
                if event["type"] == "permission.requested" and note["params"]["sessionId"] == session_id:
                    answer = {"sessionId": session_id, "permissionId": event["data"]["permissionId"]}
                    await self.request("permission/respond", {**answer, "decision": decision})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_permissions)
            try:
                result = await self.request("session/prompt", {"sessionId": session_id, "content": content})
            finally:
                nursery.cancel_scope.cancel()
        notes.extend(self.drain_notifications())
        return result, [note for note in notes if note["params"]["sessionId"] == session_id]

    async def steer(self, session_id: str, content: str) -> str:
        """Run ``session/steer``: ``content`` reaches the running turn at its next model request.

        Returns the id of the stored steering message; its ``steering.queued`` notification
        was sent before the answer.

        Raises:
            AcpClientError: ``-32019`` no turn runs, ``-32022`` the turn is ending, ``-32602``
                the text is refused, ``-32010`` an unknown session.
            ConnectionClosedError: the connection closed first.
        """
        result = await self.request("session/steer", {"sessionId": session_id, "content": content})
        return str(result["messageId"])

    async def initialize(self) -> JsonObject:
        """Send ``initialize`` with :func:`initialize_params`."""
        return await self.request("initialize", initialize_params())

    async def wait_closed(self) -> int:
        """Wait for the server's close and return its code."""
        await self.closed.wait()
        assert self.close_code is not None
        return self.close_code

    def _mark_closed(self, code: int, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_code, self.close_reason = code, reason
        self.closed.set()
        for waiter in self._waiters.values():
            waiter.done.set()

    def _deliver(self, text: str) -> None:
        message = cast(JsonObject, json.loads(text))
        waiter = self._waiters.get(message.get("id")) if "method" not in message else None
        if waiter is not None:
            waiter.message = message
            waiter.done.set()
        elif message.get("method") == "session/event":
            self._notify_in.send_nowait(message)
        else:
            self._stray_in.send_nowait(message)

    async def _read(self) -> None:
        parts: list[str] = []
        while not self.closed.is_set():
            try:
                data = await self._stream.receive_some(_RECEIVE_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self._mark_closed(1006, "socket ended")
                return
            self._ws.receive_data(data)
            for event in self._ws.events():
                if isinstance(event, TextMessage):
                    parts.append(event.data)
                    if event.message_finished:
                        self._deliver("".join(parts))
                        parts = []
                elif isinstance(event, Ping):
                    await self._write(self._ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    with suppress(LocalProtocolError):
                        await self._write(self._ws.send(event.response()))
                    self._mark_closed(event.code, event.reason or "")
                    return

    async def aclose(self) -> None:
        """Send a normal close (if still open) and wait briefly for the server's answer."""
        if not self.closed.is_set():
            with suppress(LocalProtocolError):
                await self._write(self._ws.send(CloseConnection(code=1000, reason="bye")))
            with trio.move_on_after(2):
                await self.closed.wait()


async def _handshake(
    stream: trio.SocketStream, ws: WSConnection, host: str, target: str, headers: list[tuple[bytes, bytes]]
) -> None:
    await stream.send_all(ws.send(Request(host=host, target=target, extra_headers=headers)))
    while True:
        data = await stream.receive_some(_RECEIVE_BYTES)
        if not data:
            raise HandshakeRejectedError(0)
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                return
            if isinstance(event, RejectConnection):
                raise HandshakeRejectedError(event.status_code)


@asynccontextmanager
async def connect(
    url: str, *, origin: str | None = None, token: str | None = None, token_in_query: bool = False
) -> AsyncGenerator[AcpClient]:
    """Open a client WebSocket to ``url`` (``ws://host:port/acp``) and read in the background.

    Args:
        url: The server URL, as ``ServerHandle.url`` gives it; a ``?token=…`` in it is taken
            as ``token`` when no ``token`` is given (and is never sent in the URL unless
            ``token_in_query`` says so).
        origin: An ``Origin`` header to send, or ``None``.
        token: Sent as ``Authorization: Bearer …``, or ``None`` to send none.
        token_in_query: Send the token as ``?token=…`` instead, as a browser must (query
            strings end up in proxy and server logs; prefer the header).

    Raises:
        HandshakeRejectedError: the upgrade was refused (``status`` is the HTTP status).
    """
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or 80
    target = parts.path or "/"
    if token is None:
        token = next(iter(parse_qs(parts.query).get("token", [])), None)
    headers = [] if origin is None else [(b"origin", origin.encode())]
    if token is not None and token_in_query:
        target += f"?token={quote(token, safe='')}"
    elif token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    stream = await trio.open_tcp_stream(host, port)
    async with stream:
        ws = WSConnection(ConnectionType.CLIENT)
        await _handshake(stream, ws, parts.netloc, target, headers)
        client = AcpClient(stream, ws)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read)  # pyright: ignore[reportPrivateUsage]
            try:
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await client.aclose()
                nursery.cancel_scope.cancel()
