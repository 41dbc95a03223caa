"""A real server on 127.0.0.1 driven by the real wsproto client of ``agent_server.client``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

import agent_server
from agent_server import ServerConfig, ServerHandle, ToolProviderContext, serve
from agent_server.client import (
    AcpClient,
    AcpClientError,
    HandshakeRejectedError,
    JsonObject,
    connect,
)
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.store import SqliteSessionStore
from harness_tools import Tool, create_echo_tool, create_read_file_tool

TOOL_SCRIPT = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hi"})]),
    ScriptedTurn(content="done"),
)


def echo_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    return [create_echo_tool()]


def scripted() -> FakeModel:
    return FakeModel(TOOL_SCRIPT)


@asynccontextmanager
async def running(tmp_path: Path, **options: Any) -> AsyncGenerator[ServerHandle]:
    (tmp_path / "root" / "ws").mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "port": 0,
        "workspace_root": str(tmp_path / "root"),
        "db_path": str(tmp_path / "state" / "sessions.sqlite"),
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


async def drain(client: AcpClient) -> list[JsonObject]:
    notes: list[JsonObject] = []
    while True:
        try:
            notes.append(client.notifications.receive_nowait())
        except trio.WouldBlock:
            return notes


async def prompt_allowing(client: AcpClient, session_id: str) -> tuple[JsonObject, list[JsonObject]]:
    seen: list[JsonObject] = []
    outcome: list[JsonObject] = []

    async def follow() -> None:
        async for note in client.notifications:
            seen.append(note)
            event = note["params"]["event"]
            if event["type"] == "permission.requested":
                permission = {"sessionId": session_id, "permissionId": event["data"]["permissionId"]}
                await client.request("permission/respond", {**permission, "decision": "allow"})
            if event["type"] == "agent.stopped":
                return

    async def prompt() -> None:
        outcome.append(await client.request("session/prompt", {"sessionId": session_id, "content": "go"}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        nursery.start_soon(prompt)
    return outcome[0], seen


def test_public_surface_is_pinned() -> None:
    assert sorted(agent_server.__all__) == sorted(
        [
            "PROTOCOL_VERSION",
            "AcpError",
            "ServerConfig",
            "ServerHandle",
            "ToolProviderContext",
            "__version__",
            "serve",
        ]
    )
    assert agent_server.PROTOCOL_VERSION == "harness/acp/1"


async def test_session_with_a_tool_call_streams_stored_events_in_order(tmp_path: Path) -> None:
    async with running(tmp_path) as handle, connect(handle.url) as client:
        hello = await client.initialize()
        assert hello["capabilities"] == {"streaming": True, "permissioning": True, "sessions": True}
        assert hello["models"] == ["fake-model/v1"]
        session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
        result, notes = await prompt_allowing(client, session_id)
        assert result["status"] == "completed"
        assert result["finalText"] == "done"
        assert result["events"] == []
        usage = result["usage"]
        assert usage["totalTokens"] == usage["promptTokens"] + usage["completionTokens"]
        assert [note["params"]["seq"] for note in notes] == list(range(len(notes)))
        types = [note["params"]["event"]["type"] for note in notes]
        assert types == [
            "session.created",
            "agent.started",
            "model.request",
            "model.response",
            "tool.call",
            "policy.decision",
            "permission.requested",
            "permission.resolved",
            "tool.result",
            "model.request",
            "model.response",
            "agent.stopped",
        ]
        replay = await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
        assert replay["status"] == "completed"
        assert replay["replayedEvents"] == len(notes)
        replayed = await drain(client)
        assert [note["params"] for note in replayed] == [note["params"] for note in notes]
        with pytest.raises(AcpClientError) as again:
            await client.request("session/prompt", {"sessionId": session_id, "content": "again"})
        assert again.value.code == -32011


async def test_workspace_tool_is_refused_at_session_new(tmp_path: Path) -> None:
    def tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
        return [create_echo_tool(), create_read_file_tool(context.workspace)]

    async with running(tmp_path, tools=tools) as handle, connect(handle.url) as client:
        await client.initialize()
        with pytest.raises(AcpClientError) as refused:
            await client.request("session/new", {"workspace": "ws"})
        assert refused.value.code == -32602
        assert refused.value.data_code == "ACP_INVALID_PARAMS"
        assert 'tool "read_file"' in refused.value.message
        assert "operational Workspace adapter is required" in refused.value.message


async def test_malformed_frames_get_their_json_rpc_errors(tmp_path: Path) -> None:
    async with running(tmp_path) as handle, connect(handle.url) as client:
        await client.send_text("{not json")
        assert (await client.strays.receive())["error"]["code"] == -32700
        await client.send_text('{"jsonrpc":"2.0","id":1,"id":2,"method":"initialize"}')
        assert (await client.strays.receive())["error"]["data"]["code"] == "ACP_INVALID_REQUEST"
        await client.send_text('[{"jsonrpc":"2.0","id":1,"method":"initialize"}]')
        assert (await client.strays.receive())["error"]["code"] == -32600
        await client.send_text('{"jsonrpc":"2.0","method":"initialize"}')
        message = await client.strays.receive()
        assert message["error"]["message"] == "ACP clients must send JSON-RPC requests"
        with pytest.raises(AcpClientError) as early:
            await client.request("session/new", {"workspace": "ws"})
        assert early.value.code == -32002
        with pytest.raises(AcpClientError) as unknown:
            await client.request("session/fly", {})
        assert unknown.value.code == -32601
        with pytest.raises(AcpClientError) as extra:
            await client.request("initialize", {**_init(), "extra": 1})
        assert extra.value.code == -32602
        assert "extra" not in extra.value.message
        with pytest.raises(AcpClientError) as version:
            await client.request("initialize", {**_init(), "protocolVersion": "harness/acp/2"})
        assert (version.value.code, version.value.data_code) == (-32001, "ACP_PROTOCOL_VERSION")
        await client.initialize()
        with pytest.raises(AcpClientError) as twice:
            await client.initialize()
        assert twice.value.code == -32600
        with pytest.raises(AcpClientError) as boolean_limit:
            await client.request("session/restore", {"sessionId": "x", "afterSeq": True})
        assert boolean_limit.value.code == -32602


def _init() -> JsonObject:
    return {
        "protocolVersion": "harness/acp/1",
        "clientName": "test",
        "capabilities": {"streaming": True, "permissioning": True},
    }


async def test_binary_message_closes_with_1003(tmp_path: Path) -> None:
    async with running(tmp_path) as handle, connect(handle.url) as client:
        await client.send_binary(b"\x00\x01")
        assert await client.wait_closed() == 1003


async def test_oversized_message_closes_with_1009(tmp_path: Path) -> None:
    async with running(tmp_path, max_message_bytes=1024) as handle, connect(handle.url) as client:
        await client.send_text("x" * 2048)
        assert await client.wait_closed() == 1009


async def test_origin_and_token_are_checked_before_upgrade(tmp_path: Path) -> None:
    async with running(tmp_path, auth_token="s3cret", allowed_origins=("https://ok.example",)) as handle:
        with pytest.raises(HandshakeRejectedError) as no_token:
            async with connect(handle.url):
                pass
        assert no_token.value.status == 403
        with pytest.raises(HandshakeRejectedError) as wrong_origin:
            async with connect(handle.url, token="s3cret", origin="https://evil.example"):
                pass
        assert wrong_origin.value.status == 403
        async with connect(handle.url, token="s3cret", origin="https://ok.example") as client:
            assert (await client.initialize())["protocolVersion"] == "harness/acp/1"


async def test_concurrent_prompts_on_one_session_run_it_once(tmp_path: Path) -> None:
    async with (
        running(tmp_path, models={"fake-model/v1": FakeModel}) as handle,
        connect(handle.url) as client,
    ):
        await client.initialize()
        session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
        outcomes: list[str] = []

        async def prompt() -> None:
            try:
                await client.request("session/prompt", {"sessionId": session_id, "content": "hi"})
                outcomes.append("ok")
            except AcpClientError as error:
                outcomes.append(str(error.code))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            nursery.start_soon(prompt)
        assert sorted(outcomes) == ["-32011", "ok"]


async def test_permission_answers_for_unknown_ids_are_refused(tmp_path: Path) -> None:
    async with running(tmp_path) as handle, connect(handle.url) as client:
        await client.initialize()
        session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
        answer = {"sessionId": session_id, "permissionId": "perm-nope", "decision": "allow"}
        with pytest.raises(AcpClientError) as unknown:
            await client.request("permission/respond", answer)
        assert unknown.value.code == -32020
        with pytest.raises(AcpClientError) as no_session:
            await client.request("permission/respond", {**answer, "sessionId": "sess-nope"})
        assert no_session.value.code == -32010
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": True}
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": False}


class FailingStore(SqliteSessionStore):
    """A store whose appends fail after the first three."""

    appended = 0

    async def append(self, session_id: str, event: Any, *, owner_id: str | None = None) -> Any:
        self.appended += 1
        if self.appended > 3:
            raise OSError("disk full")
        return await super().append(session_id, event, owner_id=owner_id)


async def test_a_store_failing_mid_run_answers_internal_error_and_keeps_the_row_active(
    tmp_path: Path,
) -> None:
    (tmp_path / "state").mkdir()
    store = FailingStore(tmp_path / "state" / "failing.sqlite")
    async with store, running(tmp_path, db_path=None, session_store=store) as handle:
        async with connect(handle.url) as client:
            await client.initialize()
            session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            with pytest.raises(AcpClientError) as failed:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            assert failed.value.code == -32603
            assert failed.value.data_code is None
            assert [n["params"]["seq"] for n in await drain(client)] == [0, 1, 2]
        record = await store.get(session_id)
        assert record.status == "active"
        assert await store.size(session_id) == 3


async def test_restore_marks_an_abandoned_session_interrupted(tmp_path: Path) -> None:
    ticks = [0.0]

    def clock() -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=ticks[0])

    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "s.sqlite", now=clock)
    async with store, running(tmp_path, db_path=None, session_store=store, now=clock) as handle:
        async with connect(handle.url) as client:
            await client.initialize()
            session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            with pytest.raises(AcpClientError) as live:
                await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            assert live.value.code == -32013
        # The created session was canceled at disconnect and its row closed without events.
        async with connect(handle.url) as client:
            await client.initialize()
            replay = await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            assert replay["status"] == "completed"
            assert replay["replayedEvents"] == 0
            with pytest.raises(AcpClientError) as beyond:
                await client.request("session/restore", {"sessionId": session_id, "afterSeq": 5})
            assert beyond.value.code == -32602
            with pytest.raises(AcpClientError) as missing:
                await client.request("session/restore", {"sessionId": "sess-none", "afterSeq": -1})
            assert missing.value.code == -32010
        # An active row whose owner's lease expired mid-run is recovered as interrupted.
        created = await store.create(
            "sess-orphan",
            metadata={
                "kind": "agent-session",
                "workspace": str((tmp_path / "root" / "ws").resolve()),
                "modelName": "fake-model/v1",
                "ownerId": "connection-gone",
                "leaseExpiresAt": "2026-01-01T00:00:01.000Z",
            },
        )
        assert created.status == "active"
        ticks[0] = 60
        async with connect(handle.url) as client:
            await client.initialize()
            replay = await client.request("session/restore", {"sessionId": "sess-orphan", "afterSeq": -1})
            assert replay["status"] == "interrupted"
            notes = await drain(client)
            assert [n["params"]["event"]["type"] for n in notes] == ["session.restored"]
            assert notes[0]["params"]["event"]["actor"] == "agent-server"


async def test_health_routes_answer_plain_http(tmp_path: Path) -> None:
    async with running(tmp_path) as handle:
        for path, status in (("/health", 200), ("/health/ready", 200), ("/nope", 404), ("/acp", 400)):
            stream = await trio.open_tcp_stream("127.0.0.1", handle.port)
            async with stream:
                await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                reply = b""
                while chunk := await stream.receive_some(4096):
                    reply += chunk
            assert reply.startswith(f"HTTP/1.1 {status}".encode()), (path, reply)
            if path == "/health":
                assert json.loads(reply.split(b"\r\n\r\n", 1)[1]) == {"service": "agent-server", "live": True}


def test_remote_host_without_token_is_refused(tmp_path: Path) -> None:
    config = ServerConfig(host="0.0.0.0", port=0, workspace_root=str(tmp_path))
    with pytest.raises(ValueError, match="requires an auth token"):
        config.check_serving()
    with pytest.raises(ValueError, match="positive"):
        ServerConfig(permission_timeout_ms=0)


def test_cli_rejects_refused_environment_and_bad_ports() -> None:
    env = {"HARNESS_DATABASE_URL": "postgres://x", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "agent_server", "serve", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "HARNESS_DATABASE_URL is not supported by this build; use --db" in result.stderr
    bad_port = subprocess.run(
        [sys.executable, "-m", "agent_server", "serve", "--port", "70000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad_port.returncode == 2


def test_demo_command_exits_zero_and_shows_the_refusal() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent_server", "demo"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "agent.stopped" in result.stdout
    assert 'refused: -32602 ACP_INVALID_PARAMS: tool "read_file"' in result.stdout
