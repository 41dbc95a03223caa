"""The JSON-RPC envelope, the method errors and ``session/new`` admission (spec §3, §5.1, §5.2)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
import trio
from sandbox_helpers import git_repository

import agent_server
from agent_server import ToolProviderContext
from agent_server.client import AcpClientError, JsonObject, initialize_params
from harness_kernel.models import FakeModel
from harness_tools import (
    SandboxBoundary,
    Tool,
    ToolExecutionContext,
    create_bounded_tool,
    create_echo_tool,
    create_read_file_tool,
    create_tool,
)

if TYPE_CHECKING:
    from conftest import ServerFactory


def test_public_surface_is_pinned() -> None:
    assert sorted(agent_server.__all__) == sorted(
        [
            "PROTOCOL_VERSION",
            "AcpError",
            "LimitsConfig",
            "ModelConfig",
            "NetworkConfig",
            "ServerConfig",
            "ServerHandle",
            "StorageConfig",
            "ToolProviderContext",
            "WorkspaceConfig",
            "__version__",
            "embedded_server",
            "serve",
        ]
    )
    assert agent_server.PROTOCOL_VERSION == "harness/acp/1"


def _init() -> JsonObject:
    return {
        "protocolVersion": "harness/acp/1",
        "clientName": "test",
        "capabilities": {"streaming": True, "permissioning": True},
    }


async def test_malformed_frames_get_their_json_rpc_errors(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
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


async def test_initialize_requires_streaming_and_permissioning(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
        params = {**initialize_params(), "capabilities": {"streaming": True}}
        with pytest.raises(AcpClientError) as refused:
            await client.request("initialize", params)
        assert refused.value.code == -32602
        assert refused.value.message == "ACP clients must support streaming and permissioning"
        assert (await client.initialize())["agentName"] == "harness-agent-server"


async def test_concurrent_prompts_on_one_session_run_it_once(running: ServerFactory) -> None:
    async with running(models={"fake-model/v1": FakeModel}) as handle, handle.connect() as client:
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


async def test_permission_answers_for_unknown_ids_are_refused(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
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


async def test_session_new_after_the_connection_limit_is_refused_with_32012(running: ServerFactory) -> None:
    async with running(max_sessions_per_connection=2) as handle:
        async with handle.connect() as client:
            await client.initialize()
            first = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            await client.request("session/new", {"workspace": "ws"})
            # Finished sessions still count: the limit is over the connection's lifetime.
            await client.request("session/cancel", {"sessionId": first})
            with pytest.raises(AcpClientError) as limit:
                await client.request("session/new", {"workspace": "ws"})
            assert (limit.value.code, limit.value.data_code) == (-32012, "ACP_SESSION_LIMIT")
        async with handle.connect() as fresh:
            await fresh.initialize()
            assert (await fresh.request("session/new", {"workspace": "ws"}))["sessionId"]


async def test_session_new_refuses_workspaces_outside_the_root_and_unknown_models(
    running: ServerFactory,
) -> None:
    (running.root / "file.txt").write_text("not a directory")
    async with running() as handle, handle.connect() as client:
        await client.initialize()
        for params in (
            {"workspace": "../"},
            {"workspace": "missing"},
            {"workspace": "file.txt"},
            {"workspace": "ws", "model": "other-model/v1"},
        ):
            with pytest.raises(AcpClientError) as refused:
                await client.request("session/new", params)
            assert refused.value.code == -32602, params


def _manifest(task_id: str) -> str:
    return "\n".join(
        [
            f"id: {task_id}",
            "title: A test task",
            "goal: Prove the manifest loads.",
            "acceptance:",
            "  - the session starts",
            "allowed_paths:",
            '  - "src/**"',
            "permissions:",
            "  tool.echo:",
            '    "*": allow',
            "delivery:",
            "  type: pull_request",
            "",
        ]
    )


async def test_task_id_loads_the_manifest_committed_in_the_workspace(running: ServerFactory) -> None:
    shutil.rmtree(running.workspace)
    files = {
        "tasks/good-task.yaml": _manifest("good-task"),
        "tasks/wrong-id.yaml": _manifest("other-task"),
        "tasks/broken.yaml": "id: [unclosed\n",
    }
    git_repository(running.workspace, files)
    (running.workspace / "tasks" / "linked.yaml").symlink_to(running.workspace / "tasks" / "good-task.yaml")
    async with running() as handle, handle.connect() as client:
        await client.initialize()
        created = await client.request("session/new", {"workspace": "ws", "taskId": "good-task"})
        assert created["sessionId"]
        for task_id in ("missing-task", "wrong-id", "broken", "linked"):
            with pytest.raises(AcpClientError) as refused:
                await client.request("session/new", {"workspace": "ws", "taskId": task_id})
            assert refused.value.code == -32602, task_id
        with pytest.raises(AcpClientError) as not_kebab:
            await client.request("session/new", {"workspace": "ws", "taskId": "Not_Kebab"})
        assert not_kebab.value.code == -32602


async def test_workspace_tool_is_refused_at_session_new(running: ServerFactory) -> None:
    def tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
        return [create_echo_tool(), create_read_file_tool(context.workspace)]

    async with running(tools=tools) as handle, handle.connect() as client:
        await client.initialize()
        with pytest.raises(AcpClientError) as refused:
            await client.request("session/new", {"workspace": "ws"})
        assert refused.value.code == -32602
        assert refused.value.data_code == "ACP_INVALID_PARAMS"
        assert 'tool "read_file"' in refused.value.message
        assert "operational Workspace adapter is required" in refused.value.message


class _Nothing(msgspec.Struct, forbid_unknown_fields=True):
    pass


async def _nothing(params: _Nothing, context: ToolExecutionContext | None) -> object:
    return {}


def _unbounded(name: str) -> Tool[_Nothing]:
    return create_tool(name=name, description="a test tool", parameters=_Nothing, execute=_nothing)


async def test_admission_reads_each_tool_boundary(running: ServerFactory, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    offers: dict[str, Callable[[ToolProviderContext], list[Tool[Any]]]] = {
        "same": lambda context: [
            create_bounded_tool(_unbounded("box"), SandboxBoundary(root=context.workspace))
        ],
        "other": lambda context: [
            create_bounded_tool(_unbounded("box"), SandboxBoundary(root=str(elsewhere)))
        ],
        "gone": lambda context: [
            create_bounded_tool(_unbounded("box"), SandboxBoundary(root=str(tmp_path / "gone")))
        ],
        "unbounded": lambda context: [_unbounded("bare")],
        "twice": lambda context: [create_echo_tool(), create_echo_tool()],
    }
    chosen: list[str] = []

    def tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
        if chosen[-1] == "raises":
            raise RuntimeError("provider failed")
        return offers[chosen[-1]](context)

    async def session_new(offer: str) -> JsonObject:
        chosen.append(offer)
        return await client.request("session/new", {"workspace": "ws"})

    async with running(tools=tools) as handle, handle.connect() as client:
        await client.initialize()
        # One admission table for every host (harness_tools): no host runs sandbox-bound
        # tools yet, so the server no longer admits one that the runtime would refuse.
        sandbox = "sandbox-bound tools need a sandbox host, which this server does not have"
        expected = {
            "same": sandbox,
            "other": sandbox,
            "gone": sandbox,
            "unbounded": "no reviewed execution boundary",
            "twice": 'tool "echo"',
        }
        for offer, reason in expected.items():
            with pytest.raises(AcpClientError) as refused:
                await session_new(offer)
            assert refused.value.code == -32602, offer
            assert reason in refused.value.message, offer
        with pytest.raises(AcpClientError) as failed:
            await session_new("raises")
        assert (failed.value.code, failed.value.data_code) == (-32603, None)
