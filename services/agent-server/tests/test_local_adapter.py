"""``workspace_adapter="local"``: one LocalWorkspace per session, admitted read tools, disposal (§5.2, M9)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from agent_server import ToolProviderContext
from agent_server.client import AcpClient, AcpClientError, JsonObject, initialize_params
from harness_kernel.models import (
    CompletionResponse,
    FakeModel,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    ScriptedTurn,
    ToolCall,
    Usage,
)
from harness_kernel.runtime import MinimalAgentRuntime, RunInput, RunStream
from harness_kernel.store import SqliteSessionStore
from harness_tools import Tool, create_echo_tool, create_read_file_tool
from harness_workspace import CommandRequest
from harness_workspace.local import (
    WORKSPACE_PATH_ESCAPES_ROOT,
    LocalWorkspace,
)

if TYPE_CHECKING:
    from conftest import ServerFactory

M8_REFUSAL = (
    'tool "read_file" is not safe for agent-server host execution: '
    "an operational Workspace adapter is required; start the server with --workspace-adapter local or sandbox"
)
SECRET = "secret text that must never be read"


def read_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    return [create_echo_tool(), create_read_file_tool(context.workspace)]


def reading(*paths: str) -> Callable[[], FakeModel]:
    """A model factory whose model reads each path in turn, then answers "done"."""
    turns = [
        ScriptedTurn(tool_calls=[ToolCall(f"call-{index}", "read_file", {"path": path})])
        for index, path in enumerate(paths)
    ]
    return lambda: FakeModel([*turns, ScriptedTurn(content="done")])


class CapturingRun:
    """A ``runtime`` seam: runtimes that record each run's workspace capability, then run it.

    ``refuse`` makes every run fail at admission, as a runtime refusing its input would.
    """

    def __init__(self, *, refuse: bool = False) -> None:
        self.adapters: list[object] = []
        self.disposed_at_start: list[bool] = []
        self._refuse = refuse

    def __call__(self) -> MinimalAgentRuntime:
        capture = self

        class Capturing(MinimalAgentRuntime):
            def run(self, input: RunInput) -> RunStream:
                capture.adapters.append(input.workspace)
                capture.disposed_at_start.append(
                    isinstance(input.workspace, LocalWorkspace) and input.workspace.disposed
                )
                if capture._refuse:
                    raise RuntimeError("the run failed")
                return super().run(input)

        return Capturing()

    def local(self, index: int) -> LocalWorkspace:
        adapter = self.adapters[index]
        assert isinstance(adapter, LocalWorkspace)
        return adapter


def descriptors_on(directory: Path) -> int:
    """How many of this process's descriptors are open on ``directory`` (a LocalWorkspace root holds one)."""
    target = os.path.realpath(directory)
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == target:
                count += 1
        except OSError:  # the listing's own descriptor is gone by now
            continue
    return count


def tool_results(notes: list[JsonObject]) -> list[JsonObject]:
    return [
        note["params"]["event"]["data"] for note in notes if note["params"]["event"]["type"] == "tool.result"
    ]


async def new_session(client: AcpClient, **params: Any) -> str:
    return (await client.request("session/new", {"workspace": "ws", **params}))["sessionId"]


async def test_read_file_reads_a_real_file_and_escapes_are_refused_before_policy_or_by_the_adapter(
    running: ServerFactory, tmp_path: Path
) -> None:
    (running.workspace / "notes").mkdir()
    (running.workspace / "notes" / "hello.txt").write_text("hello from disk\n")
    (running.root / "outside.txt").write_text(SECRET)
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    (running.workspace / "link.txt").symlink_to(secret)
    model = reading("notes/hello.txt", "../outside.txt", str(secret), "link.txt")
    options: dict[str, Any] = {"models": {"fake-model/v1": model}, "tools": read_tools}
    async with running(workspace_adapter="local", **options) as handle, handle.connect() as client:
        await client.initialize()
        result, notes = await client.prompt(await new_session(client), "read")
    assert result["status"] == "completed"
    read, parent, absolute, linked = tool_results(notes)
    assert read["ok"] is True
    assert read["output"] == {"path": "notes/hello.txt", "content": "hello from disk\n", "size": 16}
    # Not canonical: refused when the arguments are converted, before policy is asked.
    assert (parent["ok"], parent["error"]["code"]) == (False, "TOOL_BAD_INPUT")
    assert (absolute["ok"], absolute["error"]["code"]) == (False, "TOOL_BAD_INPUT")
    # Canonical, but a link leaving the root: both resolvers refuse it as an escape.
    assert (linked["ok"], linked["error"]["code"]) == (False, WORKSPACE_PATH_ESCAPES_ROOT)
    assert SECRET not in json.dumps(notes)


async def test_a_workspace_tool_rooted_elsewhere_is_refused_at_session_new(
    running: ServerFactory, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (running.root / "alias").symlink_to(running.workspace)
    roots = {"other": str(elsewhere), "gone": str(tmp_path / "gone"), "alias": str(running.root / "alias")}
    chosen: list[str] = []

    def tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
        return [create_read_file_tool(roots[chosen[-1]])]

    async with running(workspace_adapter="local", tools=tools) as handle, handle.connect() as client:
        await client.initialize()
        expected = {
            "other": "workspace boundary does not match this session",
            "gone": "workspace boundary does not exist",
        }
        for offer, reason in expected.items():
            chosen.append(offer)
            with pytest.raises(AcpClientError) as refused:
                await new_session(client)
            assert refused.value.code == -32602, offer
            assert refused.value.message == (
                f'tool "read_file" is not safe for agent-server host execution: {reason}'
            )
            # Refused before any adapter was opened: nothing holds the workspace.
            assert descriptors_on(running.workspace) == 0
        # A boundary root naming the session workspace through a symlink is the same folder.
        chosen.append("alias")
        assert await new_session(client)


async def test_without_the_opt_in_workspace_tools_keep_the_exact_m8_refusal(running: ServerFactory) -> None:
    run = CapturingRun()
    async with running(tools=read_tools, runtime=run) as handle, handle.connect() as client:
        await client.initialize()
        with pytest.raises(AcpClientError) as refused:
            await new_session(client)
        assert (refused.value.code, refused.value.message) == (-32602, M8_REFUSAL)
        assert descriptors_on(running.workspace) == 0
    async with running(runtime=run) as handle, handle.connect() as client:
        await client.initialize()
        result, _ = await client.prompt(await new_session(client), "go")
        assert result["status"] == "completed"
    # Pure tools only: the run gets no workspace capability at all.
    assert run.adapters == [None]


async def test_each_session_gets_its_own_adapter_disposed_when_it_completes(running: ServerFactory) -> None:
    (running.workspace / "a.txt").write_text("a")
    run = CapturingRun()
    options: dict[str, Any] = {"models": {"fake-model/v1": reading("a.txt")}, "tools": read_tools}
    async with (
        running(workspace_adapter="local", runtime=run, **options) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        first, second = await new_session(client), await new_session(client)
        # One descriptor per created session, opened at session/new.
        assert descriptors_on(running.workspace) == 2
        for session_id in (first, second):
            result, notes = await client.prompt(session_id, "read")
            assert result["status"] == "completed"
            assert tool_results(notes)[0]["output"]["content"] == "a"
    assert len(run.adapters) == 2
    assert run.local(0) is not run.local(1)
    assert run.disposed_at_start == [False, False]
    assert run.local(0).disposed
    assert run.local(1).disposed
    assert descriptors_on(running.workspace) == 0


async def test_the_adapter_is_disposed_when_the_run_fails(running: ServerFactory) -> None:
    run = CapturingRun(refuse=True)
    async with (
        running(workspace_adapter="local", tools=read_tools, runtime=run) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        session_id = await new_session(client)
        with pytest.raises(AcpClientError) as failed:
            await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
        assert failed.value.code == -32603
        # Disposed before the error was answered.
        assert run.local(0).disposed
        assert descriptors_on(running.workspace) == 0


async def test_a_canceled_turn_keeps_the_adapter_and_closing_the_session_disposes_it(
    running: ServerFactory,
) -> None:
    """Issue #23: a cancel ends the turn, not the conversation; ``session/close`` ends the session."""
    (running.workspace / "a.txt").write_text("a")
    run = CapturingRun()
    options: dict[str, Any] = {"models": {"fake-model/v1": reading("a.txt")}, "tools": read_tools}
    async with (
        running(workspace_adapter="local", runtime=run, **options) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        session_id = await new_session(client)
        outcome: list[AcpClientError] = []

        async def prompt() -> None:
            with pytest.raises(AcpClientError) as canceled:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            outcome.append(canceled.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            async for note in client.notifications:
                if note["params"]["event"]["type"] == "permission.requested":
                    break
            assert not run.local(0).disposed
            assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": True}
        assert outcome[0].code == -32603
        assert not run.local(0).disposed
        assert descriptors_on(running.workspace) == 1
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": False}
        assert await client.request("session/close", {"sessionId": session_id}) == {"closed": True}
        assert run.local(0).disposed
        assert descriptors_on(running.workspace) == 0
        assert await client.request("session/close", {"sessionId": session_id}) == {"closed": False}


async def test_an_unprompted_session_releases_its_adapter_when_canceled_or_idle(
    running: ServerFactory, tmp_path: Path
) -> None:
    async with (
        running(workspace_adapter="local", tools=read_tools) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        session_id = await new_session(client)
        assert descriptors_on(running.workspace) == 1
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": True}
        assert descriptors_on(running.workspace) == 0
    (tmp_path / "state").mkdir(exist_ok=True)
    store = SqliteSessionStore(tmp_path / "state" / "idle.sqlite")
    options: dict[str, Any] = {"db_path": None, "session_store": store, "created_session_timeout_ms": 50}
    async with (
        store,
        running(workspace_adapter="local", tools=read_tools, **options) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        session_id = await new_session(client)
        await running.wait_for_closed_row(store, session_id)
        assert descriptors_on(running.workspace) == 0


async def test_a_client_vanishing_mid_command_gets_the_command_killed_and_the_adapter_disposed(
    running: ServerFactory, tmp_path: Path
) -> None:
    # The command announces its pid through a FIFO, so the test knows it runs without sleeping.
    os.mkfifo(running.workspace / "started")

    run = CapturingRun()

    class LongCommand:
        """A model that runs a command in its session's workspace before it answers."""

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            # No abort signal: only disposal can stop this command before its 60 s are up.
            command = CommandRequest(argv=("sh", "-c", "echo $$ > started; exec sleep 60"))
            await run.local(0).execute(command)
            usage = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
            yield ResponseCompletedFrame(CompletionResponse("r-1", "done", (), usage, "stop"))

    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "vanish.sqlite")
    options: dict[str, Any] = {
        "db_path": None,
        "session_store": store,
        "tools": read_tools,
        "runtime": run,
        "models": {"fake-model/v1": LongCommand},
        # The vanished client never answers the close: a short grace spares the test the 1 s default.
        "close_grace_ms": 100,
    }
    reader = os.open(running.workspace / "started", os.O_RDONLY | os.O_NONBLOCK)
    async with (
        trio.lowlevel.FdStream(reader) as announcements,
        store,
        running(workspace_adapter="local", **options) as handle,
    ):
        async with running.raw_websocket(handle) as raw:
            await raw.send_request(1, "initialize", initialize_params())
            assert "result" in await raw.next_message()
            await raw.send_request(2, "session/new", {"workspace": "ws"})
            session_id = (await raw.next_message())["result"]["sessionId"]
            await raw.send_request(3, "session/prompt", {"sessionId": session_id, "content": "go"})
            announced = b""
            with trio.fail_after(10):
                while not announced.endswith(b"\n"):
                    announced += await announcements.receive_some(64)
            pid = int(announced)
            os.kill(pid, 0)  # the command is running
        # The TCP stream ended mid-command; the session finishes once its run has returned.
        await running.wait_for_closed_row(store, session_id)
        assert run.local(0).disposed
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert descriptors_on(running.workspace) == 0


class CreateFailingStore(SqliteSessionStore):
    """A store that cannot create session rows."""

    async def create(
        self,
        session_id: str | None = None,
        *,
        task_id: str | None = None,
        created_at: str | None = None,
        metadata: Any = None,
        owner_id: str | None = None,
        lease_ms: int | None = None,
    ) -> Any:
        raise OSError("row creation failed")


async def test_a_failed_row_creation_disposes_the_adapter_it_opened(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = CreateFailingStore(tmp_path / "state" / "create.sqlite")
    options: dict[str, Any] = {"db_path": None, "session_store": store, "tools": read_tools}
    async with (
        store,
        running(workspace_adapter="local", **options) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        with pytest.raises(AcpClientError) as failed:
            await new_session(client)
        assert (failed.value.code, failed.value.data_code) == (-32603, None)
        assert descriptors_on(running.workspace) == 0
