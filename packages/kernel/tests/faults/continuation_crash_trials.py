"""Continuation trials, parent side: kill the turn's process, continue the turn here, check it all.

A trial forks the ``continuation`` workload (``continuation_crash_workloads.py``) from the
zygote and lets it die at a seeded point: on either side of the durable append of a
``model.request``, ``tool.call``, ``policy.decision``, ``tool.result``, ``runtime.checkpoint``
or any event, inside the tool's effect, or by a timer. Then this process plays the
restarted server: a fresh ``MinimalAgentRuntime``, another owner, the store clock an hour
ahead (the first owner's lease has run out), the same model and tool; it calls
``continue_session`` and drives the turn to its end, then tries a second continuation
(another owner, the clock ahead again), which must be refused.

What the turn must do is judged from the events the kill left, not by the kernel's planner:
nothing to continue (no session, no turn, no checkpoint, or a turn that already ended), an
unanswered model request (never re-sent unless ``resend_uncertain``: the turn fails without
calling the model), or a turn that goes on and completes. Across both processes every key's
effect happens at most once and only after its durable intent and allowing decision, every
acknowledged event is stored, seqs stay gapless, the turn has exactly one terminal pair and
``agent.stopped`` is the session's last event.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from faults.continuation_crash_workloads import MODEL, SESSION, RoundModel, World, read_effects
from faults.crash_harness import (
    KillPlan,
    Log,
    Row,
    Summary,
    TrialVerdict,
    Zygote,
    check_acknowledged,
    check_effects,
    check_integrity,
    check_log,
    read_log,
    run_lanes,
)
from faults.kernel_crash_trials import remove_database
from runtime_helpers import drain

from harness_kernel.events import Event
from harness_kernel.runtime import ContinuationError, ContinueInput, MinimalAgentRuntime
from harness_kernel.store import SessionStoreError, SqliteSessionStore
from harness_tools import ToolRegistry

__all__ = [
    "CONTINUATION_MODULES",
    "POINTS",
    "Continued",
    "continuation_trial",
    "continue_turn",
    "run_continuation_target",
]

CONTINUATION_MODULES: Final = ("faults.continuation_crash_workloads",)
APPEND_KINDS: Final = (
    "model.request",
    "tool.call",
    "policy.decision",
    "tool.result",
    "runtime.checkpoint",
    "any",
)
POINTS: Final = (
    *(f"{side} {kind}" for kind in APPEND_KINDS for side in ("before-append", "after-append")),
    "before-effect",
    "after-effect",
)
"""Every self-kill point; trials take them in turn (with a timer kill after each round of them)."""
SLOTS: Final = (*POINTS, "timer")
SECOND_OWNER: Final = "owner-second"
THIRD_OWNER: Final = "owner-third"
LEASE_MS: Final = 60_000
NEVER_SENT: Final = "request checkpoint without its model.request"
UNCHECKPOINTED_ANSWER: Final = "tool answer without its response checkpoint"
HALF_PAIR: Final = "ended without agent.stopped"
REFUSED: Final = ("no session", "no turn", "no checkpoint", "ended", HALF_PAIR)
"""What the kill may leave that continuing must refuse, storing nothing."""
RESEND_SHARE: Final = 0.25
"""The share of trials whose continuation re-sends an unanswered request (``resend_uncertain``)."""


# ------------------------------------------------------------------ continuing, as a restarted server


class _StoreClock:
    """The continuing process's store clock: an hour ahead, and another hour per restart."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(hours=1)

    def __call__(self) -> datetime:
        return self.now

    def restart(self) -> None:
        self.now += timedelta(hours=1)


@dataclass
class Continued:
    """What continuing a killed turn did."""

    refused: BaseException | None
    """What ``continue_session`` raised (``None``: it returned a stream)."""
    events: list[Event]
    """The continued turn's events, as its stream delivered them."""
    error: BaseException | None
    """What the stream raised after its terminal pair."""
    model_calls: int
    again: BaseException | None
    """What the second ``continue_session`` raised (``None``: it was not refused)."""


def _continue_input(
    store: SqliteSessionStore, world: World, model: RoundModel, effects: Path, owner: str, *, resend: bool
) -> ContinueInput:
    return ContinueInput(
        session_id=SESSION,
        sessions=store,
        owner_id=owner,
        lease_ms=LEASE_MS,
        event_store=store.event_log(SESSION, owner_id=owner),
        model=MODEL,
        model_adapter=model,
        tools=ToolRegistry([world.tool(str(effects))]),
        permission=world.controller(),
        budget=world.budget(),
        resend_uncertain=resend,
    )


async def continue_turn(db: Path, effects: Path, world: World, *, resend: bool) -> Continued:
    """Continue the session's turn to its end as a restarted server would, then try once more."""
    clock = _StoreClock()
    model = RoundModel(world)
    refused: BaseException | None = None
    again: BaseException | None = None
    events: list[Event] = []
    error: BaseException | None = None
    async with SqliteSessionStore(db, now=clock) as store:
        runtime = MinimalAgentRuntime()
        try:
            stream = await runtime.continue_session(
                _continue_input(store, world, model, effects, SECOND_OWNER, resend=resend)
            )
        except Exception as raised:  # judged by the checks: only some refusals are right
            refused = raised
        else:
            events, error = await drain(stream)
        clock.restart()
        try:
            stream = await MinimalAgentRuntime().continue_session(
                _continue_input(store, world, RoundModel(world), effects, THIRD_OWNER, resend=resend)
            )
        except Exception as raised:
            again = raised
        else:
            await drain(stream)
    return Continued(refused, events, error, len(model.requests), again)


# ------------------------------------------------------------------ what the kill left


def _last_request(rows: list[Row]) -> str | None:
    """The turn's last model request: a ``model.request``, or a request checkpoint stored without it."""
    request: str | None = None
    for row in rows:
        if row.type == "model.request" or (
            row.type == "runtime.checkpoint" and row.data.get("boundary") == "request"
        ):
            request = row.data.get("requestId")
    return request


def expected_outcome(before: Log) -> tuple[str, str | None]:
    """(what continuing must do, the unanswered request) judged from the events the kill left.

    ``no session``, ``no turn``, ``no checkpoint``, ``ended``: refused, nothing written (so
    is :data:`HALF_PAIR`, a ``turn.completed`` stored without its ``agent.stopped``).
    ``unanswered``: the last ``model.request`` has no recorded ``model.response`` and
    assistant message. Two states arise only when each event is its own commit (a store
    without ``append_many``), where a boundary's events can be cut apart: a request
    checkpoint stored without its ``model.request`` (:data:`NEVER_SENT`: the model was not
    called), and an answer asking for tools stored without the response checkpoint that goes
    with it (:data:`UNCHECKPOINTED_ANSWER`); and so does a half terminal pair. ``continue``:
    the turn goes on to completion.
    """
    if SESSION not in before.sessions:
        return "no session", None
    rows = before.of(SESSION)
    types = {row.type for row in rows}
    if "turn.started" not in types:
        return "no turn", None
    if "runtime.checkpoint" not in types:
        return "no checkpoint", None
    if "turn.completed" in types:
        return ("ended" if "agent.stopped" in types else HALF_PAIR), None
    request = _last_request(rows)
    if request is None:
        return "continue", None
    mine = [row for row in rows if row.data.get("requestId") == request]
    if not any(row.type == "model.request" for row in mine):
        return NEVER_SENT, request
    answer = next((row for row in mine if row.type == "message.completed"), None)
    if answer is None or not any(row.type == "model.response" for row in mine):
        return "unanswered", request
    checkpointed = any(
        row.type == "runtime.checkpoint" and row.data.get("boundary") == "response" for row in mine
    )
    if answer.data.get("finishReason") == "tool_calls" and not checkpointed:
        return UNCHECKPOINTED_ANSWER, request
    return "continue", None


# ------------------------------------------------------------------ the checks


def _code(error: BaseException | None) -> str | None:
    return getattr(error, "code", None)


def _refusals(expected: str, continued: Continued, before: Log, after: Log) -> list[str]:
    """Nothing to continue: both attempts refused with the right error, nothing written."""
    problems: list[str] = []
    wanted = (SessionStoreError, "SESS_NOT_FOUND") if expected == "no session" else (ContinuationError, None)
    attempts = (("continue_session", continued.refused), ("a second continue_session", continued.again))
    for name, raised in attempts:
        if not isinstance(raised, wanted[0]) or (wanted[1] is not None and _code(raised) != wanted[1]):
            problems.append(f"{expected}: {name} should raise {wanted[0].__name__}, got {raised!r}")
    if [row.event_id for row in after.rows] != [row.event_id for row in before.rows]:
        problems.append(f"{expected}: the refused continuation stored events")
    return problems


def _terminal(continued: Continued, before: Log, after: Log) -> tuple[list[str], str | None]:
    """The continued turn's shape: resumed first, one terminal pair, ``agent.stopped`` last."""
    problems: list[str] = []
    if continued.refused is not None:
        return [f"continue_session was refused: {continued.refused!r}"], None
    if not isinstance(continued.again, ContinuationError):
        problems.append(f"a second continue_session should raise ContinuationError, got {continued.again!r}")
    rows = after.of(SESSION)
    kept = len(before.of(SESSION))
    if [row.event_id for row in rows[:kept]] != [row.event_id for row in before.of(SESSION)]:
        problems.append("the continuation changed the events the killed process had stored")
    if [row.event_id for row in rows[kept:]] != [event.event_id for event in continued.events]:
        problems.append("the continued turn's stored events are not those its stream delivered")
    if not continued.events or continued.events[0].type != "turn.resumed":
        problems.append("the continued turn does not start with turn.resumed")
    pairs = [row for row in rows if row.type in ("turn.completed", "agent.stopped")]
    if [row.type for row in pairs] != ["turn.completed", "agent.stopped"]:
        problems.append(f"expected exactly one terminal pair, found {[row.type for row in pairs]}")
        return problems, None
    if rows[-1].type != "agent.stopped":
        problems.append(f"agent.stopped is not the session's last event ({rows[-1].type} is)")
    return problems, pairs[0].data.get("status")


def _calls(world: World, before: Log, after: Log, status: str | None) -> list[str]:
    """Each key called at most once, each call with one result and one tool message."""
    problems: list[str] = []
    rows = after.of(SESSION)
    calls = [row for row in rows if row.type == "tool.call"]
    twice = [key for key, count in Counter(row.data.get("modelCallId") for row in calls).items() if count > 1]
    if twice:
        problems.append(f"model calls with more than one tool.call: {twice}")
    results = Counter(row.data.get("callId") for row in rows if row.type == "tool.result")
    messages = Counter(
        row.data.get("toolCallId")
        for row in rows
        if row.type == "message.completed" and row.data.get("role") == "tool"
    )
    stored_before = {row.data.get("callId") for row in before.rows if row.type == "tool.call"}
    keys = {call.data.get("callId"): call.data.get("modelCallId") for call in calls}
    for call in calls:
        key, call_id = call.data.get("modelCallId"), call.data.get("callId")
        if results[call_id] != 1 or messages[key] != 1:
            problems.append(f"call {key}: {results[call_id]} tool.result and {messages[key]} tool messages")
    for row in rows:
        if row.type != "tool.result" or row.data.get("ok") is True:
            continue
        code = row.data.get("error", {}).get("code")
        key = keys.get(row.data.get("callId"))
        if code == "TOOL_INTERRUPTED" and row.data.get("callId") in stored_before:
            continue
        if code == "TOOL_POLICY_DENIED" and world.effects.get(str(key)) == "deny":
            continue
        problems.append(f"call {key} failed unexpectedly: {code}")
    if status == "completed":
        missing = set(world.effects) - {row.data.get("modelCallId") for row in calls}
        if missing:
            problems.append(f"the turn completed without calling {sorted(missing)}")
    return problems


def _effects(after: Log, effects: list[tuple[str, str]]) -> list[str]:
    """Each key's effect at most once across both processes, each after its durable authorization."""
    problems: list[str] = []
    twice = [key for key, count in Counter(key for key, _ in effects).items() if count > 1]
    if twice:
        problems.append(f"effects repeated: {twice}")
    return problems + check_effects(after, [call_id for _, call_id in effects])


def check_continuation(
    world: World,
    before: Log,
    after: Log,
    continued: Continued,
    *,
    resend: bool,
    acknowledged: list[str],
    effects: list[tuple[str, str]],
) -> tuple[list[str], str]:
    """(violations, what happened) for one continued trial."""
    problems = check_log(after) + check_acknowledged(after, acknowledged) + _effects(after, effects)
    expected, request = expected_outcome(before)
    if expected in REFUSED:
        return problems + _refusals(expected, continued, before, after), f"{expected}, refused"
    found, status = _terminal(continued, before, after)
    problems += found + _calls(world, before, after, status)
    resumed = continued.events[0].data if continued.events else None
    abandoned = getattr(resumed, "abandoned_request_id", None)
    interrupted = getattr(resumed, "interrupted_calls", 0)
    resent = expected != "continue" and resend
    if expected == "unanswered" and not resend:
        if continued.model_calls or status != "failed" or not isinstance(continued.error, ContinuationError):
            problems.append(
                f"an unanswered request: the model was called {continued.model_calls} times and the turn"
                f" ended {status} ({continued.error!r}); it must fail without calling the model"
            )
        if abandoned != request:
            problems.append(f"turn.resumed names request {abandoned}, not the unanswered {request}")
        outcome = "unanswered request, turn failed"
    elif expected in (NEVER_SENT, UNCHECKPOINTED_ANSWER) and not resend:
        # Safe either way: going on, or (what the kernel does) taking the request as
        # uncertain and failing the turn without calling the model.
        failed_safely = status == "failed" and not continued.model_calls and abandoned == request
        if status != "completed" and not failed_safely:
            problems.append(
                f"{expected}: the turn ended {status}, the model called {continued.model_calls} times,"
                f" turn.resumed names request {abandoned}"
            )
        outcome = f"{expected}, turn {status}"
    else:
        if status != "completed" or continued.error is not None:
            problems.append(f"the continued turn ended {status} ({continued.error!r}); it should complete")
        if resent and not continued.model_calls:
            problems.append("resend_uncertain: the unanswered request was not sent again")
        outcome = "request re-sent, completed" if resent else "continued, completed"
    if interrupted:
        outcome += f", {interrupted} call interrupted"
    return problems, outcome


# ------------------------------------------------------------------ one trial and a target


def _acknowledged(path: Path) -> list[str]:
    """The event ids the grandchild received from its stream (whole lines only)."""
    if not path.exists():
        return []
    lines = path.read_bytes().decode().split("\n")
    return lines[:-1]


async def continuation_trial(
    zygote: Zygote,
    directory: Path,
    number: int,
    world: World,
    *,
    kill_after: float | None,
    self_kill: dict[str, Any] | None,
    how: str,
    batched: bool,
    resend: bool,
) -> TrialVerdict:
    """One killed turn, continued here, then every check."""
    db = directory / f"continue-{number}.sqlite"
    effects = directory / f"continue-{number}.effects"
    acks = directory / f"continue-{number}.acks"
    params = {
        "db": str(db),
        "effects": str(effects),
        "acks": str(acks),
        "rounds": world.rounds,
        "calls": world.calls,
        "batched": batched,
        "self_kill": self_kill,
    }
    trial = await zygote.run("continuation", params, kill_after=kill_after)
    assert trial.exit is not None
    problems: list[str] = []
    if trial.error is not None:
        problems.append(f"the workload failed: {trial.error}")
    elif not trial.sigkilled and trial.exit["exit"] != 0:
        problems.append(f"the workload exited with {trial.exit}")
    problems += check_integrity(db)
    before = read_log(db)
    continued = await continue_turn(db, effects, world, resend=resend)
    problems += check_integrity(db)
    recorded, torn = read_effects(effects)
    found, outcome = check_continuation(
        world,
        before,
        read_log(db),
        continued,
        resend=resend,
        acknowledged=_acknowledged(acks),
        effects=recorded,
    )
    problems += torn + found
    remove_database(db)
    effects.unlink(missing_ok=True)
    acks.unlink(missing_ok=True)
    label = f"{how if trial.sigkilled else 'finished'}: {outcome}"
    return TrialVerdict(trial=number, killed=trial.sigkilled, point=label, problems=problems)


async def measure(zygote: Zygote, directory: Path, world: World) -> tuple[float, dict[str, int]]:
    """Two clean runs: (the faster one's seconds, how often a clean run passes each kill point)."""
    db, effects, acks = (directory / f"measure.{suffix}" for suffix in ("sqlite", "effects", "acks"))
    params = {
        "db": str(db),
        "effects": str(effects),
        "acks": str(acks),
        "rounds": world.rounds,
        "calls": world.calls,
        "batched": True,
        "self_kill": None,
    }
    timings: list[float] = []
    counts: dict[str, int] = {}
    for _ in range(2):
        trial = await zygote.run("continuation", params)
        assert trial.exit is not None
        assert trial.error is None, trial.error
        assert trial.exit["exit"] == 0, trial.exit
        timings.append(float(trial.exit["elapsed"]))
        stored = Counter(row.type for row in read_log(db).rows)
        passes = len(read_effects(effects)[0])
        counts = {"before-effect": passes, "after-effect": passes}
        for kind in APPEND_KINDS:
            times = stored.total() if kind == "any" else stored[kind]
            counts[f"before-append {kind}"] = counts[f"after-append {kind}"] = times
        remove_database(db)
        effects.unlink(missing_ok=True)
        acks.unlink(missing_ok=True)
    return min(timings), counts


async def run_continuation_target(
    zygotes: list[Zygote],
    directory: Path,
    rng: random.Random,
    summary: Summary,
    *,
    trials: int,
    rounds: int = 3,
    calls: int = 3,
) -> None:
    """Measure a clean run, then kill and continue turns until ``trials`` kill points are recorded.

    Trials take the kill points of :data:`POINTS` in turn, then a timer kill, and again;
    the count at a point is drawn from those a clean run passes. Odd trials give the
    runtime a batching store, even ones a store that commits each event alone; a quarter
    of the continuations re-send an unanswered request.
    """
    world = World(rounds, calls)
    zygote = zygotes[0]
    summary.record(
        await continuation_trial(
            zygote,
            directory,
            0,
            world,
            kill_after=None,
            self_kill=None,
            how="clean",
            batched=True,
            resend=False,
        )
    )
    seconds, counts = await measure(zygote, directory, world)
    summary.clean_seconds = seconds
    modes: dict[int, tuple[bool, bool]] = {}
    numbers = itertools.count(1)

    def plan() -> KillPlan:
        number = next(numbers)
        modes[number] = (number % 2 == 1, rng.random() < RESEND_SHARE)
        slot = SLOTS[(number - 1) % len(SLOTS)]
        if slot == "timer":
            return rng.uniform(0.0, seconds), None, "timer"
        return None, {"point": slot, "count": rng.randint(1, max(1, counts[slot]))}, f"self {slot}"

    async def one(zygote: Zygote, number: int, kill: KillPlan) -> TrialVerdict:
        batched, resend = modes.pop(number)
        kill_after, self_kill, how = kill
        return await continuation_trial(
            zygote,
            directory,
            number,
            world,
            kill_after=kill_after,
            self_kill=self_kill,
            how=how,
            batched=batched,
            resend=resend,
        )

    await run_lanes(zygotes, summary, trials=trials, plan=plan, trial=one)
