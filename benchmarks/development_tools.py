"""What each development tool costs per call, directly, through its execute, and through the runtime.

Run by hand (it is not a test): ``uv run python benchmarks/development_tools.py [--rounds R]``.

For each of the five tools of ``create_development_tools`` (``fs.read``, ``fs.list``,
``fs.write``, ``process.exec``, ``git.diff``), on a ``MemoryWorkspace`` and on a
``LocalWorkspace`` over a temporary git repository (a handful of committed files, one of
them modified so ``git.diff`` has content), it times in the same run:

- ``direct``: the adapter call the tool ends in (``await workspace.read_file(path)`` …),
  the baseline;
- ``execute``: ``tool.execute(params, ToolExecutionContext(workspace=view))`` on a
  one-operation view from ``restrict_workspace``, the parameters converted once beforehand;
- ``runtime``: one call through ``MinimalAgentRuntime`` (``FakeModel``, ``MemoryEventStore``,
  a controller that allows everything): a run whose model asks for N calls of the tool in one
  turn, minus a run whose model answers with text at once, divided by N. The run setup and
  the first model round cancel out; the N-call run still has one more model round (whose
  request carries the N results), so up to ``0-call run / N`` of it lands on each call (the
  table prints the 0-call run so that share can be read off).

``process.exec`` runs ``true`` on the LocalWorkspace (a real process), and on the
MemoryWorkspace a handler that answers the same at once. ``fs.write`` writes the same contents to a
committed file, so ``git.diff``'s answer does not change during the run. Each round times
every variant of a tool back to back, so drift hits them alike; the table shows the best
round and the median. The machine these figures come from has 2 cores shared with other
work: expect them to move by ±20 % from one run to the next. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.policy import PermissionDecision, ToolPermissionIntent
from harness_kernel.runtime import MinimalAgentRuntime, RunInput
from harness_kernel.store import MemoryEventStore
from harness_tools import (
    Tool,
    ToolExecutionContext,
    ToolRegistry,
    create_development_tools,
    parse_tool_arguments,
)
from harness_workspace import (
    CommandRequest,
    CommandResult,
    JsonValue,
    MemoryWorkspace,
    Workspace,
    declare_isolation,
    restrict_workspace,
)
from harness_workspace.local import LocalWorkspace

VARIANTS = ("direct", "execute", "runtime")
# The runtime fails a model completion that asks for more tool calls than this, so N stays
# within one turn (more turns would charge model rounds to the tool).
MAX_CALLS_PER_TURN = 128

# A handful of files; ``src/app.py`` is modified after the commit, ``notes/scratch.txt`` is
# what fs.write rewrites (with its committed contents, so the diff stays the same).
FILES = {
    "README.md": "# bench\n\nA small repository for the development tools benchmark.\n",
    "pyproject.toml": '[project]\nname = "bench"\nversion = "0.1.0"\n',
    "src/app.py": "".join(f"def handler_{n}(value):\n    return value + {n}\n\n" for n in range(40)),
    "src/util.py": "def identity(value):\n    return value\n",
    "tests/test_app.py": "from src.app import handler_1\n\n\ndef test_one():\n    assert handler_1(1) == 2\n",
    "notes/scratch.txt": "scratch contents\n",
}
MODIFIED = ("src/app.py", FILES["src/app.py"].replace("value + 7\n", "value + 700\n"))
WRITTEN = ("notes/scratch.txt", FILES["notes/scratch.txt"])

EXEC_ARGV = ("true",)

GIT_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


@dataclass(frozen=True)
class Case:
    """One tool on one workspace: its arguments, the adapter call it ends in, how often to call."""

    tool: str
    capability: str
    arguments: dict[str, JsonValue]
    direct: Callable[[Workspace], Awaitable[object]]
    calls: int
    """Calls per timed ``direct``/``execute`` sample."""
    runtime_calls: int
    """N, the tool calls of the timed runtime run."""


def cases(calls: int, runtime_calls: int, costly: int | None = None) -> list[Case]:
    """The five tools; ``costly``, when given, is both counts of fs.write and process.exec (host effects)."""
    path, contents = WRITTEN
    cheap = (calls, runtime_calls)
    host = cheap if costly is None else (costly, costly)
    return [
        Case("fs.read", "read_file", {"path": "src/app.py"}, lambda w: w.read_file("src/app.py"), *cheap),
        Case("fs.list", "list_files", {"path": "."}, lambda w: w.list_files("."), *cheap),
        Case(
            "fs.write",
            "write_file",
            {"path": path, "contents": contents},
            lambda w: w.write_file(path, contents),
            *host,
        ),
        Case(
            "process.exec",
            "execute",
            {"argv": list(EXEC_ARGV)},
            lambda w: w.execute(CommandRequest(argv=EXEC_ARGV, timeout_ms=30_000)),
            *host,
        ),
        Case("git.diff", "diff", {}, lambda w: w.diff(), *cheap),
    ]


class AllowEverything:
    """A permission controller that allows every intent: the benchmark measures the path, not policy."""

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        return PermissionDecision("allow", "benchmark", "bench-allow")


async def runtime_run(workspace: Workspace, tools: tuple[Tool[Any], ...], case: Case, calls: int) -> float:
    """Seconds of one drained run whose model asks for ``calls`` calls of the case's tool, then answers."""
    turns = [ScriptedTurn(content="done")]
    if calls:
        requested = [ToolCall(id=f"call-{n}", name=case.tool, arguments=case.arguments) for n in range(calls)]
        turns.insert(0, ScriptedTurn(tool_calls=requested))
    run_input = RunInput(
        run_id="run-bench",
        session_id="bench",
        turn_id="turn-bench",
        input="call the tool",
        model="fake-model/bench",
        model_adapter=FakeModel(turns),
        event_store=MemoryEventStore(),
        tools=ToolRegistry(tools),
        permission=AllowEverything(),
        workspace=workspace,
    )
    results = 0
    started = time.perf_counter()
    async with MinimalAgentRuntime().run(run_input) as stream:
        async for event in stream:
            if event.type == "tool.result":
                if not getattr(event.data, "ok", False):
                    raise SystemExit(f"{case.tool} failed in the runtime: {event.data}")
                results += 1
            elif event.type == "turn.completed" and getattr(event.data, "status", None) != "completed":
                raise SystemExit(f"the benchmark run did not complete: {event.data}")
    elapsed = time.perf_counter() - started
    if results != calls:
        raise SystemExit(f"{case.tool}: {results} results for {calls} calls")
    return elapsed


async def per_call_us(function: Callable[[], Awaitable[object]], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await function()
    return (time.perf_counter() - started) / calls * 1e6


@dataclass(frozen=True)
class Row:
    best_us: dict[str, float]
    median_us: dict[str, float]
    empty_run_us: float
    """The best 0-call run (setup and one model round), in µs.

    The N-call run's extra model round adds at most about this / N to a runtime figure."""


async def measure(workspace: Workspace, tools: tuple[Tool[Any], ...], case: Case, rounds: int) -> Row:
    """Best and median µs per call of each variant over ``rounds`` interleaved rounds."""
    tool = next(tool for tool in tools if tool.name == case.tool)
    params = parse_tool_arguments(tool, case.arguments)
    context = ToolExecutionContext(workspace=restrict_workspace(workspace, case.capability), call_id="bench")

    async def direct() -> object:
        return await case.direct(workspace)

    async def execute() -> object:
        return await tool.execute(params, context)

    # Warm-up: first calls pay imports, caches and (for git.diff) the index read.
    for _ in range(3):
        await direct()
        await execute()
    await runtime_run(workspace, tools, case, 2)
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    empty_runs: list[float] = []
    for _ in range(rounds):
        samples["direct"].append(await per_call_us(direct, case.calls))
        samples["execute"].append(await per_call_us(execute, case.calls))
        full = await runtime_run(workspace, tools, case, case.runtime_calls)
        empty = await runtime_run(workspace, tools, case, 0)
        samples["runtime"].append((full - empty) / case.runtime_calls * 1e6)
        empty_runs.append(empty * 1e6)
        gc.collect()  # each round starts from a collected heap, so one round's garbage is not the next's
    return Row(
        best_us={name: min(values) for name, values in samples.items()},
        median_us={name: statistics.median(values) for name, values in samples.items()},
        empty_run_us=min(empty_runs),
    )


def git(root: Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=root, env=GIT_ENVIRONMENT, capture_output=True, check=True)


def make_repository(root: Path) -> None:
    """The files committed, then ``src/app.py`` modified in the working tree."""
    git(root, "init", "--quiet", "--initial-branch=main")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "bench")
    name, text = MODIFIED
    (root / name).write_text(text, encoding="utf-8")


def answer_at_once(request: CommandRequest) -> CommandResult:
    """What ``EXEC_ARGV`` prints, without a process."""
    return CommandResult(exit_code=0, stdout="", stderr="")


def memory_workspace() -> MemoryWorkspace:
    """The files, with ``src/app.py`` modified after the baseline; it declares itself ``in-memory``."""
    workspace = MemoryWorkspace(FILES, commands={EXEC_ARGV[0]: answer_at_once})
    name, text = MODIFIED
    trio.run(workspace.write_file, name, text)
    return workspace


def print_table(label: str, rows: dict[str, Row], cases_run: list[Case]) -> None:
    print(f"\n{label}")
    print(
        f"{'tool':<14}{'N':>5}{'direct µs':>11}{'execute µs':>12}{'runtime µs':>12}"
        f"{'exec/dir':>10}{'run/dir':>9}{'run-exec µs':>13}{'0-call run µs':>15}"
    )
    for case in cases_run:
        row = rows[case.tool]
        best = row.best_us
        print(
            f"{case.tool:<14}{case.runtime_calls:>5}{best['direct']:>11.1f}{best['execute']:>12.1f}"
            f"{best['runtime']:>12.1f}{best['execute'] / best['direct']:>9.2f}x"
            f"{best['runtime'] / best['direct']:>8.2f}x{best['runtime'] - best['execute']:>13.1f}"
            f"{row.empty_run_us:>15.0f}"
        )
    medians = (rows[case.tool].median_us for case in cases_run)
    listed = "; ".join(
        f"{case.tool} {median['direct']:.1f} / {median['execute']:.1f} / {median['runtime']:.1f}"
        for case, median in zip(cases_run, medians, strict=True)
    )
    print(f"  medians (direct / execute / runtime µs): {listed}")


async def check_setup(workspace: Workspace) -> None:
    """Refuse to time a setup that would not measure what the table says."""
    if not await workspace.diff():
        raise SystemExit("the workspace has no diff: git.diff would time an empty answer")
    result = await workspace.execute(CommandRequest(argv=EXEC_ARGV))
    if (result.exit_code, result.stdout, result.stderr) != (0, "", ""):
        raise SystemExit(f"the command did not answer as expected: {result}")


async def measure_all(workspace: Workspace, cases_run: list[Case], rounds: int) -> dict[str, Row]:
    await check_setup(workspace)
    tools = create_development_tools("/bench/workspace")
    return {case.tool: await measure(workspace, tools, case, rounds) for case in cases_run}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per tool (default 5)")
    parser.add_argument(
        "--calls", type=int, default=200, help="calls per direct/execute sample (default 200)"
    )
    parser.add_argument(
        "--runtime-calls",
        type=int,
        default=100,
        help=f"N, tool calls in the timed run's one model turn (default 100, at most {MAX_CALLS_PER_TURN})",
    )
    parser.add_argument(
        "--host-calls",
        type=int,
        default=40,
        help="both counts for fs.write and process.exec on LocalWorkspace (default 40)",
    )
    arguments = parser.parse_args()
    rounds: int = arguments.rounds
    calls: int = arguments.calls
    runtime_calls: int = arguments.runtime_calls
    host_calls: int = arguments.host_calls
    if min(rounds, calls, runtime_calls, host_calls) < 1:
        parser.error("every count must be at least 1")
    if max(runtime_calls, host_calls) > MAX_CALLS_PER_TURN:
        parser.error(f"the runtime refuses a model turn of more than {MAX_CALLS_PER_TURN} tool calls")

    print(
        f"python {sys.version.split()[0]}, trio {trio.__version__}, {platform.machine()},"
        f" {os.cpu_count()} cores shared with other work (figures vary by ±20 % between runs);"
        f" {rounds} rounds, best round shown"
    )
    print("direct: the adapter call; execute: tool.execute on a restrict_workspace view;")
    print("runtime: (run with N calls - run with 0 calls) / N through MinimalAgentRuntime")

    memory_cases = cases(calls, runtime_calls)
    memory_rows = trio.run(measure_all, memory_workspace(), memory_cases, rounds)
    print_table("MemoryWorkspace", memory_rows, memory_cases)

    local_cases = cases(calls, runtime_calls, host_calls)
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "repo"
        root.mkdir()
        make_repository(root)
        workspace = LocalWorkspace(root, environment={"PATH": GIT_ENVIRONMENT["PATH"]})
        # fs.write and process.exec act only on a workspace declared isolated. This one is a
        # throwaway temporary directory the benchmark made, so it is declared "unsafe-host"
        # on purpose: never do this for a directory a model should not be free to change.
        declare_isolation(workspace, "unsafe-host")
        try:
            rows = trio.run(measure_all, workspace, local_cases, rounds)
        finally:
            trio.run(workspace.dispose)
    label = f"LocalWorkspace (temporary git repository, {len(FILES)} files, 1 modified)"
    print_table(label, rows, local_cases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
