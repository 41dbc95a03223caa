"""``workspace_adapter="sandbox"``: one disposable SandboxWorkspace per session (issue #17).

The engine here is harness-sandbox's host test engine (it isolates nothing; the engines'
isolation is tested in harness-sandbox): these tests pin the server's wiring — a copy per
session, tools reading the copy, the source never written, disposal, and a typed refusal
when the sandbox cannot be made.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
import trio
from sandbox_helpers import HostTestEngine, engine_unavailable_reason

from agent_server import LimitsConfig, ServerConfig, ToolProviderContext, WorkspaceConfig
from agent_server._cli import _parser as parser  # pyright: ignore[reportPrivateUsage]
from agent_server._cli import build_config
from agent_server.client import AcpClient, AcpClientError, JsonObject
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_sandbox import (
    SANDBOX_ENGINE_UNAVAILABLE,
    SANDBOX_ID_RANGE,
    BubblewrapEngine,
    SandboxError,
    SandboxLimits,
)
from harness_tools import (
    Tool,
    ToolExecutionContext,
    ToolPermissionIntent,
    WorkspaceBoundary,
    create_bounded_tool,
    create_read_file_tool,
    create_tool,
)
from harness_workspace import CommandResult, invoke_workspace_operation

if TYPE_CHECKING:
    from conftest import ServerFactory


def read_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    return [create_read_file_tool(context.workspace)]


def reading(*paths: str) -> Callable[[], FakeModel]:
    turns = [
        ScriptedTurn(tool_calls=[ToolCall(f"call-{index}", "read_file", {"path": path})])
        for index, path in enumerate(paths)
    ]
    return lambda: FakeModel([*turns, ScriptedTurn(content="done")])


def tool_results(notes: list[JsonObject]) -> list[JsonObject]:
    return [
        note["params"]["event"]["data"] for note in notes if note["params"]["event"]["type"] == "tool.result"
    ]


async def new_session(client: AcpClient) -> str:
    return (await client.request("session/new", {"workspace": "ws"}))["sessionId"]


class _Run(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    argv: list[str]


async def _run(params: _Run, context: ToolExecutionContext | None = None) -> dict[str, object]:
    assert context is not None
    result = await invoke_workspace_operation(
        context.workspace, {"operation": "execute", "command": {"argv": params.argv}}
    )
    assert isinstance(result, CommandResult)
    return {"exitCode": result.exit_code, "stdout": result.stdout}


def command_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    """One tool with execute access, rooted at the session's workspace."""
    tool = create_tool(
        name="run",
        description="run a command",
        parameters=_Run,
        execute=_run,
        authorization=lambda p: ToolPermissionIntent(
            action="process.exec", subject=" ".join(p.argv), scope="once"
        ),
    )
    boundary = WorkspaceBoundary(capability="execute", access="execute", root=context.workspace)
    return [create_bounded_tool(tool, boundary)]


@pytest.fixture(scope="module")
def bubblewrap() -> BubblewrapEngine:
    """The bubblewrap engine; one skip line without it (a failure under HARNESS_REQUIRE_SANDBOX=1)."""
    engine = BubblewrapEngine()
    reason = trio.run(engine_unavailable_reason, engine)
    if reason is not None:
        if os.environ.get("HARNESS_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"HARNESS_REQUIRE_SANDBOX=1 and the bubblewrap engine is unavailable: {reason}")
        pytest.skip(f"bubblewrap engine unavailable: {reason} (apt-get install bubblewrap)")
    return engine


async def test_a_command_tool_is_admitted_on_an_isolated_sandbox_and_runs_inside_it(
    running: ServerFactory, bubblewrap: BubblewrapEngine
) -> None:
    argv = ["sh", "-c", "echo made > made.txt && cat made.txt && id -u && test ! -e /root"]
    model = FakeModel(
        [ScriptedTurn(tool_calls=[ToolCall("call-0", "run", {"argv": argv})]), ScriptedTurn(content="done")]
    )
    options: dict[str, Any] = {"models": {"fake-model/v1": lambda: model}, "tools": command_tools}
    async with (
        running(workspace_adapter="sandbox", sandbox_engine=bubblewrap, **options) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        result, notes = await client.prompt(await new_session(client), "run it")
        assert result["status"] == "completed"
        (ran,) = tool_results(notes)
        assert ran["ok"] is True
        assert ran["output"]["exitCode"] == 0
        # Written in the sandbox's copy, by the sandbox's own uid, which sees no host /root.
        made, uid = ran["output"]["stdout"].splitlines()
        assert made == "made"
        if os.geteuid() == 0:
            assert int(uid) in SANDBOX_ID_RANGE  # an id of its own, no host account's
        else:
            assert int(uid) == os.getuid()
    assert not (running.workspace / "made.txt").exists()


@pytest.mark.parametrize("adapter", ["local", "sandbox over a host engine"])
async def test_a_command_tool_is_refused_at_session_new_without_isolation(
    running: ServerFactory, adapter: str
) -> None:
    options: dict[str, Any] = {"tools": command_tools}
    if adapter == "local":
        options["workspace_adapter"] = "local"
    else:
        options |= {"workspace_adapter": "sandbox", "sandbox_engine": HostTestEngine()}
    async with running(**options) as handle, handle.connect() as client:
        await client.initialize()
        with pytest.raises(AcpClientError) as refused:
            await new_session(client)
        assert refused.value.code == -32602
        assert refused.value.message == (
            'tool "run" is not safe for agent-server host execution:'
            " a tool with execute access needs an isolated workspace (a sandbox adapter)"
        )


async def test_each_session_works_on_its_own_copy_which_is_gone_after_the_session(
    running: ServerFactory,
) -> None:
    (running.workspace / "notes.txt").write_text("from the source\n")
    (running.workspace / ".env").write_text("TOKEN=never\n")
    engine = HostTestEngine()
    options: dict[str, Any] = {
        "models": {"fake-model/v1": reading("notes.txt", ".env")},
        "tools": read_tools,
        "sandbox_engine": engine,
        "sandbox_limits": SandboxLimits(kill_grace_ms=100),
    }
    async with running(workspace_adapter="sandbox", **options) as handle, handle.connect() as client:
        await client.initialize()
        result, notes = await client.prompt(await new_session(client), "read")
        assert result["status"] == "completed"
        read, denied = tool_results(notes)
        assert read["output"]["content"] == "from the source\n"
        assert (denied["ok"], denied["error"]["code"]) == (False, "WORKSPACE_NOT_FOUND")
    environment = engine.environments[0]
    assert environment.spec.copy_path != str(running.workspace)
    assert environment.stopped == 1
    assert not await trio.Path(environment.spec.copy_path).exists()
    assert (running.workspace / "notes.txt").read_text() == "from the source\n"


async def test_an_engine_that_cannot_start_refuses_the_session_with_its_reason(
    running: ServerFactory,
) -> None:
    engine = HostTestEngine(SandboxError(SANDBOX_ENGINE_UNAVAILABLE, "docker daemon not reachable", "create"))
    options: dict[str, Any] = {"sandbox_engine": engine}
    async with running(workspace_adapter="sandbox", **options) as handle, handle.connect() as client:
        await client.initialize()
        with pytest.raises(AcpClientError) as refused:
            await new_session(client)
        assert (refused.value.code, refused.value.data_code) == (-32017, "ACP_SANDBOX_UNAVAILABLE")
        assert refused.value.message == "SANDBOX_ENGINE_UNAVAILABLE: docker daemon not reachable"
        # The refused session holds nothing: the next one may be made.
        engine.fail_with = None
        assert await new_session(client)


def test_the_sandbox_adapter_needs_an_engine_and_an_engine_needs_the_sandbox_adapter(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sandbox_engine is required"):
        ServerConfig(workspace=WorkspaceConfig(workspace_root=str(tmp_path), workspace_adapter="sandbox"))
    with pytest.raises(ValueError, match="sandbox_engine is required"):
        ServerConfig(workspace=WorkspaceConfig(workspace_root=str(tmp_path), sandbox_engine=HostTestEngine()))
    with pytest.raises(ValueError, match="sandbox_limits"):
        ServerConfig(
            workspace=WorkspaceConfig(
                workspace_root=str(tmp_path), workspace_adapter="sandbox", sandbox_engine=HostTestEngine()
            ),
            limits=LimitsConfig(sandbox_limits={"pids": 1}),  # pyright: ignore[reportArgumentType]
        )


def test_the_cli_builds_the_chosen_engine_and_refuses_what_does_not_fit(tmp_path: Path) -> None:

    def config(*flags: str) -> ServerConfig:
        arguments = parser().parse_args(["serve", "--no-db", "--workspace-root", str(tmp_path), *flags])
        return build_config(arguments, {})

    image = "sha256:" + "a" * 64
    docker = config("--workspace-adapter", "sandbox", "--sandbox-image", image, "--sandbox-memory", "256")
    assert type(docker.workspace.sandbox_engine).__name__ == "DockerEngine"
    assert docker.limits.sandbox_limits == SandboxLimits(memory_bytes=256 * 1024 * 1024)
    light = config("--workspace-adapter", "sandbox", "--sandbox-engine", "bubblewrap", "--sandbox-pids", "64")
    assert type(light.workspace.sandbox_engine).__name__ == "BubblewrapEngine"
    assert light.limits.sandbox_limits == SandboxLimits(pids=64)
    for flags, message in (
        (("--sandbox-image", image), "--sandbox-image need --workspace-adapter sandbox"),
        (("--workspace-adapter", "sandbox"), "needs --sandbox-image"),
        (
            ("--workspace-adapter", "sandbox", "--sandbox-engine", "bubblewrap", "--sandbox-image", image),
            "--sandbox-image is for the docker engine",
        ),
        (("--workspace-adapter", "sandbox", "--sandbox-image", image, "--sandbox-cpus", "0"), "cpus"),
    ):
        with pytest.raises(ValueError, match=message):
            config(*flags)
