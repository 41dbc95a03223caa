"""Kill -9 a durable kernel run at random points: no effect ever happens without its durable intent.

Each trial forks a grandchild from a pre-warmed zygote that runs ``MinimalAgentRuntime`` (or
the legacy ``run_agent``) on a real ``SqliteSessionStore`` file with a scripted FakeModel
calling the ``mark`` tool, whose effect appends the call id to a marker file. The
grandchild is SIGKILLed after a seeded delay spread over a clean run, or kills itself at a
seeded count of appends or effects. With the process gone, the file must pass
``integrity_check``, hold a durable ``tool.call`` and allowing ``policy.decision`` before
every effect, keep gapless sequences and every acknowledged event, replay in full, and
recover exactly once. The seed is ``HARNESS_FAULT_SEED``; the trials ``HARNESS_FAULT_TRIALS``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults.crash_harness import LANES, SUMMARIES, Summary, fault_rng, fault_seed, fault_trials, start_zygotes
from faults.kernel_crash_trials import KERNEL_MODULES, kernel_trial, run_kernel_target

# Every test here forks processes and SIGKILLs them over many trials: seconds each, so the
# inner loop (`pytest -m "not slow"`) leaves them to the full run.
pytestmark = pytest.mark.slow


async def _run_target(tmp_path: Path, target: str, *, workload: str, synchronous: str, trials: int) -> None:
    seed = fault_seed()
    summary = Summary(target, seed)
    SUMMARIES.append(summary)
    started = time.monotonic()
    async with start_zygotes(LANES, [], KERNEL_MODULES) as zygotes:
        await run_kernel_target(
            zygotes,
            tmp_path,
            fault_rng(seed, target),
            summary,
            workload=workload,
            synchronous=synchronous,
            trials=trials,
        )
    summary.seconds = time.monotonic() - started
    print("\n".join(summary.lines()))
    assert summary.kills >= trials, summary.lines()
    assert not summary.violations, "\n".join(summary.lines())


async def test_a_killed_runtime_run_never_has_an_effect_without_its_durable_call_and_decision(
    tmp_path: Path,
) -> None:
    await _run_target(
        tmp_path, "kernel runtime FULL", workload="runtime", synchronous="FULL", trials=fault_trials(100)
    )


async def test_a_killed_legacy_run_never_has_an_effect_without_its_durable_call_and_decision(
    tmp_path: Path,
) -> None:
    trials = max(10, fault_trials(100) // 5)
    await _run_target(tmp_path, "kernel legacy FULL", workload="legacy", synchronous="FULL", trials=trials)


async def test_with_synchronous_normal_a_process_kill_loses_no_acknowledged_event(tmp_path: Path) -> None:
    """NORMAL skips the WAL fsync at commit, but the committed frames are already in the OS page cache,
    which a process kill does not touch: nothing acknowledged may be lost here. What NORMAL can lose
    (the last commits on power loss or an OS crash) is beyond what killing a process can show.
    """
    trials = max(10, fault_trials(100) // 5)
    await _run_target(
        tmp_path, "kernel runtime NORMAL", workload="runtime", synchronous="NORMAL", trials=trials
    )


async def test_the_harness_catches_a_store_that_acknowledges_before_it_commits(tmp_path: Path) -> None:
    """Negative control: a write-behind event store must produce violations, or the checks are vacuous."""
    problems: list[str] = []
    async with start_zygotes(1, [], KERNEL_MODULES) as (zygote,):
        for number, count in enumerate((2, 5), start=1):
            verdict = await kernel_trial(
                zygote,
                tmp_path,
                number,
                workload="runtime",
                synchronous="FULL",
                rounds=2,
                calls=3,
                kill_after=None,
                self_kill={"point": "after-effect", "count": count},
                how="self after-effect",
                write_behind=True,
            )
            assert verdict.killed
            problems += verdict.problems
    assert any("without durable tool.call/policy.decision" in problem for problem in problems), problems
    assert any("acknowledged events lost" in problem for problem in problems), problems
