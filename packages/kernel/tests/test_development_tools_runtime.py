"""The five development tools through the runtime: bad input before any effect, typed errors
kept, a cancelled run stops its command's process group."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from runtime_helpers import d, drain, make_input, registry, tool_turn

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ScriptedTurn
from harness_kernel.policy import PermissionDecision
from harness_kernel.runtime import MinimalAgentRuntime
from harness_tools import ToolPermissionIntent, create_development_tools
from harness_workspace import AbortController, MemoryWorkspace, declare_isolation
from harness_workspace.local import LocalWorkspace

TOOLS = create_development_tools("/repo")


class Allow:
    def __init__(self) -> None:
        self.intents: list[ToolPermissionIntent] = []

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        self.intents.append(intent)
        return PermissionDecision("allow", "operator rule", "rule-allow")


def _results(events: list[Event]) -> list[Any]:
    return [d(event) for event in events if event.type == "tool.result"]


async def _run(
    workspace: object, name: str, arguments: object, **overrides: Any
) -> tuple[list[Event], Allow]:
    model = FakeModel([tool_turn(("m1", name, arguments)), ScriptedTurn(content="done")])
    controller = Allow()
    run_input = make_input(
        model, tools=registry(*TOOLS), workspace=workspace, permission=controller, **overrides
    )
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert error is None
    return events, controller


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("fs.write", {"path": "/etc/passwd", "contents": "x"}),
        ("fs.write", {"path": "../out.txt", "contents": "x"}),
        ("fs.write", {"path": "a\x00.txt", "contents": "x"}),
        ("fs.write", {"path": "big.txt", "contents": "x" * 131_073}),
        ("fs.write", {"path": "a.txt", "contents": "x", "append": True}),
        ("process.exec", {"argv": ["touch", "made"] + ["x"] * 127}),
        ("process.exec", {"argv": ["touch", "made"], "timeoutMs": 0}),
        ("process.exec", {"argv": ["touch", "made"], "timeoutMs": 30_001}),
        ("process.exec", {"argv": ["touch", "made"], "timeoutMs": 10.5}),
        ("process.exec", {"argv": ["touch", "made"], "timeoutMs": "100"}),
        ("process.exec", {"argv": ["touch", "made"], "cwd": "/"}),
        ("process.exec", {"argv": ["touch", "made\x00"]}),
        ("fs.read", {"path": "/etc/shadow"}),
        ("fs.list", {"path": ".."}),
    ],
)
async def test_hostile_input_is_bad_input_before_policy_and_writes_nothing(
    tmp_path: Path, name: str, arguments: object
) -> None:
    workspace = declare_isolation(LocalWorkspace(tmp_path), "unsafe-host")
    events, controller = await _run(workspace, name, arguments)
    (result,) = _results(events)
    assert (result.ok, result.error.code) == (False, "TOOL_BAD_INPUT")
    assert controller.intents == []
    assert os.listdir(tmp_path) == []


async def test_a_typed_tool_error_keeps_its_code() -> None:
    workspace = MemoryWorkspace({"big.txt": "x" * 200_000})
    events, _ = await _run(workspace, "fs.read", {"path": "big.txt"})
    (result,) = _results(events)
    assert result.error.code == "TOOL_WORKSPACE_TOO_LARGE"
    assert "startLine" in result.error.message


async def test_a_workspace_error_keeps_its_code(tmp_path: Path) -> None:
    events, _ = await _run(LocalWorkspace(tmp_path), "fs.read", {"path": "missing.txt"})
    (result,) = _results(events)
    assert result.error.code == "WORKSPACE_NOT_FOUND"


async def test_the_policy_subject_of_a_command_is_its_shell_quoted_argv() -> None:
    workspace = MemoryWorkspace()
    _, controller = await _run(workspace, "process.exec", {"argv": ["uv", "run", "pytest", "-k", "not slow"]})
    assert [(intent.action, intent.subject) for intent in controller.intents] == [
        ("process.exec", "uv run pytest -k 'not slow'")
    ]


def _gone(pids: list[int]) -> list[bool]:
    """Whether each process has ended, waiting up to 5 s: a SIGKILL sent to a group is
    delivered, but a process needs a moment to be scheduled and die."""
    deadline = time.monotonic() + 5
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return [not _running(pid) for pid in pids]


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (killed, not yet reaped by its new parent) does not."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def test_cancelling_the_run_stops_the_commands_process_group(tmp_path: Path) -> None:
    workspace = declare_isolation(LocalWorkspace(tmp_path), "unsafe-host")
    controller = AbortController()
    script = "sleep 60 & echo $! > child.pid; echo $$ > shell.pid; wait"
    arguments = {"argv": ["sh", "-c", script], "timeoutMs": 30_000}
    events: list[Event] = []

    async def cancel_once_started() -> None:
        # The command writes the files; polling them is the only way to see it has started.
        while not (tmp_path / "child.pid").exists() or not (tmp_path / "shell.pid").exists():  # noqa: ASYNC110
            await trio.sleep(0.01)
        controller.abort("operator stop")

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_once_started)
            events, _ = await _run(workspace, "process.exec", arguments, signal=controller.signal)
    pids = [int((tmp_path / name).read_text()) for name in ("child.pid", "shell.pid")]
    assert _gone(pids) == [True, True]
    (result,) = _results(events)
    assert result.error.code == "TOOL_CANCELED"
    assert events[-1].type == "agent.stopped"
    assert d(events[-1]).status == "canceled"


# ------------------------------------------------------------------ real commands, bounded


async def _exec_result(tmp_path: Path, argv: list[str], timeout_ms: int = 30_000) -> Any:
    workspace = declare_isolation(LocalWorkspace(tmp_path), "unsafe-host")
    events, _ = await _run(workspace, "process.exec", {"argv": argv, "timeoutMs": timeout_ms})
    (result,) = _results(events)
    assert result.ok is True
    return result.output


async def test_a_flooding_command_is_bounded_and_keeps_its_end(tmp_path: Path) -> None:
    flood = "import sys; sys.stdout.write('x' * 3_000_000 + '\\nEND OF RUN: 1 failed\\n')"
    output = await _exec_result(tmp_path, ["python3", "-c", flood])
    assert output["truncated"] is True
    assert len(output["stdout"].encode()) < 131_072
    assert output["stdout"].startswith("xxx")
    assert output["stdout"].endswith("END OF RUN: 1 failed\n")


async def test_a_command_past_its_timeout_is_stopped_and_reported(tmp_path: Path) -> None:
    with trio.fail_after(10):
        output = await _exec_result(tmp_path, ["sleep", "30"], timeout_ms=300)
    assert output["timedOut"] is True


async def test_children_a_command_leaves_behind_are_stopped_with_it(tmp_path: Path) -> None:
    script = "sleep 60 & echo $! > a.pid; sleep 60 & echo $! > b.pid; echo started"
    output = await _exec_result(tmp_path, ["sh", "-c", script])
    assert (output["exitCode"], output["stdout"]) == (0, "started\n")
    pids = [int((tmp_path / name).read_text()) for name in ("a.pid", "b.pid")]
    assert _gone(pids) == [True, True]
