"""Kill -9 of a writer mid-batch: what it acknowledged survives, nothing is torn, retries agree.

The kernel's crash harness (a pre-warmed zygote forks one writer per trial) drives
``pg_crash_workloads.appends``: 16 tasks appending concurrently to 4 sessions through one
``PostgresSessionStore`` (group commit), SIGKILLed by a seeded timer, after an
acknowledgement, just before a batch's ``COMMIT`` or just after it returned. After each kill
``pg_crash_trials`` checks the database and retries every in-doubt append by event id (see
there). ``HARNESS_FAULT_TRIALS`` sets the kill points (default 100), ``HARNESS_FAULT_SEED``
the seed; ``benchmarks/crash_consistency.py --targets postgres`` is the long run.
"""

from __future__ import annotations

import time

import pytest
from faults.crash_harness import LANES, SUMMARIES, Summary, fault_rng, fault_seed, fault_trials, start_zygotes
from pg_cluster import Cluster
from pg_crash_trials import PG_MODULES, PG_SUPPORT, CrashShape, pg_trial, run_postgres_target

# Forks a writer per trial and SIGKILLs it over 100 trials: tens of seconds.
pytestmark = pytest.mark.slow


async def test_a_writer_killed_mid_batch_loses_nothing_acknowledged_and_tears_nothing(
    postgres: Cluster,
) -> None:
    seed, target = fault_seed(), "postgres store appends"
    summary = Summary(target, seed)
    SUMMARIES.append(summary)
    trials = fault_trials(100)
    started = time.monotonic()
    databases = [postgres.new_database() for _ in range(LANES)]
    async with start_zygotes(LANES, [PG_SUPPORT], PG_MODULES) as zygotes:
        await run_postgres_target(zygotes, databases, fault_rng(seed, target), summary, trials=trials)
    summary.seconds = time.monotonic() - started
    print("\n".join(summary.lines()))
    assert summary.kills >= trials, summary.lines()
    assert not summary.violations, "\n".join(summary.lines())


async def test_the_checks_catch_a_store_that_acknowledges_a_batch_it_rolled_back(
    postgres: Cluster,
) -> None:
    # The negative control: every third write COMMIT of the writer is sent as ROLLBACK, so
    # its store acknowledges appends that are not stored. The same checks must find it.
    conninfo = postgres.new_database()
    async with start_zygotes(1, [PG_SUPPORT], PG_MODULES) as zygotes:
        verdict = await pg_trial(zygotes[0], conninfo, 1, (None, None, "clean"), CrashShape(), drop_every=3)
    assert not verdict.killed
    assert any(problem.startswith("acknowledged events lost") for problem in verdict.problems), verdict
