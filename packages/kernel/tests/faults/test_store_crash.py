"""Kill -9 the store during schema migration and during checkpoint writes.

Migration: a schema-1 file with many rows is opened by the current store (which migrates it
in one transaction) and SIGKILLed at a seeded moment; afterwards the file must read as the
old schema or the fully migrated one, never half, with every event unchanged, and the store
must open it. Checkpoints: ``save_checkpoint`` runs in a loop with payloads whose digest is
checkable; after the kill the checkpoint read back is one of those written, whole, and not
older than the last acknowledged save.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults.crash_harness import (
    LANES,
    SUMMARIES,
    KillPlan,
    Summary,
    TrialVerdict,
    Zygote,
    fault_rng,
    fault_seed,
    fault_trials,
    run_lanes,
    start_zygotes,
)
from faults.kernel_crash_trials import (
    KERNEL_MODULES,
    build_checkpoint_template,
    build_v1_template,
    checkpoint_trial,
    measure_clean,
    migration_trial,
    remove_database,
)

# Every test here forks processes and SIGKILLs them over many trials: seconds each, so the
# inner loop (`pytest -m "not slow"`) leaves them to the full run.
pytestmark = pytest.mark.slow


def _finish(summary: Summary, started: float, trials: int) -> None:
    summary.seconds = time.monotonic() - started
    print("\n".join(summary.lines()))
    assert summary.kills >= trials, summary.lines()
    assert not summary.violations, "\n".join(summary.lines())


async def test_a_migration_killed_at_any_moment_leaves_the_old_or_the_new_schema_never_half(
    tmp_path: Path,
) -> None:
    seed, target = fault_seed(), "kernel store migration"
    rng = fault_rng(seed, target)
    summary = Summary(target, seed)
    SUMMARIES.append(summary)
    trials = max(10, fault_trials(100) // 5)
    started = time.monotonic()
    template = tmp_path / "v1-template.sqlite"
    build_v1_template(template, sessions=8, events_per_session=1000)
    async with start_zygotes(LANES, [], KERNEL_MODULES) as zygotes:
        summary.record(await migration_trial(zygotes[0], template, tmp_path, 0, kill_after=None))
        copy = tmp_path / "measure.sqlite"

        def reset() -> None:
            remove_database(copy)
            copy.write_bytes(template.read_bytes())

        params = {"db": str(copy), "synchronous": "FULL"}
        seconds, _ = await measure_clean(zygotes[0], "migrate", params, reset=reset)
        remove_database(copy)
        summary.clean_seconds = seconds

        async def one(zygote: Zygote, number: int, plan: KillPlan) -> TrialVerdict:
            return await migration_trial(zygote, template, tmp_path, number, kill_after=plan[0])

        def plan() -> KillPlan:
            return rng.uniform(0.0, seconds), None, "timer"

        await run_lanes(zygotes, summary, trials=trials, plan=plan, trial=one)
    _finish(summary, started, trials)


async def test_a_checkpoint_killed_mid_write_reads_back_whole_and_not_older_than_acknowledged(
    tmp_path: Path,
) -> None:
    seed, target = fault_seed(), "kernel store checkpoints"
    rng = fault_rng(seed, target)
    summary = Summary(target, seed)
    SUMMARIES.append(summary)
    trials = max(10, fault_trials(100) // 5)
    started = time.monotonic()
    template = tmp_path / "checkpoint-template.sqlite"
    await build_checkpoint_template(template)
    saves = 40
    async with start_zygotes(LANES, [], KERNEL_MODULES) as zygotes:
        sizes = [rng.randrange(0, 100_000) for _ in range(saves)]
        clean = await checkpoint_trial(
            zygotes[0],
            template,
            tmp_path,
            0,
            synchronous="FULL",
            sizes=sizes,
            kill_after=None,
            self_kill=None,
            how="clean",
        )
        summary.record(clean)
        copy = tmp_path / "measure.sqlite"

        def reset() -> None:
            remove_database(copy)
            copy.write_bytes(template.read_bytes())

        params = {"db": str(copy), "synchronous": "FULL", "sizes": sizes, "self_kill": None}
        seconds, _ = await measure_clean(zygotes[0], "checkpoint", params, reset=reset)
        remove_database(copy)
        summary.clean_seconds = seconds
        plans: dict[int, tuple[list[int], str]] = {}

        def plan() -> KillPlan:
            sizes = [rng.randrange(0, 100_000) for _ in range(saves)]
            synchronous = rng.choice(("FULL", "NORMAL"))
            plans[len(plans) + 1] = (sizes, synchronous)
            if rng.random() < 0.5:
                return rng.uniform(0.0, seconds), None, f"timer {synchronous}"
            count = rng.randint(1, saves)
            return None, {"point": "after-checkpoint", "count": count}, f"self after-checkpoint {synchronous}"

        async def one(zygote: Zygote, number: int, kill: KillPlan) -> TrialVerdict:
            sizes, synchronous = plans[number]
            return await checkpoint_trial(
                zygote,
                template,
                tmp_path,
                number,
                synchronous=synchronous,
                sizes=sizes,
                kill_after=kill[0],
                self_kill=kill[1],
                how=kill[2],
            )

        await run_lanes(zygotes, summary, trials=trials, plan=plan, trial=one)
    _finish(summary, started, trials)
