"""Newline-delimited JSON-RPC 2.0 over a pair of byte streams (the ACP stdio transport).

:class:`StdioPeer` reads one message per line, answers envelope errors itself (``-32700``,
``-32600``), hands requests and notifications to callbacks in tasks of its own, and sends
requests of its own to the other side (``session/request_permission``), matching the answers
by id. Only protocol messages are ever written to the output stream.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import trio

__all__ = ["MAX_LINE_BYTES", "PeerError", "RpcError", "StdioPeer"]

JsonObject = dict[str, Any]
RequestHandler = Callable[[str, object], Awaitable[object]]
"""Called in the read loop, in arrival order: checks the request (raising :class:`RpcError`)
and returns the awaitable that computes its result, which then runs in a task of its own."""
NotificationHandler = Callable[[str, object], None]
"""Called in the read loop, in arrival order; it starts any waiting work in tasks itself."""

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
_MAX_ID_CHARS: Final = 256
_READ_BYTES: Final = 65_536
_log = logging.getLogger("agent_server.acp")


class RpcError(Exception):
    """An error answer to a request: a JSON-RPC ``code`` and a message for people."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class PeerError(Exception):
    """The client answered our request with an error, or the connection ended first."""


@dataclass(eq=False)
class _Waiter:
    done: trio.Event
    message: JsonObject | None = None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _valid_id(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**53 - 1
    return isinstance(value, str) and len(value) <= _MAX_ID_CHARS


class StdioPeer:
    """One JSON-RPC connection over ``receive`` (lines in) and ``send`` (lines out).

    Args:
        receive: The input stream (the process's stdin).
        send: The output stream (the process's stdout, which carries nothing else).
        on_request: Admits a request in arrival order and returns its answer's awaitable;
            either may raise :class:`RpcError`.
        on_notification: Handles a notification in arrival order (errors are logged, never
            answered).
    """

    def __init__(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
    ) -> None:
        self._receive = receive
        self._send = send
        self._on_request = on_request
        self._on_notification = on_notification
        self._send_lock = trio.Lock()
        self._ids = itertools.count(1)
        self._waiters: dict[object, _Waiter] = {}
        self._closed = False

    async def write(self, message: JsonObject) -> None:
        """Write one message as one line; a closed output is logged and ignored."""
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
        async with self._send_lock:
            try:
                await self._send.send_all(line.encode("utf-8"))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                _log.warning("the client closed its input; a message was dropped")

    async def notify(self, method: str, params: JsonObject) -> None:
        """Send a notification."""
        await self.write({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: JsonObject) -> JsonObject:
        """Send a request to the client and return its result object.

        Raises:
            PeerError: the client answered with an error or a non-object result, or the
                input ended first.
        """
        request_id = next(self._ids)
        waiter = self._waiters[request_id] = _Waiter(trio.Event())
        try:
            await self.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            if not self._closed:
                await waiter.done.wait()
        finally:
            self._waiters.pop(request_id, None)
        message = waiter.message
        if message is None:
            raise PeerError(f"{method}: the client's input ended before it answered")
        result = message.get("result")
        if "error" in message or not isinstance(result, dict):
            raise PeerError(f"{method}: the client answered with an error or an invalid result")
        return result  # pyright: ignore[reportUnknownVariableType]

    async def run(self, nursery: trio.Nursery) -> None:
        """Read lines until the input ends, starting each request in ``nursery``."""
        buffer = bytearray()
        skipping = False
        while True:
            try:
                data = await self._receive.receive_some(_READ_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                break
            buffer += data
            while (end := buffer.find(b"\n")) >= 0:
                line, buffer = bytes(buffer[:end]), buffer[end + 1 :]
                if skipping:
                    skipping = False
                    continue
                await self._line(line, nursery)
            if len(buffer) > MAX_LINE_BYTES and not skipping:
                # The rest of this line is dropped unread; the next line is served again.
                skipping = True
                buffer.clear()
                await self._error(None, -32600, f"a message is longer than {MAX_LINE_BYTES} bytes")
            elif skipping:
                buffer.clear()
        self._closed = True
        for waiter in self._waiters.values():
            waiter.done.set()

    async def _error(self, request_id: object, code: int, message: str) -> None:
        await self.write({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    async def _line(self, line: bytes, nursery: trio.Nursery) -> None:
        if not line.strip():
            return
        try:
            message: object = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            await self._error(None, -32700, "parse error: the line is not a JSON document")
            return
        if not isinstance(message, dict):
            await self._error(
                None, -32600, "a JSON-RPC message must be an object (batches are not supported)"
            )
            return
        document: JsonObject = message  # pyright: ignore[reportUnknownVariableType]
        method = document.get("method")
        request_id = document.get("id")
        if method is None and "id" in document:
            self._deliver(document)
            return
        has_id = "id" in document
        if (
            not isinstance(method, str)
            or document.get("jsonrpc") != "2.0"
            or (has_id and not _valid_id(request_id))
        ):
            if "id" in document:
                answer_id = request_id if _valid_id(request_id) else None
                await self._error(answer_id, -32600, "not a JSON-RPC 2.0 request")
            else:
                _log.warning("ignored a message that is not a JSON-RPC 2.0 notification")
            return
        params = document.get("params", {})
        if "id" not in document:
            try:
                self._on_notification(method, params)
            except Exception as error:
                _log.warning("notification %s ignored: %s", method, error)
            return
        try:
            answer = self._on_request(method, params)
        except RpcError as error:
            await self._error(request_id, error.code, error.message)
            return
        nursery.start_soon(self._answer, request_id, method, answer)

    def _deliver(self, message: JsonObject) -> None:
        waiter = self._waiters.get(message.get("id"))
        if waiter is None or waiter.done.is_set():
            _log.warning("ignored an answer to no pending request")
            return
        waiter.message = message
        waiter.done.set()

    async def _answer(self, request_id: object, method: str, answer: Awaitable[object]) -> None:
        try:
            result = await answer
        except RpcError as error:
            await self._error(request_id, error.code, error.message)
        except Exception:
            _log.exception("request %s failed", method)
            await self._error(request_id, -32603, "internal error (see the agent's log)")
        else:
            await self.write({"jsonrpc": "2.0", "id": request_id, "result": result})
