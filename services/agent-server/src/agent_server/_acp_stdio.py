"""``agent-server acp``: the Agent Client Protocol over stdio, in front of harness/acp/1 (decision 043).

An editor spawns this process and speaks ACP (agentclientprotocol.com) on its stdin and
stdout. The process runs an embedded harness/acp/1 server on loopback with an ephemeral
token (as ``agent-server demo`` does) and talks to it with :class:`~agent_server.client.AcpClient`,
so every ACP prompt runs as a harness session: the same runtime, policy, permission path
and store, never a second loop.

An ACP session is one harness session, kept open on its own loopback connection: its first
prompt is the harness session's first turn, every later one a follow-up turn that sees the
conversation so far (issue #23). Should the harness session end under it (an idle timeout),
the next prompt opens another in the same workspace, so an ACP session is a chain of harness
sessions — usually of one. With a durable store the chain is recorded in
``<db>.acp-sessions.jsonl`` so that ``session/load`` can replay it; logs written when every
prompt had its own harness session load the same way.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import msgspec
import trio

from agent_server._acp_stdio_map import UpdateMapper, stop_reason
from agent_server._acp_stdio_rpc import PeerError, RpcError, StdioPeer
from agent_server._config import ServerConfig
from agent_server._embedded import embedded_server
from agent_server._server import ServerHandle
from agent_server._version import __version__
from agent_server.client import AcpClient, AcpClientError, ConnectionClosedError

__all__ = ["PROTOCOL_VERSION", "SessionLog", "run_acp_stdio", "run_stdio_process"]

JsonObject = dict[str, Any]

PROTOCOL_VERSION: Final = 1
"""The one ACP protocol version this adapter speaks."""
_RESOURCE_NOT_FOUND: Final = -32002
_RESTORE_PAGE: Final = 1000
_DRAIN_SECONDS: Final = 5.0
"""After the input ends, how long requests in flight may take to answer (a cancelled run ends fast)."""
_SESSION_FINISHED: Final = -32011
_ALLOW: Final = "allow-once"
_PERMISSION_OPTIONS: Final = (
    {"optionId": _ALLOW, "name": "Allow once", "kind": "allow_once"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
)
_log = logging.getLogger("agent_server.acp")
_T = TypeVar("_T")


class _InitializeParams(msgspec.Struct, rename="camel"):
    protocol_version: int


class _NewParams(msgspec.Struct, rename="camel"):
    cwd: str
    mcp_servers: list[Any]


class _LoadParams(msgspec.Struct, rename="camel"):
    session_id: str
    cwd: str
    mcp_servers: list[Any]


class _PromptParams(msgspec.Struct, rename="camel"):
    session_id: str
    prompt: list[dict[str, Any]]


class _SessionParams(msgspec.Struct, rename="camel"):
    session_id: str


def _params(params: object, kind: type[_T]) -> _T:
    try:
        return msgspec.convert(params, kind)
    except msgspec.ValidationError as error:
        raise RpcError(-32602, f"invalid params: {error}") from None


class SessionLog:
    """The harness sessions of each ACP session, one JSON line per harness session, in an
    owner-only file (older logs hold a line per prompt, each naming its own harness session).

    Args:
        path: The file (created with mode 0600 on first use).
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def _append(self, line: str) -> None:
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(descriptor, line.encode("utf-8"))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    async def record(self, acp_session: str, harness_session: str) -> None:
        """Append that ``harness_session`` runs prompts of ``acp_session``, durably."""
        line = json.dumps({"session": acp_session, "harness": harness_session}) + "\n"
        await trio.to_thread.run_sync(self._append, line)

    def _read(self, acp_session: str) -> list[str]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            return []
        found: list[str] = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a crash mid-write names no session
            if isinstance(entry, dict) and entry.get("session") == acp_session:  # pyright: ignore[reportUnknownMemberType]
                found.append(str(entry.get("harness")))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        return list(dict.fromkeys(found))  # each harness session once, in order

    async def harness_sessions(self, acp_session: str) -> list[str]:
        """The harness sessions of ``acp_session``, oldest first (none for an unknown one)."""
        return await trio.to_thread.run_sync(self._read, acp_session)


@dataclass(eq=False)
class _Harness:
    """One harness session on its own loopback connection, open until ``done`` is set."""

    client: AcpClient
    session_id: str
    recorded: bool = False
    """Whether the session log names it (at its first prompt)."""
    done: trio.Event = field(default_factory=trio.Event)


@dataclass(eq=False)
class _Session:
    id: str
    cwd: str
    harness: _Harness | None = None
    """The harness session the ACP session's prompts run in, kept between prompts."""
    running: _Harness | None = None
    busy: bool = False
    cancelled: bool = False


class _HarnessFinishedError(Exception):
    """The harness session ended before this prompt (``-32011``): another one takes the prompt."""


async def _now(value: object) -> object:
    return value


class _Agent:
    """The ACP methods of one stdio connection, over the embedded server ``handle``."""

    def __init__(self, handle: ServerHandle, log: SessionLog | None, connections: trio.Nursery) -> None:
        self._handle = handle
        self._log = log
        self._nursery = connections
        self._connected: set[_Harness] = set()
        self._sessions: dict[str, _Session] = {}
        self._initialized = False
        self.peer: StdioPeer | None = None

    def _peer(self) -> StdioPeer:
        assert self.peer is not None
        return self.peer

    def on_request(self, method: str, params: object) -> Awaitable[object]:
        """Check a request in arrival order; return the awaitable of its answer.

        Raises:
            RpcError: an unknown method, a request before ``initialize``, or invalid params.
        """
        if method == "initialize":
            return _now(self._initialize(params))
        if method not in {"session/new", "session/prompt", "session/load"} or (
            method == "session/load" and self._log is None
        ):
            raise RpcError(-32601, f"method not found: {method}")
        if not self._initialized:
            raise RpcError(-32600, "call initialize first")
        if method == "session/new":
            return self._new(_params(params, _NewParams))
        if method == "session/load":
            return self._load(_params(params, _LoadParams))
        return self._prompt(*self._admit(_params(params, _PromptParams)))

    def on_notification(self, method: str, params: object) -> None:
        """Handle ``session/cancel`` in arrival order (other notifications are logged and ignored).

        Raises:
            RpcError: invalid params (the peer logs it; a notification gets no answer).
        """
        if method != "session/cancel":
            _log.info("ignored notification %s", method)
            return
        session = self._sessions.get(_params(params, _SessionParams).session_id)
        if session is None or not session.busy:
            return
        session.cancelled = True
        if session.running is not None:
            self._nursery.start_soon(self._cancel, session.running)

    async def _cancel(self, harness: _Harness) -> None:
        try:
            await harness.client.request("session/cancel", {"sessionId": harness.session_id})
        except (AcpClientError, ConnectionClosedError) as error:
            _log.warning("session/cancel: %s", error)

    def _initialize(self, params: object) -> JsonObject:
        _params(params, _InitializeParams)
        self._initialized = True
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": self._log is not None,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
            },
            "agentInfo": {"name": "harness-agent-server", "version": __version__},
            "authMethods": [],
        }

    def _cwd(self, cwd: str, mcp_servers: list[Any]) -> str:
        if not os.path.isabs(cwd):
            raise RpcError(-32602, "invalid params: cwd must be an absolute path")
        if mcp_servers:
            # The agent's tools are the reviewed catalogue; an editor's MCP servers are not admitted.
            _log.warning(
                "ignored %d MCP server(s): this agent only runs its reviewed tools", len(mcp_servers)
            )
        return os.path.normpath(cwd)

    async def _new(self, request: _NewParams) -> JsonObject:
        cwd = self._cwd(request.cwd, request.mcp_servers)
        session = _Session(id=f"acp-{uuid.uuid4()}", cwd=cwd)
        # The harness session is created now, so a workspace or a tool the server refuses is
        # refused at session/new, where an editor shows it.
        session.harness = await self._open(cwd)
        self._sessions[session.id] = session
        return {"sessionId": session.id}

    async def _open(self, cwd: str) -> _Harness:
        opened: _Harness | AcpClientError = await self._nursery.start(self._connection, cwd)
        if isinstance(opened, AcpClientError):
            raise RpcError(opened.code, opened.message)
        return opened

    async def _connection(self, cwd: str, *, task_status: trio.TaskStatus[_Harness | AcpClientError]) -> None:
        async with self._handle.connect() as client:
            await client.initialize()
            try:
                created = await client.request("session/new", {"workspace": cwd})
            except AcpClientError as error:
                task_status.started(error)  # the server's refusal, for the editor to show
                return
            harness = _Harness(client, created["sessionId"])
            self._connected.add(harness)
            try:
                task_status.started(harness)
                await harness.done.wait()
            finally:
                self._connected.discard(harness)

    def cancel_all(self) -> None:
        """Cancel every prompt (the input ended: the client can no longer do it)."""
        for session in self._sessions.values():
            if session.busy:
                session.cancelled = True
                if session.running is not None:
                    self._nursery.start_soon(self._cancel, session.running)

    def release(self) -> None:
        """Let every harness connection close (the input ended)."""
        for harness in list(self._connected):
            harness.done.set()

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RpcError(_RESOURCE_NOT_FOUND, f"unknown session: {session_id}")
        return session

    def _admit(self, request: _PromptParams) -> tuple[_Session, str]:
        session = self._session(request.session_id)
        texts: list[str] = []
        for block in request.prompt:
            if block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise RpcError(
                    -32602,
                    f"invalid params: content block of type {block.get('type')!r} is not supported;"
                    " this agent accepts text blocks only",
                )
            texts.append(block["text"])
        text = "\n".join(texts)
        if not text.strip():
            raise RpcError(-32602, "invalid params: the prompt has no text")
        if session.busy:
            raise RpcError(-32602, "invalid params: a prompt is already running in this session")
        # Busy from arrival on, so a session/cancel right behind the prompt is never lost.
        session.busy, session.cancelled = True, False
        return session, text

    async def _prompt(self, session: _Session, text: str) -> JsonObject:
        try:
            for _ in range(2):
                harness = await self._harness(session)
                if session.cancelled:
                    return {"stopReason": "cancelled"}
                session.running = harness
                try:
                    return await self._run(session, harness, text)
                except _HarnessFinishedError:
                    # Finished under us (its idle timeout): the prompt goes to a fresh one.
                    harness.done.set()
                    session.harness = None
                finally:
                    session.running = None
            raise RpcError(-32603, "the run failed: no harness session took the prompt")
        finally:
            session.busy = False

    async def _harness(self, session: _Session) -> _Harness:
        """The ACP session's harness session: the open one, else a new one (recorded in the log)."""
        harness = session.harness
        if harness is None or harness.done.is_set():
            harness = session.harness = await self._open(session.cwd)
        if not harness.recorded:
            if self._log is not None:
                await self._log.record(session.id, harness.session_id)
            harness.recorded = True
        return harness

    async def _run(self, session: _Session, harness: _Harness, text: str) -> JsonObject:
        mapper = UpdateMapper(session.cwd)
        client = harness.client
        result: JsonObject | None = None
        failure: AcpClientError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow, session, harness, mapper, nursery)
            try:
                result = await client.request(
                    "session/prompt", {"sessionId": harness.session_id, "content": text}
                )
            except AcpClientError as error:
                failure = error
            nursery.cancel_scope.cancel()
        # Every event of the prompt was sent before its answer; the rest is still queued.
        for note in client.drain_notifications():
            await self._forward(session, harness, mapper, note, None)
        if failure is not None and failure.code == _SESSION_FINISHED and mapper.status is None:
            raise _HarnessFinishedError(failure.message)
        reason = stop_reason(
            mapper.status or (result or {}).get("status"), mapper.finish_reason, session.cancelled
        )
        if reason is None:
            if failure is not None and failure.code == -32602:
                raise RpcError(-32602, f"invalid params: {failure.message}")  # e.g. a prompt over 512 KiB
            detail = failure.message if failure is not None else "see the session's events"
            raise RpcError(-32603, f"the run failed: {detail}")
        return {"stopReason": reason}

    async def _follow(
        self, session: _Session, harness: _Harness, mapper: UpdateMapper, nursery: trio.Nursery
    ) -> None:
        async for note in harness.client.notifications:
            # Shielded: once taken from the channel, an event is always forwarded.
            with trio.CancelScope(shield=True):
                await self._forward(session, harness, mapper, note, nursery)

    async def _forward(
        self,
        session: _Session,
        harness: _Harness,
        mapper: UpdateMapper,
        note: JsonObject,
        nursery: trio.Nursery | None,
    ) -> None:
        event: JsonObject = note["params"]["event"]
        for update in mapper.updates(event):
            await self._peer().notify("session/update", {"sessionId": session.id, "update": update})
        if event["type"] == "permission.requested" and nursery is not None:
            nursery.start_soon(self._ask, session, harness, mapper, event["data"])

    async def _ask(
        self, session: _Session, harness: _Harness, mapper: UpdateMapper, data: JsonObject
    ) -> None:
        request = {
            "sessionId": session.id,
            "toolCall": mapper.tool_call(str(data.get("callId"))),
            "options": list(_PERMISSION_OPTIONS),
        }
        try:
            answer = await self._peer().request("session/request_permission", request)
            outcome = answer.get("outcome")
            chosen: JsonObject = outcome if isinstance(outcome, dict) else {}  # pyright: ignore[reportUnknownVariableType]
            allowed = chosen.get("outcome") == "selected" and chosen.get("optionId") == _ALLOW
            note = "allowed by the ACP client" if allowed else "rejected or cancelled by the ACP client"
        except PeerError as error:
            allowed, note = False, str(error)
        respond = {"sessionId": harness.session_id, "permissionId": data["permissionId"]}
        try:
            await harness.client.request(
                "permission/respond", {**respond, "decision": "allow" if allowed else "deny", "note": note}
            )
        except (AcpClientError, ConnectionClosedError) as error:
            # Already denied by a cancel or a timeout: the server's decision stands.
            _log.info("permission/respond: %s", error)

    async def _load(self, request: _LoadParams) -> JsonObject:
        cwd = self._cwd(request.cwd, request.mcp_servers)
        assert self._log is not None
        chain = await self._log.harness_sessions(request.session_id)
        if not chain or request.session_id in self._sessions:
            raise RpcError(_RESOURCE_NOT_FOUND, f"unknown or live session: {request.session_id}")
        mapper = UpdateMapper(cwd, replay=True)
        async with self._handle.connect() as client:
            await client.initialize()
            for harness_session in chain:
                await self._replay(client, request.session_id, harness_session, mapper)
        self._sessions[request.session_id] = _Session(id=request.session_id, cwd=cwd)
        return {}

    async def _replay(
        self, client: AcpClient, session_id: str, harness_session: str, mapper: UpdateMapper
    ) -> None:
        after = -1
        while True:
            try:
                page = await client.request(
                    "session/restore",
                    {"sessionId": harness_session, "afterSeq": after, "limit": _RESTORE_PAGE},
                )
            except AcpClientError as error:
                raise RpcError(error.code, f"session/load: {error.message}") from None
            for note in client.drain_notifications():
                for update in mapper.updates(note["params"]["event"]):
                    await self._peer().notify("session/update", {"sessionId": session_id, "update": update})
            if not page["hasMore"]:
                return
            after = page["replayedThroughSeq"]


async def run_acp_stdio(
    config: ServerConfig,
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
    *,
    session_log: SessionLog | None,
) -> int:
    """Serve ACP on ``receive``/``send`` until the input ends, then stop the embedded server.

    Args:
        config: The embedded server's :class:`~agent_server.ServerConfig`, served by
            :func:`~agent_server.embedded_server` (loopback, any port, an ephemeral token).
        receive: The client's messages (stdin).
        send: This agent's messages (stdout, carrying nothing else).
        session_log: Where ACP sessions record their harness sessions, or ``None`` without
            a durable store (``session/load`` is then not offered).

    Returns:
        0 once the input ended.
    """
    async with embedded_server(config) as handle:
        _log.info("harness/acp/1 server embedded at 127.0.0.1:%d", handle.port)
        async with trio.open_nursery() as connections:
            agent = _Agent(handle, session_log, connections)
            with trio.CancelScope() as draining:
                async with trio.open_nursery() as requests:
                    peer = StdioPeer(receive, send, agent.on_request, agent.on_notification)
                    agent.peer = peer
                    await peer.run(requests)
                    _log.info("stdin ended; cancelling running prompts and answering what is in flight")
                    agent.cancel_all()
                    draining.deadline = trio.current_time() + _DRAIN_SECONDS
            # Each harness connection then closes gracefully: its server ends what it runs.
            agent.release()
    return 0


def run_stdio_process(config: ServerConfig) -> int:
    """Serve ACP on this process's stdin and stdout; log to stderr. Returns the exit status.

    File descriptor 1 is handed to the protocol alone: it is duplicated for the ACP stream,
    and the process's own stdout then points at stderr, so a stray ``print`` from any
    library can never corrupt the protocol.
    """
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="agent-server acp: %(message)s")
    protocol_out = os.dup(1)
    protocol_in = os.dup(0)
    os.dup2(2, 1)
    log = (
        None
        if config.storage.db_path is None or not config.storage.persistence
        else SessionLog(config.storage.db_path + ".acp-sessions.jsonl")
    )

    async def main() -> int:
        receive = trio.lowlevel.FdStream(protocol_in)
        send = trio.lowlevel.FdStream(protocol_out)
        return await run_acp_stdio(config, receive, send, session_log=log)

    return trio.run(main)
