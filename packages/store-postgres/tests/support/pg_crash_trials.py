"""The PostgreSQL crash target, parent side: kill the writer, then check the database and retry.

Reuses the kernel's harness (``faults.crash_harness``: the pre-warmed zygote, lanes, seeds
and summaries); the workload is ``pg_crash_workloads.appends``. Each lane owns one database
and runs its trials one after another, each with sessions of its own; after a kill the
parent waits until the dead writer's server backends are gone (so nothing it sent can still
commit), then checks, with plain psycopg:

- every acknowledged operation is stored, at the ``seq`` and ``global_seq`` it was told;
- nothing is stored that was never begun, an ``append_many`` is all or none;
- the whole database is consistent: per session ``seq`` gapless from 0 and ``next_seq``
  equal to the count, ``global_seq`` gapless from 0 with ``next_global_seq`` just above,
  every event id once;

and then retries, through a fresh store, every operation that was in doubt (begun, not
acknowledged) and the last acknowledged one of each writer, with the same event ids: a
stored operation must come back as stored (same ``seq`` and ``global_seq``), one not stored
must be stored now, once; the database is checked again after. Shared by
``test_crash_consistency.py`` and ``benchmarks/crash_consistency.py``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psycopg
import trio
from faults.crash_harness import KillPlan, Summary, TrialVerdict, Zygote, run_lanes
from pg_crash_workloads import operations

from harness_kernel.events import Event
from harness_kernel.store import SequencedEvent
from harness_store_postgres import PostgresSessionStore

__all__ = [
    "PG_MODULES",
    "PG_SUPPORT",
    "CrashShape",
    "Snapshot",
    "measure_clean",
    "pg_trial",
    "run_postgres_target",
    "snapshot_database",
]

PG_MODULES: Final = ("pg_crash_workloads",)
PG_SUPPORT: Final = Path(__file__).resolve().parent
"""The folder the zygote imports the workload from."""
BACKENDS_GONE_SECONDS: Final = 30.0
Stored = tuple[str, int, int]  # session id, seq, global seq


@dataclass(frozen=True, slots=True)
class CrashShape:
    """How much one trial writes: sessions, concurrent writer tasks, operations per task."""

    sessions: int = 4
    writers: int = 16
    operations: int = 12


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every stored event (event id -> session id, seq, global seq) and the invariants broken."""

    events: dict[str, Stored]  # event id -> where it is stored
    problems: list[str]


def snapshot_database(conninfo: str) -> Snapshot:
    """Every event, and every whole-database invariant that does not hold (one transaction)."""
    with psycopg.connect(conninfo, autocommit=True) as connection, connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        rows = connection.execute(
            "SELECT session_id, seq, global_seq, event_id FROM harness_events ORDER BY global_seq"
        ).fetchall()
        sessions = connection.execute("SELECT session_id, next_seq FROM harness_sessions").fetchall()
        meta = connection.execute("SELECT value FROM harness_meta WHERE key = 'next_global_seq'").fetchone()
    problems: list[str] = []
    events: dict[str, Stored] = {}
    per_session: dict[str, list[int]] = {}
    for row in rows:
        session_id, seq, global_seq, event_id = str(row[0]), int(row[1]), int(row[2]), str(row[3])
        if event_id in events:
            problems.append(f"event {event_id} stored twice")
        events[event_id] = (session_id, seq, global_seq)
        per_session.setdefault(session_id, []).append(seq)
    global_seqs = [where[2] for where in events.values()]
    if global_seqs != list(range(len(global_seqs))):
        problems.append(f"global_seq not gapless from 0 ({len(global_seqs)} events)")
    if meta is None or meta[0] != len(global_seqs):
        problems.append(f"next_global_seq is {None if meta is None else meta[0]}, not {len(global_seqs)}")
    for row in sessions:
        session_id, next_seq = str(row[0]), row[1]
        seqs = sorted(per_session.pop(session_id, []))
        if seqs != list(range(len(seqs))):
            problems.append(f"session {session_id}: seqs not gapless from 0: {seqs}")
        if next_seq != len(seqs):
            problems.append(f"session {session_id}: next_seq {next_seq} but {len(seqs)} events")
    if per_session:
        problems.append(f"events of unknown sessions {sorted(per_session)}")
    return Snapshot(events, problems)


def _writer_backends(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def _backends_gone(conninfo: str) -> bool:
    """Wait until no other client is connected to the lane's database (the writer's backends ended).

    A backend outlives its killed client briefly; until it is gone, a ``COMMIT`` it received
    may still land, so nothing is judged before.
    """
    deadline = time.monotonic() + BACKENDS_GONE_SECONDS
    while await trio.to_thread.run_sync(_writer_backends, conninfo):
        if time.monotonic() > deadline:
            return False
        await trio.sleep(0.005)
    return True


def _check_trial(
    snapshot: Snapshot,
    begun: list[list[str]],
    acked: dict[str, tuple[int, int]],
    prefix: str,
) -> list[str]:
    """Acknowledged operations stored where they were told; nothing unbegun; all or none."""
    problems = list(snapshot.problems)
    lost = [event_id for event_id in acked if event_id not in snapshot.events]
    if lost:
        problems.append(f"acknowledged events lost: {lost}")
    moved = [
        event_id
        for event_id, (seq, global_seq) in acked.items()
        if event_id in snapshot.events and snapshot.events[event_id][1:] != (seq, global_seq)
    ]
    if moved:
        problems.append(f"acknowledged events stored elsewhere than acknowledged: {moved}")
    started = {event_id for group in begun for event_id in group}
    stray = [e for e in snapshot.events if e.startswith(f"{prefix}-") and e not in started]
    if stray:
        problems.append(f"events stored that were never appended: {stray}")
    torn = [group for group in begun if 0 < sum(e in snapshot.events for e in group) < len(group)]
    if torn:
        problems.append(f"append_many stored in part: {torn}")
    return problems


async def _retry(conninfo: str, snapshot: Snapshot, retried: list[tuple[str, list[Event]]]) -> list[str]:
    """Retry ``retried`` by event id through a fresh store: each answer must match the snapshot."""
    problems: list[str] = []
    async with PostgresSessionStore(conninfo, readers=1) as store:
        for session_id, events in retried:
            if len(events) == 1:
                answer: tuple[SequencedEvent, ...] = (await store.append(session_id, events[0]),)
            else:
                answer = await store.append_many(session_id, events)
            stored = [snapshot.events.get(event.event_id) for event in events]
            if all(where is not None for where in stored):
                got = [(session_id, item.seq, item.global_seq) for item in answer]
                if got != stored:
                    problems.append(f"retry of stored {events[0].event_id} answered {got}, stored {stored}")
            elif any(where is not None for where in stored):
                problems.append(f"retry of {events[0].event_id}: the batch was stored in part")
            elif any(item.global_seq < len(snapshot.events) for item in answer):
                problems.append(f"retry of unstored {events[0].event_id} answered an old position")
    return problems


def _label(how: str, in_doubt: int, committed: int) -> str:
    if in_doubt == 0:
        return f"{how}: nothing in flight"
    if committed == 0:
        return f"{how}: in flight, none committed"
    if committed == in_doubt:
        return f"{how}: in flight, all committed unacknowledged"
    return f"{how}: in flight, some committed unacknowledged"


async def pg_trial(
    zygote: Zygote,
    conninfo: str,
    number: int,
    plan: KillPlan,
    shape: CrashShape,
    *,
    drop_every: int | None = None,
) -> TrialVerdict:
    """One writer run killed as ``plan`` says, then every check and the retries.

    ``drop_every`` breaks the writer's store on purpose (the negative control, see
    ``pg_crash_workloads``).
    """
    prefix = f"t{number}"
    kill_after, self_kill, how = plan
    params = {**_clean_params(conninfo, prefix, shape), "self_kill": self_kill, "drop_every": drop_every}
    trial = await zygote.run("appends", params, kill_after=kill_after)
    assert trial.exit is not None
    problems: list[str] = []
    if trial.error is not None:
        problems.append(f"the workload failed: {trial.error}")
    elif not trial.sigkilled and trial.exit["exit"] != 0:
        problems.append(f"the workload exited with {trial.exit}")
    if not await _backends_gone(conninfo):
        problems.append(f"the killed writer's backends still run after {BACKENDS_GONE_SECONDS} s")
    begun: list[list[str]] = trial.values("begin")
    acked = {str(e): (int(s), int(g)) for group in trial.values("ack") for e, s, g in group}
    snapshot = await trio.to_thread.run_sync(snapshot_database, conninfo)
    problems += _check_trial(snapshot, begun, acked, prefix)
    started = {event_id for group in begun for event_id in group}
    retried: list[tuple[str, list[Event]]] = []
    for writer in range(shape.writers):
        mine = operations(prefix, writer, shape.sessions, shape.operations)
        done = [op for op in mine if op[1][0].event_id in acked]
        retried += done[-1:]
        retried += [op for op in mine if op[1][0].event_id in started and op[1][0].event_id not in acked]
    in_doubt = [op for op in retried if op[1][0].event_id not in acked]
    committed = sum(op[1][0].event_id in snapshot.events for op in in_doubt)
    problems += await _retry(conninfo, snapshot, retried)
    after = await trio.to_thread.run_sync(snapshot_database, conninfo)
    problems += after.problems
    missing = [event_id for event_id in started if event_id not in after.events]
    if missing:
        problems.append(f"begun events not stored after their retry: {missing}")
    point = _label(how if trial.sigkilled else "finished", len(in_doubt), committed)
    return TrialVerdict(trial=number, killed=trial.sigkilled, point=point, problems=problems)


async def measure_clean(zygote: Zygote, conninfo: str, shape: CrashShape) -> tuple[float, dict[str, int]]:
    """Two clean runs: (the faster one's seconds from fork to exit, how often each kill point passed)."""
    timings: list[float] = []
    passed: dict[str, int] = {}
    for run in range(2):
        trial = await zygote.run("appends", _clean_params(conninfo, f"clean{run}", shape))
        assert trial.exit is not None
        assert trial.error is None, trial.error
        assert trial.exit["exit"] == 0, trial.exit
        timings.append(float(trial.exit["elapsed"]))
        passed = trial.values("passed")[0]
    return min(timings), passed


def _clean_params(conninfo: str, prefix: str, shape: CrashShape) -> dict[str, Any]:
    return {
        "conninfo": conninfo,
        "prefix": prefix,
        "sessions": shape.sessions,
        "writers": shape.writers,
        "operations": shape.operations,
        "self_kill": None,
    }


def choose_kill(rng: random.Random, clean_seconds: float, passed: dict[str, int]) -> KillPlan:
    """A third by a timer over the clean run, the rest at a counted point (ack or commit)."""
    if rng.random() < 1 / 3:
        return rng.uniform(0.0, clean_seconds), None, "timer"
    point = rng.choice(sorted(passed))
    return None, {"point": point, "count": rng.randint(1, max(1, passed[point]))}, f"self {point}"


async def run_postgres_target(
    zygotes: list[Zygote],
    databases: list[str],
    rng: random.Random,
    summary: Summary,
    *,
    trials: int,
    shape: CrashShape | None = None,
) -> None:
    """Measure a clean run, then kill ``trials`` writers over the lanes (one database each)."""
    shape = shape or CrashShape()
    seconds, passed = await measure_clean(zygotes[0], databases[0], shape)
    summary.clean_seconds = seconds
    lanes = dict(zip((id(zygote) for zygote in zygotes), databases, strict=True))

    async def one(zygote: Zygote, number: int, plan: KillPlan) -> TrialVerdict:
        return await pg_trial(zygote, lanes[id(zygote)], number, plan, shape)

    def plan() -> KillPlan:
        return choose_kill(rng, seconds, passed)

    await run_lanes(zygotes, summary, trials=trials, plan=plan, trial=one)
