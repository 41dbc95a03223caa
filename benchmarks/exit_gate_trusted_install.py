"""What installing the base's gate costs CI (docs/decisions/003-exit-gate-trusts-the-base.md).

Run by hand (it is not a test): ``python3 benchmarks/exit_gate_trusted_install.py [--rounds N]
[--cold]``. Each round does what ``.ci/exit-gate`` does before the gate runs: ``git archive`` of
HEAD (standing in for the base commit) into a temp folder, then ``uv sync --locked
--no-default-groups --package harness-exit-gate --no-editable`` into a temp environment. The
baseline, measured in the same run, is the full workspace sync that ``.ci/run`` does anyway
(``uv sync --locked`` of a fresh copy). ``--cold`` gives every round an empty ``UV_CACHE_DIR``,
so packages come from the index, as on a new machine. Prints the median of each and the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


def _export(target: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", "--format=tar", "HEAD"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)


def _sync(project: Path, arguments: Sequence[str], environment: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "uv", "sync", "--locked", "--quiet", *arguments],
        cwd=project,
        env=environment,
        check=True,
    )


def _round(*, gate_only: bool, cold: bool) -> tuple[float, float]:
    """One timed export and sync; returns (export seconds, sync seconds)."""
    with tempfile.TemporaryDirectory(prefix="exit-gate-bench-") as folder:
        work = Path(folder)
        base = work / "base"
        base.mkdir()
        environment = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
        if cold:
            environment["UV_CACHE_DIR"] = str(work / "cache")
        started = time.perf_counter()
        _export(base)
        exported = time.perf_counter()
        if gate_only:
            environment["UV_PROJECT_ENVIRONMENT"] = str(work / "venv")
            _sync(
                base, ("--no-default-groups", "--package", "harness-exit-gate", "--no-editable"), environment
            )
        else:
            _sync(base, (), environment)
        synced = time.perf_counter()
        shutil.rmtree(work / "cache", ignore_errors=True)
        return exported - started, synced - exported


def main() -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="an empty uv cache for every round")
    options = parser.parse_args()
    gate = [_round(gate_only=True, cold=options.cold) for _ in range(options.rounds)]
    baseline = [_round(gate_only=False, cold=options.cold) for _ in range(options.rounds)]
    export = statistics.median(seconds for seconds, _ in gate)
    install = statistics.median(seconds for _, seconds in gate)
    workspace = statistics.median(seconds for _, seconds in baseline)
    cache = "cold (empty UV_CACHE_DIR)" if options.cold else "warm"
    print(f"uv cache: {cache}; rounds: {options.rounds}; medians")
    print(f"git archive of the base:                 {export:6.2f} s")
    print(f"install the base's gate (no-editable):   {install:6.2f} s")
    print(f"the trusted gate's set-up, in total:     {export + install:6.2f} s")
    print(f"baseline, full workspace uv sync:        {workspace:6.2f} s")
    print(f"ratio set-up / baseline:                 {(export + install) / workspace:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
