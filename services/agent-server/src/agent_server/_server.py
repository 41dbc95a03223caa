"""``serve``: the listener, the HTTP routes, the upgrade checks and shutdown (spec §2.2 to §2.5, §4)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib
import json
import logging
import os
import resource
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Final, cast
from urllib.parse import parse_qs, urlsplit

import h11
import trio
from wsproto.utilities import generate_accept_token

from agent_server._auth import DEFAULT_PRINCIPAL, Authenticator, FailureThrottle, generate_token
from agent_server._config import ServerConfig, ServerHooks
from agent_server._connection import AcpConnection
from agent_server._quotas import apply_retention
from agent_server._resume import InterruptedSessions
from agent_server._state import ServerState
from agent_server._transport import WebSocketDriver
from agent_server.client import AcpClient, connect
from harness_kernel.store import MemorySessionStore, SessionStore, SqliteSessionStore

__all__ = [
    "ServerHandle",
    "default_db_path",
    "default_token_path",
    "serve",
    "serve_with_hooks",
]

_log: Final = logging.getLogger("agent_server")

_HEAD_SECONDS: Final = 10.0
_MAX_HEAD_BYTES: Final = 16 * 1024
_READY_CACHE_SECONDS: Final = 1.0
_SERVICE: Final = "agent-server"
_RETENTION_INTERVAL_SECONDS: Final = 3600.0
_DESCRIPTOR_HEADROOM: Final = 64
"""Descriptors beyond sockets and session adapters: the store, its WAL, logs, git pipes."""


def _state_directory(root: str) -> str:
    """This root's folder under the user's state directory, never inside the workspace."""
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    digest = hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return os.path.join(state_home, "harness-agent-server", digest)


def default_db_path(root: str) -> str:
    """The default store file for ``root``: under the user's state directory, never in the workspace."""
    return os.path.join(_state_directory(root), "sessions.sqlite")


def default_token_path(root: str) -> str:
    """The default token file of ``agent-server serve`` for ``root``, beside the default store."""
    return os.path.join(_state_directory(root), "token")


def _prepare_db(path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)


class ServerHandle:
    """A running server: its URL, its real port, its token and a graceful ``aclose``.

    ``token`` is the token a client of this process presents: the one ``serve`` generated
    (no token configured), or the single configured ``auth_token``; ``None`` when several
    principals are configured (``auth_tokens``), whose tokens their owners already hold.
    """

    def __init__(self, url: str, port: int, token: str | None, server: _Server) -> None:
        self.url: Final = url
        self.port: Final = port
        self.token: Final = token
        self._server = server

    def __repr__(self) -> str:
        return f"<ServerHandle {self.url}>"

    def connect(
        self, *, origin: str | None = None, token: str | None = None
    ) -> AbstractAsyncContextManager[AcpClient]:
        """``agent_server.client.connect`` to this server, presenting ``token`` or else :attr:`token`."""
        return connect(self.url, origin=origin, token=token if token is not None else self.token)

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


@dataclass(eq=False)
class _Handshaking:
    """A socket that has not completed an upgrade: it can be evicted, or cancelled at shutdown."""

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    evicted: bool = False


@dataclass(frozen=True)
class _Upgrade:
    """What the HTTP phase hands to the WebSocket phase: who connected, and bytes already read."""

    principal: str
    trailing: bytes


def _presented_token(request: h11.Request, query: dict[str, list[str]]) -> str | None:
    """The token a request presents (``Authorization: Bearer`` or ``?token=``), or ``None``.

    Ambiguity counts as no token: two headers, two query values, another scheme, or a header
    and a query value that differ.
    """
    headers = _header(request, b"authorization")
    values = query.get("token", [])
    if len(headers) > 1 or len(values) > 1:
        return None
    from_header: str | None = None
    if headers:
        scheme, _, credentials = headers[0].decode("latin-1").strip().partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return None
        from_header = credentials.strip()
    from_query = values[0] if values else None
    if from_header is not None and from_query is not None and from_header != from_query:
        return None
    return from_header if from_header is not None else from_query


def _peer_address(stream: trio.SocketStream) -> str:
    """The peer's IP address (the port is left out: each connection has another)."""
    try:
        peer: tuple[object, ...] | str = stream.socket.getpeername()
    except OSError:
        return "unknown"
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


class _Server:
    def __init__(
        self,
        config: ServerConfig,
        state: ServerState,
        listeners: list[trio.SocketListener],
        authenticator: Authenticator,
    ) -> None:
        self._config = config
        self._state = state
        self._listeners = listeners
        self._authenticator = authenticator
        self._throttle = FailureThrottle(trio.current_time)
        self._accepting = trio.CancelScope()
        self._shutting_down = False
        self._done = trio.Event()
        # Insertion-ordered, so the first entry is the socket that has waited longest.
        self._handshaking: dict[int, _Handshaking] = {}
        self._upgraded = 0
        self._websockets: set[WebSocketDriver] = set()
        self._ready_cached: tuple[float, bool] | None = None
        self._ready_probe: trio.Event | None = None
        self._retention = trio.CancelScope()

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as connections:
                if (
                    self._config.storage.retention_days is not None
                    or self._config.storage.retention_max_bytes is not None
                ):
                    connections.start_soon(self._apply_retention)
                resumed = None
                if self._config.storage.resume_interrupted:
                    resumed = InterruptedSessions(self._state, connections)
                    connections.start_soon(resumed.start)
                with self._accepting:
                    async with trio.open_nursery() as acceptors:
                        for listener in self._listeners:
                            acceptors.start_soon(self._accept, listener, connections)
                self._shutting_down = True
                for listener in self._listeners:
                    await listener.aclose()
                for waiting in list(self._handshaking.values()):
                    waiting.scope.cancel()
                for driver in list(self._websockets):
                    driver.stop_reading()
                self._retention.cancel()
                if resumed is not None:
                    with trio.CancelScope(shield=True):
                        await resumed.stop()
        finally:
            self._done.set()

    async def shutdown(self) -> None:
        self._accepting.cancel()
        await self._done.wait()

    async def _apply_retention(self) -> None:
        """Delete finished sessions by ``retention_days`` and ``retention_max_bytes``, now and every hour."""
        with self._retention:
            while True:
                try:
                    await apply_retention(
                        self._state.store,
                        self._state.quotas,
                        max_age_days=self._config.storage.retention_days,
                        max_bytes=self._config.storage.retention_max_bytes,
                    )
                except Exception:
                    _log.exception("applying the retention policy failed")
                await trio.sleep(_RETENTION_INTERVAL_SECONDS)

    async def _accept(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError:
                _log.exception("accept failed")
                await trio.sleep(0.1)
                continue
            connections.start_soon(self._serve_socket, stream)

    def _enter_handshake(self) -> _Handshaking:
        """Register a new socket; at the cap, the one waiting longest is evicted to make room.

        Sockets that never finish a request (or idle at it) then cost a fixed number of
        descriptors, and a client that sends its request promptly still gets in.
        """
        while len(self._handshaking) >= self._config.limits.max_pending_connections:
            oldest = self._handshaking.pop(next(iter(self._handshaking)))
            oldest.evicted = True
            oldest.scope.cancel()
        waiting = _Handshaking()
        self._handshaking[id(waiting)] = waiting
        return waiting

    async def _serve_socket(self, stream: trio.SocketStream) -> None:
        waiting = self._enter_handshake()
        upgrade: _Upgrade | None = None
        try:
            async with stream:
                try:
                    with waiting.scope:
                        upgrade = await self._serve_http(stream, waiting)
                finally:
                    self._handshaking.pop(id(waiting), None)
                if upgrade is not None and not self._shutting_down:
                    await self._serve_websocket(stream, upgrade)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:
            _log.exception("connection failed")
        finally:
            if upgrade is not None:
                self._upgraded -= 1

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

    async def _serve_http(self, stream: trio.SocketStream, waiting: _Handshaking) -> _Upgrade | None:
        """Read one request and answer it; an accepted upgrade is returned, not yet served."""
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD_BYTES)
        request: h11.Request | None = None
        try:
            with trio.move_on_after(_HEAD_SECONDS) as head:
                request = await self._read_head(stream, http)
        except h11.RemoteProtocolError as error:
            status = 431 if error.error_status_hint == 431 else 400
            await self._send_reply(stream, http, _text_reply(status, "bad request"))
            return None
        if head.cancelled_caught:
            if not self._shutting_down and not waiting.evicted:
                await self._send_reply(stream, http, _text_reply(408, "request timeout"))
            return None
        if request is None:
            return None
        return await self._route(stream, http, request)

    async def _route(
        self, stream: trio.SocketStream, http: h11.Connection, request: h11.Request
    ) -> _Upgrade | None:
        try:
            target = urlsplit(request.target.decode("ascii"))
            query = parse_qs(target.query, keep_blank_values=True, strict_parsing=False)
        except (UnicodeDecodeError, ValueError):
            await self._send_reply(stream, http, _text_reply(400, "bad request target"))
            return None
        if target.path in ("/health", "/health/live", "/health/ready"):
            if request.method != b"GET":
                await self._send_reply(stream, http, _text_reply(405, "method not allowed"))
            elif target.path == "/health/ready":
                await self._send_reply(stream, http, await self._ready_reply())
            else:
                await self._send_reply(stream, http, _json_reply(200, {"service": _SERVICE, "live": True}))
            return None
        if target.path != self._config.network.path:
            not_found = {"error": {"code": "NOT_FOUND", "message": "not found"}}
            await self._send_reply(stream, http, _json_reply(404, not_found))
            return None
        if not self._origin_allowed(request):
            await self._send_reply(stream, http, _text_reply(403, "forbidden"))
            return None
        presented = _presented_token(request, query)
        principal = None if presented is None else self._authenticator.identify(presented)
        if principal is None:
            # Slowed down per address before the answer; a correct token never waits.
            await trio.sleep(self._throttle.record_failure(_peer_address(stream)))
            await self._send_reply(stream, http, _text_reply(403, "forbidden"))
            return None
        if self._upgraded >= self._config.limits.max_connections:
            await self._send_reply(stream, http, _text_reply(503, "too many connections"))
            return None
        key = _valid_handshake(request)
        if key is None:
            await self._send_reply(stream, http, _text_reply(400, "invalid WebSocket handshake"))
            return None
        self._upgraded += 1  # counted before the first await, so the cap cannot be overrun
        try:
            trailing = await self._accept_upgrade(stream, http, key)
        except BaseException:
            self._upgraded -= 1
            raise
        return _Upgrade(principal=principal, trailing=trailing)

    def _origin_allowed(self, request: h11.Request) -> bool:
        origins = _header(request, b"origin")
        if not origins:
            return True
        allowed = {origin.encode("utf-8") for origin in self._config.network.allowed_origins}
        return len(origins) == 1 and origins[0] in allowed

    async def _accept_upgrade(self, stream: trio.SocketStream, http: h11.Connection, key: bytes) -> bytes:
        """Answer 101; returns what the client sent after its request (the first frames)."""
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
        trailing = bytes(http.trailing_data[0])
        await stream.send_all(data)
        return trailing

    async def _serve_websocket(self, stream: trio.SocketStream, upgrade: _Upgrade) -> None:
        driver = WebSocketDriver(
            stream,
            upgrade.trailing,
            max_message_bytes=self._config.limits.max_message_bytes,
            stall_seconds=self._config.limits.outbound_stall_ms / 1000,
            close_grace_seconds=self._config.limits.close_grace_ms / 1000,
        )
        self._websockets.add(driver)
        try:
            async with trio.open_nursery() as writer:
                writer.start_soon(driver.write_frames)
                async with trio.open_nursery() as tasks:
                    try:
                        connection = AcpConnection(
                            self._state, driver.send_text, tasks, principal=upgrade.principal
                        )
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
            await self._state.store.current_time()
            readiness = self._config.network.readiness_path
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
    await serve_with_hooks(config, ServerHooks(), task_status=task_status)


async def serve_with_hooks(
    config: ServerConfig,
    hooks: ServerHooks,
    *,
    task_status: trio.TaskStatus[ServerHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """:func:`serve` with ``hooks`` in place of the real runtime, clock and ids: tests' entry."""
    if not isinstance(config, ServerConfig):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError("config must be a ServerConfig")
    root = config.check_serving()
    tokens = config.network.configured_tokens()
    generated = None
    if tokens is None:
        generated = generate_token()
        tokens = {DEFAULT_PRINCIPAL: generated}
    authenticator = Authenticator(tokens)
    _raise_descriptor_limit(config)
    store, owned, persistent = await _choose_store(config, root, hooks)
    try:
        if owned:
            await store.__aenter__()  # opens the file now, so a bad path fails before binding
        listeners = await trio.open_tcp_listeners(config.network.port, host=config.network.host)
        # Only a store in a local file has a disk whose free space the server can check.
        sqlite = store if isinstance(store, SqliteSessionStore) else None
        storage = None if sqlite is None else await trio.to_thread.run_sync(_directory_of, sqlite.path)
        state = ServerState(
            config=config,
            root=root,
            store=store,
            hooks=hooks,
            persistent=persistent,
            storage_directory=storage,
        )
        if state.quotas.counting:
            await state.quotas.measure(store)  # once: later appends are counted as they are recorded
        server = _Server(config, state, listeners, authenticator)
        port = listeners[0].socket.getsockname()[1]
        token = generated if generated is not None else config.network.auth_token
        task_status.started(
            ServerHandle(_url(config.network.host, port, config.network.path), port, token, server)
        )
        await server.run()
    finally:
        if owned:
            await store.aclose()


async def _choose_store(
    config: ServerConfig, root: str, hooks: ServerHooks
) -> tuple[SessionStore, bool, bool]:
    """The sessions' store, whether the server owns (opens and closes) it, and whether it persists.

    A given ``session_store`` is used as it is; otherwise ``persistence`` opens SQLite at
    ``db_path`` (or the default file), and without persistence sessions live in a
    :class:`MemorySessionStore` that ``session/restore`` may not read (§4).
    """
    if config.storage.session_store is not None:
        return config.storage.session_store, False, True
    if config.storage.database_url is not None:
        return postgres_store(config.storage.database_url), True, True
    if not config.storage.persistence:
        return MemorySessionStore(now=hooks.now), True, False
    path = config.storage.db_path if config.storage.db_path is not None else default_db_path(root)
    await trio.to_thread.run_sync(_prepare_db, path)
    return SqliteSessionStore(path), True, True


POSTGRES_STORE_MISSING: Final = (
    "a PostgreSQL session store needs the harness-store-postgres distribution: install agent-server[postgres]"
)


def postgres_store(database_url: str) -> SessionStore:
    """A ``harness_store_postgres.PostgresSessionStore`` on ``database_url`` (not yet opened).

    The distribution is optional (SQLite users install no database driver), so it is imported
    only here.

    Raises:
        ValueError: harness-store-postgres is not installed.
    """
    try:
        module = importlib.import_module("harness_store_postgres")
    except ImportError:
        raise ValueError(POSTGRES_STORE_MISSING) from None
    factory = cast("Callable[[str], SessionStore]", module.PostgresSessionStore)
    return factory(database_url)


def _directory_of(path: str | os.PathLike[str]) -> str:
    return os.path.dirname(os.path.abspath(path))


def _raise_descriptor_limit(config: ServerConfig) -> None:
    """Raise the soft descriptor limit towards what the configured caps can hold open.

    Connections, handshaking sockets and (with a workspace adapter) one root descriptor per
    live session fit under the limit, so an idle-socket flood meets the handshake cap and
    never ``EMFILE`` at ``accept``. Where the hard limit is lower, the shortfall is logged.
    """
    adapters = config.limits.max_sessions if config.workspace.workspace_adapter is not None else 0
    needed = (
        config.limits.max_connections
        + config.limits.max_pending_connections
        + adapters
        + _DESCRIPTOR_HEADROOM
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            _log.exception("raising the descriptor limit failed")
        if soft < needed:
            _log.warning(
                "the descriptor limit %d is below the %d the connection and session caps need;"
                " lower max_connections or raise the hard limit",
                soft,
                needed,
            )
