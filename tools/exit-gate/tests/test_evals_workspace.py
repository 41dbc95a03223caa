"""Scenarios with a memory workspace and the development tools (kernel.md §10, issue #18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from harness_exit_gate.evals import (
    Scenario,
    ScenarioCommand,
    ScenarioOutcome,
    ScenarioParseError,
    ScenarioWorkspace,
    decode_scenario,
    execute_scenario,
    load_scenario,
)
from harness_exit_gate.manifest import TaskManifest, load_task_manifest
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_workspace import MemoryWorkspace, declare_isolation

REPOSITORY = Path(__file__).resolve().parents[3]
TASK = REPOSITORY / "tasks" / "dev-tools-0001.yaml"
GOLDEN = REPOSITORY / "tasks" / "scenarios" / "dev-tools-0001-golden.yaml"
FIXED = "def add(a, b):\n    return a + b\n"
BROKEN = "def add(a, b):\n    return a - b\n"


def declare_in_memory(workspace: MemoryWorkspace) -> None:
    """What the host that runs scenarios does: it vouches for the scripted command handler."""
    declare_isolation(workspace, "in-memory")


async def run_declared(
    scenario: Scenario, manifests: dict[str, TaskManifest], **options: Any
) -> ScenarioOutcome:
    """Run a scenario as harness-eval does, its memory workspace declared by the host."""
    return await execute_scenario(scenario, manifests, attest_workspace=declare_in_memory, **options)


def manifests(text: str | None = None) -> dict[str, TaskManifest]:
    manifest = load_task_manifest(text if text is not None else TASK.read_text(encoding="utf-8"))
    return {manifest.id: manifest}


def golden_document() -> dict[str, Any]:
    document = yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return cast("dict[str, Any]", document)


def base(**changes: object) -> dict[str, object]:
    return {"id": "x", "uses_tasks": ["dev-tools-0001"], "script": [], "expect": {"run": {}}, **changes}


def issues(document: object) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioParseError) as caught:
        decode_scenario(document)
    assert caught.value.code == "SCENARIO_INVALID"
    return caught.value.issues


async def test_the_dev_tools_golden_scenario_fixes_the_test_and_shows_the_diff() -> None:
    scenario = load_scenario(GOLDEN.read_text(encoding="utf-8"))
    outcome = await run_declared(scenario, manifests())

    assert outcome.failures == ()
    assert outcome.ok
    assert (outcome.golden_run.status, outcome.golden_run.steps, outcome.golden_run.tool_calls) == (
        "completed",
        6,
        5,
    )
    assert scenario.tools == ("echo", "fs.read", "fs.list", "fs.write", "process.exec", "git.diff")
    assert scenario.workspace == ScenarioWorkspace(
        files=scenario.workspace.files if scenario.workspace else (),
        commands=(ScenarioCommand(argv=("python3", "-m", "pytest", "-q"), exit_code=0, stdout="1 passed\n"),),
    )


async def test_the_golden_scenario_fails_when_the_fix_does_not_land() -> None:
    document = golden_document()
    document["script"][2]["toolCalls"][0]["arguments"]["contents"] = BROKEN
    outcome = await run_declared(decode_scenario(document), manifests())

    assert not outcome.ok
    assert f"files.calc.py: wanted {FIXED!r}, saw {BROKEN!r}".replace("'", '"') in outcome.failures
    # The diff of an unchanged workspace is empty, so the git.diff invariant fails too.
    assert any(
        failure.startswith("events.15 (tool.result): data.output.diff") for failure in outcome.failures
    )


async def test_a_manifest_that_denies_process_exec_gives_a_denied_result_and_the_run_completes() -> None:
    text = TASK.read_text(encoding="utf-8").replace(
        '"python3 -m pytest*": allow', '"python3 -m pytest*": deny'
    )
    document = golden_document()
    document["expect"] = {
        "run": {"status": "completed", "steps": 6, "toolCalls": 5},
        "events": [
            {"type": "policy.decision", "data.action": "process.exec", "data.effect": "deny"},
            {"type": "tool.result", "data.tool": "process.exec", "data.ok": False},
            {"type": "tool.result", "data.tool": "git.diff", "data.ok": True},
            {"type": "agent.stopped", "data.status": "completed"},
        ],
        "files": {"calc.py": FIXED},
    }
    outcome = await run_declared(decode_scenario(document), manifests(text))

    assert outcome.failures == ()
    # Against the unchanged golden expectations the denied command is what fails.
    golden = await run_declared(load_scenario(GOLDEN.read_text(encoding="utf-8")), manifests(text))
    assert any("process.exec" in failure or "events.11" in failure for failure in golden.failures)


async def test_an_unlisted_command_exits_127_like_the_memory_workspace() -> None:
    document = golden_document()
    document["script"][3]["toolCalls"][0]["arguments"]["argv"] = ["python3", "-m", "pytest", "-x"]
    document["expect"] = {
        "events": [
            {"type": "tool.result", "data.tool": "process.exec", "data.ok": True, "data.output.exitCode": 127}
        ]
    }
    outcome = await run_declared(decode_scenario(document), manifests())

    assert outcome.failures == ()


async def test_a_file_the_manifest_does_not_allow_is_not_written() -> None:
    document = golden_document()
    document["script"][2]["toolCalls"][0]["arguments"]["path"] = "setup.py"
    document["expect"] = {
        "events": [{"type": "policy.decision", "data.action": "fs.write", "data.effect": "deny"}],
        "files": {"calc.py": BROKEN},
    }
    outcome = await run_declared(decode_scenario(document), manifests())

    assert outcome.failures == ()


def test_workspace_tools_and_files_decode_strictly() -> None:
    assert issues(base(workspace={"files": {"a": 1}, "other": 2})) == [
        ("workspace.other", "unknown key"),
        ("workspace.files.a", "expected a string, got int"),
    ]
    bad: dict[str, object] = {"argv": [], "exitCode": "0", "shell": True}
    assert issues(base(workspace={"commands": [bad]})) == [
        ("workspace.commands.0.shell", "unknown key"),
        ("workspace.commands.0.argv", "must have at least 1 item"),
        ("workspace.commands.0.exitCode", "expected an integer or null, got string"),
    ]
    assert issues(base(workspace={"commands": [{"argv": ["a"]}]})) == [
        ("workspace.commands.0.exitCode", "is required")
    ]
    repeated = {"commands": [{"argv": ["a"], "exitCode": 0}, {"argv": ["a"], "exitCode": 1}]}
    assert issues(base(workspace=repeated)) == [
        ("workspace.commands.1.argv", "repeats the argv of an earlier command")
    ]
    assert issues(base(tools="all")) == [("tools", "must be dev or a list of tool names")]
    assert issues(base(tools=["fs.read", "rm", "fs.read"])) == [
        ("tools.1", "unknown tool; known: echo, fs.read, fs.list, fs.write, process.exec, git.diff"),
        ("tools.2", "is listed twice"),
    ]
    assert issues(base(expect={"files": {"a": "b"}})) == [("expect.files", "needs a workspace")]


def test_a_scenario_with_a_workspace_decodes_its_commands() -> None:
    command = {"argv": ["make", "test"], "exitCode": None, "stderr": "boom\n", "timedOut": True}
    scenario = decode_scenario(
        base(tools=["fs.read"], workspace={"files": {"a.txt": ""}, "commands": [command]})
    )

    assert scenario.tools == ("fs.read",)
    assert scenario.workspace == ScenarioWorkspace(
        files=(("a.txt", ""),),
        commands=(ScenarioCommand(argv=("make", "test"), exit_code=None, stderr="boom\n", timed_out=True),),
    )


# ------------------------------------------------------------------ a real model instead of the script


async def test_with_a_model_the_task_runs_on_it_and_only_status_and_files_are_checked() -> None:
    scenario = load_scenario(GOLDEN.read_text(encoding="utf-8"))
    # A "real" model: any streaming adapter; this one writes the fix its own way, in 2 steps.
    write = ToolCall("w1", "fs.write", {"path": "calc.py", "contents": FIXED})
    model = FakeModel([ScriptedTurn(tool_calls=[write]), ScriptedTurn(content="Done, in my own way.")])
    outcome = await run_declared(scenario, manifests(), model=("my-model", model))
    assert outcome.ok, outcome.failures
    assert outcome.golden_run.steps == 2  # not the script's step count, and not checked
    unfixed = FakeModel([ScriptedTurn(content="I did nothing.")])
    outcome = await run_declared(scenario, manifests(), model=("lazy-model", unfixed))
    assert not outcome.ok
    assert all(failure.startswith("files") for failure in outcome.failures), outcome.failures


async def test_undeclared_the_scenarios_workspace_refuses_the_command_tools() -> None:
    outcome = await execute_scenario(load_scenario(GOLDEN.read_text(encoding="utf-8")), manifests())

    assert not outcome.ok
    assert 'events.8 (policy.decision): data.effect: wanted "allow", saw "deny"' in outcome.failures
