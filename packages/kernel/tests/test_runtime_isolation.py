"""Tools that write or run commands act only on a workspace trusted outer code declared isolated.

Both loops (the runtime and ``run_agent``) read the declaration from the injected workspace
object (``harness_workspace.isolation_of``): a ``MemoryWorkspace`` is ``in-memory``, a
``LocalWorkspace`` nothing unless its host declares ``unsafe-host``. Nothing a model sends
can change which it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import legacy_helpers
import msgspec
import pytest
from runtime_helpers import d, drain, make_input, registry, tool_turn

from harness_kernel.events import Event
from harness_kernel.legacy import run_agent
from harness_kernel.models import FakeModel, ScriptedTurn
from harness_kernel.policy import PermissionDecision, RulePermissionController
from harness_kernel.runtime import MinimalAgentRuntime
from harness_tools import (
    Tool,
    ToolExecutionContext,
    ToolPermissionIntent,
    WorkspaceBoundary,
    create_bounded_tool,
    create_tool,
)
from harness_workspace import (
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    declare_isolation,
    invoke_workspace_operation,
    isolation_of,
)
from harness_workspace.local import LocalWorkspace


class _Write(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    path: str
    contents: str


class _Run(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    argv: list[str]


async def _write(params: _Write, context: ToolExecutionContext | None = None) -> dict[str, object]:
    assert context is not None
    request = {"operation": "write_file", "path": params.path, "contents": params.contents}
    await invoke_workspace_operation(context.workspace, request)
    return {"path": params.path}


async def _run(params: _Run, context: ToolExecutionContext | None = None) -> dict[str, object]:
    assert context is not None
    request = {"operation": "execute", "command": {"argv": params.argv}}
    result = await invoke_workspace_operation(context.workspace, request)
    assert isinstance(result, CommandResult)
    return {"exitCode": result.exit_code}


def write_tool() -> Tool[_Write]:
    tool = create_tool(
        name="write",
        description="write one file",
        parameters=_Write,
        execute=_write,
        authorization=lambda p: ToolPermissionIntent(action="fs.write", subject=p.path, scope="once"),
    )
    return create_bounded_tool(tool, WorkspaceBoundary(capability="write_file", access="write", root="/repo"))


def run_tool() -> Tool[_Run]:
    tool = create_tool(
        name="run",
        description="run one command",
        parameters=_Run,
        execute=_run,
        authorization=lambda p: ToolPermissionIntent(
            action="process.exec", subject=" ".join(p.argv), scope="once"
        ),
    )
    return create_bounded_tool(tool, WorkspaceBoundary(capability="execute", access="execute", root="/repo"))


class Allow:
    def __init__(self) -> None:
        self.intents: list[ToolPermissionIntent] = []

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        self.intents.append(intent)
        return PermissionDecision("allow", "operator rule", "rule-allow")


class _Subclassed(MemoryWorkspace):
    """May add host effects of its own: MemoryWorkspace does not vouch for it."""


def _of(events: list[Event], event_type: str) -> Any:
    return next(d(event) for event in events if event.type == event_type)


async def _runtime(
    workspace: object, tool: Tool[Any], arguments: dict[str, object]
) -> tuple[list[Event], FakeModel, Allow]:
    model = FakeModel([tool_turn(("m1", tool.name, arguments)), ScriptedTurn(content="done")])
    controller = Allow()
    stream = MinimalAgentRuntime().run(
        make_input(model, tools=registry(tool), workspace=workspace, permission=controller)
    )
    events, error = await drain(stream)
    assert error is None
    return events, model, controller


def _advertised(model: FakeModel) -> list[str]:
    tools = model.requests[0].tools or ()
    return [definition.name for definition in tools]


# ------------------------------------------------------------------ the runtime


async def test_on_a_host_declared_memory_workspace_writes_and_commands_run_once_allowed() -> None:
    # Built with a command handler, it vouches for nothing: this host declares it.
    workspace = declare_isolation(
        MemoryWorkspace(
            commands={
                "make": lambda command: CommandResult(exit_code=0, stdout="built", stderr="", timed_out=False)
            }
        ),
        "in-memory",
    )
    events, model, controller = await _runtime(workspace, run_tool(), {"argv": ["make", "test"]})
    assert _advertised(model) == ["run"]
    assert [intent.action for intent in controller.intents] == ["process.exec"]
    assert _of(events, "policy.decision").effect == "allow"
    assert _of(events, "tool.result").ok is True
    assert [call[0] for call in workspace.calls] == ["execute"]

    events, _, _ = await _runtime(workspace, write_tool(), {"path": "a.txt", "contents": "x"})
    assert _of(events, "tool.result").ok is True
    assert await workspace.read_file("a.txt") == "x"


@pytest.mark.parametrize("make_tool", [write_tool, run_tool], ids=["write", "execute"])
async def test_on_an_undeclared_host_workspace_they_are_refused_before_any_effect(
    tmp_path: Path, make_tool: Any
) -> None:
    marker = tmp_path / "written.txt"
    tool = make_tool()
    arguments: dict[str, object] = (
        {"path": "written.txt", "contents": "x"}
        if tool.name == "write"
        else {"argv": ["sh", "-c", f"echo x > {marker}"]}
    )
    workspace = LocalWorkspace(tmp_path)
    events, model, controller = await _runtime(workspace, tool, arguments)
    # Not shown to the model, refused by the table before the controller is asked, no effect.
    assert _advertised(model) == []
    assert controller.intents == []
    decision = _of(events, "policy.decision")
    assert (decision.effect, decision.rule_id) == ("deny", "runtime.isolation_required")
    access = "write" if tool.name == "write" else "execute"
    assert decision.reason == (
        f"tool {tool.name} has {access} access and needs a workspace declared isolated; this workspace is not"
    )
    result = _of(events, "tool.result")
    assert result.ok is False
    assert result.error.code == "WORKSPACE_ISOLATION_REQUIRED"
    assert not marker.exists()
    assert os.listdir(tmp_path) == []


def _forged_memory_workspace(host: LocalWorkspace) -> MemoryWorkspace:
    """What a lint-clean kernel module can write: a memory workspace whose handler runs the
    command on a host workspace it was handed."""

    async def delegate(command: CommandRequest) -> CommandResult:
        return await host.execute(command)

    return MemoryWorkspace(commands={"sh": delegate})


async def test_a_memory_workspace_delegating_to_the_host_is_refused_before_any_effect(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    forged = _forged_memory_workspace(LocalWorkspace(tmp_path))

    events, model, controller = await _runtime(
        forged, run_tool(), {"argv": ["sh", "-c", f"echo x > {marker}"]}
    )

    assert isolation_of(forged) is None
    assert _advertised(model) == []
    assert controller.intents == []
    decision = _of(events, "policy.decision")
    assert (decision.effect, decision.rule_id) == ("deny", "runtime.isolation_required")
    assert _of(events, "tool.result").error.code == "WORKSPACE_ISOLATION_REQUIRED"
    assert forged.calls == []
    assert not marker.exists()


async def test_reads_still_run_on_an_undeclared_host_workspace(tmp_path: Path) -> None:
    from harness_tools import create_read_file_tool  # noqa: PLC0415 - one test needs it

    (tmp_path / "a.txt").write_text("hello")
    events, model, _ = await _runtime(
        LocalWorkspace(tmp_path), create_read_file_tool("/repo"), {"path": "a.txt"}
    )
    assert _advertised(model) == ["read_file"]
    assert _of(events, "tool.result").output["content"] == "hello"


async def test_the_operators_unsafe_host_opt_in_admits_them(tmp_path: Path) -> None:
    workspace = declare_isolation(LocalWorkspace(tmp_path), "unsafe-host")
    events, model, controller = await _runtime(workspace, write_tool(), {"path": "b.txt", "contents": "y"})
    assert _advertised(model) == ["write"]
    assert [intent.subject for intent in controller.intents] == ["b.txt"]
    assert _of(events, "tool.result").ok is True
    assert (tmp_path / "b.txt").read_text() == "y"


async def test_a_subclass_of_an_isolated_adapter_is_not_vouched_for() -> None:
    workspace = _Subclassed()
    events, _, controller = await _runtime(workspace, write_tool(), {"path": "a.txt", "contents": "x"})
    assert controller.intents == []
    assert _of(events, "tool.result").error.code == "WORKSPACE_ISOLATION_REQUIRED"
    assert workspace.calls == []


async def test_the_model_cannot_talk_its_way_in(tmp_path: Path) -> None:
    # Whatever the model adds to its call, the arguments are the tool's and nothing else:
    # an extra key is invalid input, and the declaration is never read from data.
    workspace = LocalWorkspace(tmp_path)
    arguments: dict[str, object] = {"path": "a.txt", "contents": "x", "isolated": True}
    events, _, controller = await _runtime(workspace, write_tool(), arguments)
    assert controller.intents == []
    assert _of(events, "tool.result").ok is False
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ run_agent (legacy loop)


async def test_run_agent_refuses_them_on_an_undeclared_host_workspace_too(tmp_path: Path) -> None:
    result = await run_agent(
        legacy_helpers.options(
            [
                legacy_helpers.tool_turn(legacy_helpers.call("write", {"path": "a.txt", "contents": "x"})),
                ScriptedTurn(content="ok"),
            ],
            tools=[write_tool()],
            permission=RulePermissionController({"fs.write": "allow"}),
            workspace_capability=LocalWorkspace(tmp_path),
        )
    )
    decision = legacy_helpers.of_type(result.events, "policy.decision")[0]
    assert (decision["effect"], decision["ruleId"]) == ("deny", "kernel.isolation_required")
    assert legacy_helpers.error_of(result.events)["code"] == "WORKSPACE_ISOLATION_REQUIRED"
    assert os.listdir(tmp_path) == []


async def test_run_agent_runs_them_on_an_in_memory_workspace() -> None:
    workspace = MemoryWorkspace()
    result = await run_agent(
        legacy_helpers.options(
            [
                legacy_helpers.tool_turn(legacy_helpers.call("write", {"path": "a.txt", "contents": "x"})),
                ScriptedTurn(content="ok"),
            ],
            tools=[write_tool()],
            permission=RulePermissionController({"fs.write": "allow"}),
            workspace_capability=workspace,
        )
    )
    assert legacy_helpers.of_type(result.events, "tool.result")[0]["ok"] is True
    assert await workspace.read_file("a.txt") == "x"


# ------------------------------------------------------------------ a provider's typed failure


class _ProviderDown(Exception):
    """Shaped like harness-models' ModelError: a stable code, and a message with anything in it."""

    def __init__(self) -> None:
        super().__init__("upstream said: key sk-secret-123 is invalid")
        self.code = "MODEL_AUTH_FAILED"


class _Failing:
    def stream(self, request: object) -> Any:
        async def frames() -> Any:
            raise _ProviderDown()
            yield  # pragma: no cover

        return frames()


async def test_a_provider_failure_fails_the_run_with_its_code_and_never_its_message() -> None:
    stream = MinimalAgentRuntime().run(make_input(_Failing()))
    events, error = await drain(stream)
    assert error is not None
    assert str(error).endswith("model stream failed: MODEL_AUTH_FAILED")
    assert "sk-secret" not in str(error)
    assert all("sk-secret" not in repr(event) for event in events)
    assert events[-1].type == "agent.stopped"
    assert d(events[-1]).status == "failed"
