"""Kill -9 a checkpointed turn on both sides of every durable append, then continue it (issue #23 §3).

Each trial forks a grandchild from a pre-warmed zygote that runs ``MinimalAgentRuntime`` with
checkpoints on a real ``SqliteSessionStore`` file: a scripted model asking for rounds of
``effect`` calls (each effect fsynced to a log before the tool returns) under a permission
controller that allows, asks and denies. The grandchild kills itself just before or just
after the append of a ``model.request``, ``tool.call``, ``policy.decision``,
``tool.result``, ``runtime.checkpoint`` or any event, inside an effect, or a timer kills it.
This process then continues the turn as a restarted server would (``continue_session``,
another owner, the first lease run out) and checks: no effect twice, no acknowledged event
lost, gapless seqs, one terminal pair with ``agent.stopped`` last, a second continuation
refused, and an unanswered request never re-sent by default. The seed is
``HARNESS_FAULT_SEED``; the kill points ``HARNESS_FAULT_TRIALS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from faults.continuation_crash_trials import (
    CONTINUATION_MODULES,
    POINTS,
    continuation_trial,
    run_continuation_target,
)
from faults.continuation_crash_workloads import World
from faults.crash_harness import LANES, SUMMARIES, Summary, fault_rng, fault_seed, fault_trials, start_zygotes

import harness_kernel.runtime
from harness_kernel.events import Event
from harness_kernel.runtime._resume import ResumePlan, plan_continuation

# Every test here forks processes and SIGKILLs them over many trials: seconds each, so the
# inner loop (`pytest -m "not slow"`) leaves them to the full run (CI runs it).
pytestmark = pytest.mark.slow

TARGET = "kernel continuation"


async def test_a_turn_killed_at_any_append_or_effect_is_continued_once_without_repeating_an_effect(
    tmp_path: Path,
) -> None:
    seed = fault_seed()
    summary = Summary(TARGET, seed)
    SUMMARIES.append(summary)
    trials = fault_trials(100)
    started = time.monotonic()
    async with start_zygotes(LANES, [], CONTINUATION_MODULES) as zygotes:
        await run_continuation_target(zygotes, tmp_path, fault_rng(seed, TARGET), summary, trials=trials)
    summary.seconds = time.monotonic() - started
    print("\n".join(summary.lines()))
    assert summary.kills >= trials, summary.lines()
    assert not summary.violations, "\n".join(summary.lines())
    hit = {point for point in POINTS for label in summary.points if label.startswith(f"self {point}:")}
    if trials >= 2 * len(POINTS):
        assert hit == set(POINTS), sorted(set(POINTS) - hit)


_real_plan = plan_continuation


def _rerun_open_calls(events: list[Event], session_id: str) -> ResumePlan:
    """A broken planner: a call under way at the crash is run again instead of interrupted."""
    plan = _real_plan(events, session_id)
    opened = plan.open_call
    if opened is None or opened.result is not None:
        return plan
    return replace(plan, open_call=None, remaining=(opened.call, *plan.remaining))


def _resend_silently(events: list[Event], session_id: str) -> ResumePlan:
    """A broken planner: an unanswered request is simply asked again (a new model round)."""
    plan = _real_plan(events, session_id)
    return replace(plan, next="round") if plan.next == "uncertain" else plan


@dataclass(frozen=True)
class _Broken:
    """A broken continuation, the kill point that exposes it, and the violations it must cause."""

    planner: Callable[[list[Event], str], ResumePlan]
    point: str
    counts: tuple[int, int]
    """The kill counts of two trials, the first with a batching store, the second without."""
    caught: tuple[str, ...]


@pytest.mark.parametrize(
    "broken",
    [
        _Broken(_rerun_open_calls, "after-effect", (1, 4), ("effects repeated", "more than one tool.call")),
        _Broken(_resend_silently, "after-append model.request", (1, 3), ("without calling the model",)),
    ],
    ids=["open calls run again", "unanswered request re-sent"],
)
async def test_the_harness_catches_a_broken_continuation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: _Broken
) -> None:
    """Negative controls: a continuation that repeats an effect, or sends an unanswered request
    again by default, must produce violations, or the checks are vacuous."""
    monkeypatch.setattr(harness_kernel.runtime, "plan_continuation", broken.planner)
    world = World(3, 3)
    problems: list[str] = []
    async with start_zygotes(1, [], CONTINUATION_MODULES) as (zygote,):
        for number, (count, batched) in enumerate(zip(broken.counts, (True, False), strict=True), start=1):
            verdict = await continuation_trial(
                zygote,
                tmp_path,
                number,
                world,
                kill_after=None,
                self_kill={"point": broken.point, "count": count},
                how=f"self {broken.point}",
                batched=batched,
                resend=False,
            )
            assert verdict.killed
            problems += verdict.problems
    for expected in broken.caught:
        assert any(expected in problem for problem in problems), problems
