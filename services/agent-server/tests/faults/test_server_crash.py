"""Kill -9 the agent server while clients are mid-prompt: no effect without its durable intent.

See ``server_crash_trials`` for the trial; the seed is ``HARNESS_FAULT_SEED`` and the kill
points ``HARNESS_FAULT_TRIALS``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults.crash_harness import LANES, SUMMARIES, Summary, fault_rng, fault_seed, fault_trials, start_zygotes
from server_crash_trials import SERVER_MODULES, SERVER_PATH, run_server_target

# Every test here forks processes and SIGKILLs them over many trials: seconds each, so the
# inner loop (`pytest -m "not slow"`) leaves them to the full run.
pytestmark = pytest.mark.slow


async def test_a_killed_server_never_has_an_effect_without_its_durable_intent_and_restores_once(
    tmp_path: Path,
) -> None:
    seed, target = fault_seed(), "agent-server FULL"
    summary = Summary(target, seed)
    SUMMARIES.append(summary)
    trials = fault_trials(100)
    started = time.monotonic()
    async with start_zygotes(LANES, [SERVER_PATH], SERVER_MODULES) as zygotes:
        await run_server_target(zygotes, tmp_path, fault_rng(seed, target), summary, trials=trials)
    summary.seconds = time.monotonic() - started
    print("\n".join(summary.lines()))
    assert summary.kills >= trials, summary.lines()
    assert not summary.violations, "\n".join(summary.lines())
