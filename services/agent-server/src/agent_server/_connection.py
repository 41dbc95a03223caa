"""One ``harness/acp/1`` connection: envelopes in, one task per request, responses out (spec §3)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec
import trio

from agent_server._errors import (
    AcpError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    NotInitializedError,
    ProtocolVersionError,
    StoreUnavailableError,
    store_unavailable_in,
)
from agent_server._protocol import (
    PROTOCOL_VERSION,
    CancelParams,
    CloseParams,
    ContinueParams,
    InitializeParams,
    InitializeResult,
    NewSessionParams,
    PermissionRespondParams,
    PromptParams,
    Request,
    RestoreParams,
    ServerCapabilities,
    SteerParams,
    decode_params,
    encode_error,
    encode_result,
    parse_request,
)
from agent_server._restore import restore_session
from agent_server._sessions import PromptCanceledError, SessionManager
from agent_server._state import ServerState
from agent_server._version import __version__

__all__ = ["AGENT_NAME", "AcpConnection"]

_log: Final = logging.getLogger("agent_server")

AGENT_NAME: Final = "harness-agent-server"
_METHODS: Final = frozenset(
    {
        "initialize",
        "session/new",
        "session/prompt",
        "session/steer",
        "permission/respond",
        "session/cancel",
        "session/close",
        "session/restore",
        "session/continue",
    }
)
_REQUEST_MARGIN: Final = 32


class AcpConnection:
    """The protocol state of one WebSocket.

    Args:
        state: The server-wide state.
        send: Queues one text frame on the socket, waiting for outbound room.
        nursery: Owns this connection's request and timer tasks.
        principal: Who authenticated this connection; its sessions are bound to it.
    """

    def __init__(
        self,
        state: ServerState,
        send: Callable[[str], Awaitable[None]],
        nursery: trio.Nursery,
        *,
        principal: str,
    ) -> None:
        self._state = state
        self._nursery = nursery
        self._principal = principal
        self._sessions = SessionManager(state, send, nursery, principal=principal)
        self._initialized = False
        self._in_flight = trio.Semaphore(state.config.limits.max_sessions_per_connection + _REQUEST_MARGIN)

    async def receive(self, text: str) -> None:
        """Accept one text message; waits (so the socket is not read) while too many requests run."""
        await self._in_flight.acquire()
        parsed = parse_request(text)
        if not isinstance(parsed, Request):
            self._in_flight.release()
            error, request_id = parsed
            await self._sessions.send(encode_error(request_id, error))
            return
        if parsed.method == "initialize":
            # Answered in order, before any later frame is read, so initialize comes first.
            try:
                await self._answer(parsed.id, self._initialize(parsed.params))
            except AcpError as error:
                await self._sessions.send(encode_error(parsed.id, error))
            finally:
                self._in_flight.release()
            return
        self._nursery.start_soon(self._serve_request, parsed)

    async def _answer(self, request_id: str | int, result: msgspec.Struct) -> None:
        await self._sessions.send(encode_result(request_id, result))

    async def _serve_request(self, request: Request) -> None:
        try:
            result = await self._dispatch(request)
        except AcpError as error:
            await self._sessions.send(encode_error(request.id, error))
        except PromptCanceledError:
            # A canceled prompt is answered with the internal error (§5.3 step 4); it is an
            # outcome the client asked for, not a failure worth a traceback in the log.
            _log.info("request %s ended canceled", request.method)
            await self._sessions.send(encode_error(request.id, None))
        except Exception as error:
            if store_unavailable_in(error):
                # An outage, not a bug: one line, no traceback, and a typed answer.
                _log.warning("request %s failed: the session store is unreachable", request.method)
                await self._sessions.send(encode_error(request.id, StoreUnavailableError()))
            else:
                _log.exception("request %s failed", request.method)
                await self._sessions.send(encode_error(request.id, None))
        else:
            await self._answer(request.id, result)
        finally:
            self._in_flight.release()

    def _initialize(self, raw: dict[str, object]) -> InitializeResult:
        if self._initialized:
            raise InvalidRequestError("initialize may be sent only once")
        params = decode_params(raw, InitializeParams)
        if params.protocol_version != PROTOCOL_VERSION:
            raise ProtocolVersionError()
        if params.capabilities.streaming is not True or params.capabilities.permissioning is not True:
            raise InvalidParamsError("ACP clients must support streaming and permissioning")
        self._initialized = True
        return InitializeResult(
            protocol_version=PROTOCOL_VERSION,
            agent_name=AGENT_NAME,
            agent_version=__version__,
            capabilities=ServerCapabilities(
                streaming=True, permissioning=True, sessions=self._state.persistent
            ),
            models=list(self._state.config.model.model_names),
        )

    async def _dispatch(self, request: Request) -> msgspec.Struct:
        method, raw = request.method, request.params
        if method not in _METHODS:
            raise MethodNotFoundError()
        if not self._initialized:
            raise NotInitializedError()
        sessions = self._sessions
        if method == "session/new":
            return await sessions.create(decode_params(raw, NewSessionParams))
        if method == "session/prompt":
            return await sessions.prompt(decode_params(raw, PromptParams))
        if method == "permission/respond":
            return sessions.respond(decode_params(raw, PermissionRespondParams))
        if method == "session/steer":
            return await sessions.steer(decode_params(raw, SteerParams))
        if method == "session/cancel":
            return await sessions.cancel(decode_params(raw, CancelParams))
        if method == "session/close":
            return await sessions.close(decode_params(raw, CloseParams))
        if method == "session/continue":
            return await sessions.continue_session(decode_params(raw, ContinueParams))
        return await restore_session(
            self._state, decode_params(raw, RestoreParams), sessions.send, principal=self._principal
        )

    async def disconnect(self) -> None:
        """Apply the disconnect semantics to every session; nothing is sent afterwards."""
        await self._sessions.disconnect()
