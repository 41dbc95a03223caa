"""What the strict dispatcher costs over a direct adapter call.

Run by hand (it is not a test): ``uv run python benchmarks/workspace_dispatch.py``.

In one run it times, per operation, with the variants interleaved round by round so that
drift hits them alike:

- ``direct``: ``await adapter.<op>(…)`` on an in-memory adapter (the shape of the
  specification's example, with no checkpoints);
- ``dispatch(adapter)``: ``invoke_workspace_operation`` on the raw adapter, binding
  included, as a caller holding an unbound adapter pays it;
- ``dispatch(bound)``: the dispatcher on a facade bound once;
- ``view``: a one-operation view from ``restrict_workspace``;
- ``dispatch(view)``: the dispatcher on such a view, as a tool (``read_file``) calls it.

It prints µs per operation (best and median of the rounds), and the ratio and absolute
overhead against the direct call measured in the same run. The project's target: the
dispatcher adds at most 3 µs per ``read_file`` call.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from harness_workspace import (
    CommandRequest,
    CommandResult,
    WorkspaceSnapshot,
    bind_workspace,
    invoke_workspace_operation,
    restrict_workspace,
)

READ_FILE_TARGET_US = 3.0


class BenchmarkAdapter:
    """An in-memory adapter with no checkpoints, so only the dispatcher's work is measured."""

    def __init__(self, files: dict[str, str]) -> None:
        self._files = files
        self._names = sorted(files)
        self._result = CommandResult(exit_code=0, stdout="ok\n", stderr="")
        self._snapshot = WorkspaceSnapshot(
            id="bench-1", created_at="2026-01-01T00:00:00Z", metadata={"files": len(files), "clean": True}
        )

    async def read_file(self, path: str) -> str:
        return self._files[path]

    async def write_file(self, path: str, contents: str) -> None:
        self._files[path] = contents

    async def list_files(self, path: str) -> list[str]:
        return self._names

    async def execute(self, command: CommandRequest) -> CommandResult:
        return self._result

    async def diff(self) -> str:
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        return self._snapshot

    async def dispose(self) -> None:
        return None


@dataclass(frozen=True)
class Timing:
    best_us: float
    median_us: float


async def _time_variants(
    variants: dict[str, Callable[[], Awaitable[object]]], iterations: int, rounds: int
) -> dict[str, Timing]:
    """Time every variant in each round, interleaved, so drift affects them all alike."""
    for call in variants.values():  # warm-up
        for _ in range(min(iterations, 1_000)):
            await call()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, call in variants.items():
                start = time.perf_counter_ns()
                for _ in range(iterations):
                    await call()
                samples[name].append((time.perf_counter_ns() - start) / iterations / 1_000)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: Timing(min(values), statistics.median(values)) for name, values in samples.items()}


async def run(iterations: int, rounds: int) -> int:
    files = {f"src/module_{index:04d}.py": f"VALUE = {index}\n" for index in range(1_000)}
    adapter = BenchmarkAdapter(files)
    facade = bind_workspace(adapter)
    path = "src/module_0042.py"
    command = CommandRequest(argv=("make", "test"))
    read_view = restrict_workspace(adapter, "read_file")
    list_view = restrict_workspace(adapter, "list_files")
    execute_view = restrict_workspace(adapter, "execute")
    snapshot_view = restrict_workspace(adapter, "snapshot")

    cases: dict[str, dict[str, Callable[[], Awaitable[object]]]] = {
        "read_file": {
            "direct": lambda: adapter.read_file(path),
            "dispatch(adapter)": lambda: invoke_workspace_operation(
                adapter, {"operation": "read_file", "path": path}
            ),
            "dispatch(bound)": lambda: invoke_workspace_operation(
                facade, {"operation": "read_file", "path": path}
            ),
            "view": lambda: read_view.read_file(path),
            "dispatch(view)": lambda: invoke_workspace_operation(
                read_view, {"operation": "read_file", "path": path}
            ),
        },
        "list_files (1,000 names)": {
            "direct": lambda: adapter.list_files("src"),
            "dispatch(adapter)": lambda: invoke_workspace_operation(
                adapter, {"operation": "list_files", "path": "src"}
            ),
            "dispatch(bound)": lambda: invoke_workspace_operation(
                facade, {"operation": "list_files", "path": "src"}
            ),
            "view": lambda: list_view.list_files("src"),
            "dispatch(view)": lambda: invoke_workspace_operation(
                list_view, {"operation": "list_files", "path": "src"}
            ),
        },
        "execute": {
            "direct": lambda: adapter.execute(command),
            "dispatch(adapter)": lambda: invoke_workspace_operation(
                adapter, {"operation": "execute", "command": {"argv": ["make", "test"]}}
            ),
            "dispatch(bound)": lambda: invoke_workspace_operation(
                facade, {"operation": "execute", "command": {"argv": ["make", "test"]}}
            ),
            "view": lambda: execute_view.execute(command),
            "dispatch(view)": lambda: invoke_workspace_operation(
                execute_view, {"operation": "execute", "command": {"argv": ["make", "test"]}}
            ),
        },
        "snapshot": {
            "direct": adapter.snapshot,
            "dispatch(adapter)": lambda: invoke_workspace_operation(adapter, {"operation": "snapshot"}),
            "dispatch(bound)": lambda: invoke_workspace_operation(facade, {"operation": "snapshot"}),
            "view": snapshot_view.snapshot,
            "dispatch(view)": lambda: invoke_workspace_operation(snapshot_view, {"operation": "snapshot"}),
        },
    }

    print(f"python {sys.version.split()[0]}, trio {trio.__version__}; {iterations:,} calls x {rounds} rounds")
    print(f"{'operation':<26}{'path':<20}{'best µs':>10}{'median µs':>11}{'ratio':>8}{'+µs':>8}")
    read_file_overhead = 0.0
    for operation, variants in cases.items():
        timings = await _time_variants(variants, iterations, rounds)
        baseline = timings["direct"]
        for name, timing in timings.items():
            ratio = timing.best_us / baseline.best_us
            overhead = timing.best_us - baseline.best_us
            if operation == "read_file" and name == "dispatch(adapter)":
                read_file_overhead = overhead
            print(
                f"{operation:<26}{name:<20}{timing.best_us:>10.3f}{timing.median_us:>11.3f}"
                f"{ratio:>7.2f}x{overhead:>8.3f}"
            )
    verdict = "within" if read_file_overhead <= READ_FILE_TARGET_US else "OVER"
    print(
        f"\nread_file dispatcher overhead (unbound adapter): {read_file_overhead:.3f} µs "
        f"— {verdict} the {READ_FILE_TARGET_US:.0f} µs target"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=5_000, help="calls per round (default 5,000)")
    parser.add_argument("--rounds", type=int, default=25, help="rounds per case (default 25)")
    arguments = parser.parse_args()
    return trio.run(run, arguments.iterations, arguments.rounds)


if __name__ == "__main__":
    raise SystemExit(main())
