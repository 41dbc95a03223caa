"""``serve``: the listener, the HTTP routes, the upgrade checks and shutdown (spec §2.2 to §2.5, §4)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
from typing import Final
from urllib.parse import parse_qs, urlsplit

import h11
import trio
from wsproto.utilities import generate_accept_token

from agent_server._config import ServerConfig
from agent_server._connection import AcpConnection
from agent_server._sessions import ServerState
from agent_server._transport import WebSocketDriver
from harness_kernel.store import SqliteSessionStore

__all__ = ["ServerHandle", "default_db_path", "serve"]

_log: Final = logging.getLogger("agent_server")

_HEAD_SECONDS: Final = 10.0
_MAX_HEAD_BYTES: Final = 16 * 1024
_READY_CACHE_SECONDS: Final = 1.0
_SERVICE: Final = "agent-server"


def default_db_path(root: str) -> str:
    """The default store file for ``root``: under the user's state directory, never in the workspace."""
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    digest = hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return os.path.join(state_home, "harness-agent-server", digest, "sessions.sqlite")


def _prepare_db(path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)


class ServerHandle:
    """A running server: its URL, its real port and a graceful ``aclose``."""

    def __init__(self, url: str, port: int, server: _Server) -> None:
        self.url: Final = url
        self.port: Final = port
        self._server = server

    def __repr__(self) -> str:
        return f"<ServerHandle {self.url}>"

    async def aclose(self) -> None:
        """Stop accepting, end every connection (1001) and close an owned store; returns when done."""
        await self._server.shutdown()


class _HttpReply:
    def __init__(self, status: int, body: bytes, content_type: str, *, no_store: bool = False) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.no_store = no_store


def _json_reply(status: int, document: object, *, no_store: bool = False) -> _HttpReply:
    body = json.dumps(document, separators=(",", ":")).encode()
    return _HttpReply(status, body, "application/json", no_store=no_store)


def _text_reply(status: int, text: str) -> _HttpReply:
    return _HttpReply(status, text.encode(), "text/plain; charset=utf-8")


def _header(request: h11.Request, name: bytes) -> list[bytes]:
    return [value for key, value in request.headers if key == name]


def _valid_handshake(request: h11.Request) -> bytes | None:
    """The ``Sec-WebSocket-Key`` of a valid upgrade request, else ``None``."""
    if request.method != b"GET":
        return None
    upgrade = _header(request, b"upgrade")
    if len(upgrade) != 1 or upgrade[0].strip().lower() != b"websocket":
        return None
    tokens = {
        token.strip().lower() for value in _header(request, b"connection") for token in value.split(b",")
    }
    if b"upgrade" not in tokens:
        return None
    keys = _header(request, b"sec-websocket-key")
    versions = _header(request, b"sec-websocket-version")
    if len(keys) != 1 or versions != [b"13"]:
        return None
    try:
        decoded = base64.b64decode(keys[0].strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return keys[0].strip() if len(decoded) == 16 else None


class _Server:
    def __init__(
        self, config: ServerConfig, state: ServerState, listeners: list[trio.SocketListener]
    ) -> None:
        self._config = config
        self._state = state
        self._listeners = listeners
        self._accepting = trio.CancelScope()
        self._shutting_down = False
        self._done = trio.Event()
        self._open_sockets = 0
        self._http_scopes: set[trio.CancelScope] = set()
        self._websockets: set[WebSocketDriver] = set()
        self._ready_cached: tuple[float, bool] | None = None
        self._ready_probe: trio.Event | None = None

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as connections:
                with self._accepting:
                    async with trio.open_nursery() as acceptors:
                        for listener in self._listeners:
                            acceptors.start_soon(self._accept, listener, connections)
                self._shutting_down = True
                for listener in self._listeners:
                    await listener.aclose()
                for scope in list(self._http_scopes):
                    scope.cancel()
                for driver in list(self._websockets):
                    driver.stop_reading()
        finally:
            self._done.set()

    async def shutdown(self) -> None:
        self._accepting.cancel()
        await self._done.wait()

    async def _accept(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError:
                _log.exception("accept failed")
                await trio.sleep(0.1)
                continue
            connections.start_soon(self._serve_socket, stream)

    async def _serve_socket(self, stream: trio.SocketStream) -> None:
        self._open_sockets += 1
        try:
            async with stream:
                await self._serve_http(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:
            _log.exception("connection failed")
        finally:
            self._open_sockets -= 1

    async def _send_reply(self, stream: trio.SocketStream, http: h11.Connection, reply: _HttpReply) -> None:
        headers = [
            ("content-type", reply.content_type),
            ("content-length", str(len(reply.body))),
            ("connection", "close"),
        ]
        if reply.no_store:
            headers.append(("cache-control", "no-store"))
        try:
            data = http.send(h11.Response(status_code=reply.status, headers=headers))
            data = (data or b"") + (http.send(h11.Data(data=reply.body)) or b"")
            data += http.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            return
        with trio.move_on_after(_HEAD_SECONDS):
            await stream.send_all(data)

    async def _read_head(self, stream: trio.SocketStream, http: h11.Connection) -> h11.Request | None:
        received = 0
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65_536)
                received += len(data)
                http.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                # h11 bounds only a head that is still incomplete; one that arrived whole in a
                # single read is measured here (what h11 has not consumed is not head).
                if received - len(http.trailing_data[0]) > _MAX_HEAD_BYTES:
                    raise h11.RemoteProtocolError("request head is too large", error_status_hint=431)
                return event
            return None

    async def _serve_http(self, stream: trio.SocketStream) -> None:
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD_BYTES)
        scope = trio.CancelScope(deadline=trio.current_time() + _HEAD_SECONDS)
        self._http_scopes.add(scope)
        request: h11.Request | None = None
        try:
            with scope:
                request = await self._read_head(stream, http)
        except h11.RemoteProtocolError as error:
            status = 431 if error.error_status_hint == 431 else 400
            await self._send_reply(stream, http, _text_reply(status, "bad request"))
            return
        finally:
            self._http_scopes.discard(scope)
        if scope.cancelled_caught:
            if not self._shutting_down:
                await self._send_reply(stream, http, _text_reply(408, "request timeout"))
            return
        if request is None:
            return
        await self._route(stream, http, request)

    async def _route(self, stream: trio.SocketStream, http: h11.Connection, request: h11.Request) -> None:
        try:
            target = urlsplit(request.target.decode("ascii"))
            query = parse_qs(target.query, keep_blank_values=True, strict_parsing=False)
        except (UnicodeDecodeError, ValueError):
            await self._send_reply(stream, http, _text_reply(400, "bad request target"))
            return
        if target.path in ("/health", "/health/live", "/health/ready"):
            if request.method != b"GET":
                await self._send_reply(stream, http, _text_reply(405, "method not allowed"))
            elif target.path == "/health/ready":
                await self._send_reply(stream, http, await self._ready_reply())
            else:
                await self._send_reply(stream, http, _json_reply(200, {"service": _SERVICE, "live": True}))
            return
        if target.path != self._config.path:
            not_found = {"error": {"code": "NOT_FOUND", "message": "not found"}}
            await self._send_reply(stream, http, _json_reply(404, not_found))
            return
        if not self._authorised(request, query):
            await self._send_reply(stream, http, _text_reply(403, "forbidden"))
            return
        if self._open_sockets > self._config.max_connections:
            await self._send_reply(stream, http, _text_reply(503, "too many connections"))
            return
        key = _valid_handshake(request)
        if key is None:
            await self._send_reply(stream, http, _text_reply(400, "invalid WebSocket handshake"))
            return
        await self._upgrade(stream, http, key)

    def _authorised(self, request: h11.Request, query: dict[str, list[str]]) -> bool:
        origins = _header(request, b"origin")
        if origins:
            allowed = {origin.encode("utf-8") for origin in self._config.allowed_origins}
            if len(origins) != 1 or origins[0] not in allowed:
                return False
        token = self._config.auth_token
        if token is None:
            return True
        given = query.get("token", [])
        if len(given) != 1:
            return False
        return hmac.compare_digest(given[0].encode("utf-8", "surrogateescape"), token.encode("utf-8"))

    async def _upgrade(self, stream: trio.SocketStream, http: h11.Connection, key: bytes) -> None:
        while http.their_state is h11.SEND_BODY:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await stream.receive_some(65_536))
        headers: list[tuple[bytes, bytes]] = [
            (b"upgrade", b"websocket"),
            (b"connection", b"Upgrade"),
            (b"sec-websocket-accept", generate_accept_token(key)),
        ]
        data = http.send(h11.InformationalResponse(status_code=101, headers=headers)) or b""
        trailing, _ = http.trailing_data
        await stream.send_all(data)
        await self._serve_websocket(stream, bytes(trailing))

    async def _serve_websocket(self, stream: trio.SocketStream, trailing: bytes) -> None:
        driver = WebSocketDriver(stream, trailing, max_message_bytes=self._config.max_message_bytes)
        self._websockets.add(driver)
        try:
            async with trio.open_nursery() as writer:
                writer.start_soon(driver.write_frames)
                async with trio.open_nursery() as tasks:
                    try:
                        connection = AcpConnection(self._state, driver.send_text, tasks)
                    except Exception:
                        _log.exception("connection setup failed")
                        driver.close(1011, "internal error")
                    else:
                        if not self._shutting_down:
                            await driver.read_messages(connection.receive)
                        # Disconnect semantics: frames still waiting for outbound room are dropped.
                        driver.discard_output()
                        with trio.CancelScope(shield=True):
                            await connection.disconnect()
                with trio.CancelScope(shield=True):
                    await driver.finish(1001, "server shutting down")
                writer.cancel_scope.cancel()
        finally:
            self._websockets.discard(driver)

    async def _ready_reply(self) -> _HttpReply:
        if await self._is_ready():
            return _json_reply(200, {"service": _SERVICE, "ready": True})
        failure = {"error": {"code": "AGENT_NOT_READY", "message": "agent server is not ready"}}
        return _json_reply(503, failure, no_store=True)

    async def _is_ready(self) -> bool:
        cached = self._ready_cached
        if cached is not None and trio.current_time() - cached[0] < _READY_CACHE_SECONDS:
            return cached[1]
        if self._ready_probe is not None:
            await self._ready_probe.wait()
            return self._ready_cached is not None and self._ready_cached[1]
        probe = self._ready_probe = trio.Event()
        ready = False
        try:
            ready = await self._check_ready()
        finally:
            self._ready_cached = (trio.current_time(), ready)
            self._ready_probe = None
            probe.set()
        return ready

    async def _check_ready(self) -> bool:
        try:
            if self._state.store is not None:
                await self._state.store.current_time()
            readiness = self._config.readiness_path
            if readiness is not None:
                path = os.path.join(self._state.root, readiness)
                return await trio.to_thread.run_sync(os.path.exists, path)
        except Exception:
            _log.exception("readiness check failed")
            return False
        return True


def _url(host: str, port: int, path: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"ws://{shown}:{port}{path}"


async def serve(
    config: ServerConfig, *, task_status: trio.TaskStatus[ServerHandle] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run the server until :meth:`ServerHandle.aclose`; ``task_status.started`` gets the handle.

    Validates the configuration, opens the store, binds, then serves.

    Raises:
        ValueError: a setting checked before binding is invalid (§2.2, §9.1).
        OSError: the address cannot be bound.
    """
    if not isinstance(config, ServerConfig):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError("config must be a ServerConfig")
    root = config.check_serving()
    store = config.session_store
    owned = False
    if store is None and config.persistence:
        path = config.db_path if config.db_path is not None else default_db_path(root)
        await trio.to_thread.run_sync(_prepare_db, path)
        store = SqliteSessionStore(path)
        owned = True
    try:
        if owned and store is not None:
            await store.__aenter__()  # opens the file now, so a bad path fails before binding
        listeners = await trio.open_tcp_listeners(config.port, host=config.host)
        state = ServerState(config=config, root=root, store=store)
        server = _Server(config, state, listeners)
        port = listeners[0].socket.getsockname()[1]
        task_status.started(ServerHandle(_url(config.host, port, config.path), port, server))
        await server.run()
    finally:
        if owned and store is not None:
            await store.aclose()
