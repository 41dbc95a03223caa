"""Kernel crash trials, parent side: run a workload in the zygote, kill it, check the file.

Shared by the tests in this folder and ``benchmarks/crash_consistency.py``.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from faults.crash_harness import (
    KillPlan,
    Log,
    Summary,
    Trial,
    TrialVerdict,
    Zygote,
    check_acknowledged,
    check_effects,
    check_integrity,
    check_log,
    kill_point,
    read_log,
    read_markers,
    run_lanes,
)
from faults.kernel_crash_workloads import OWNER, SESSION, checkpoint_payload

from harness_kernel.events import Event, create_event, serialize_event
from harness_kernel.store import SqliteEventStore, SqliteSessionStore

__all__ = [
    "KERNEL_MODULES",
    "build_checkpoint_template",
    "build_v1_template",
    "checkpoint_trial",
    "choose_kill",
    "kernel_trial",
    "measure_clean",
    "migration_trial",
    "remove_database",
    "run_kernel_target",
]

KERNEL_MODULES: Final = ("faults.kernel_crash_workloads",)
RUN_POINTS: Final = ("before-append", "after-append", "before-effect", "after-effect")
CHECKPOINT_EVENTS: Final = 50
AT: Final = "2024-05-01T12:30:00.125Z"


def remove_database(path: Path) -> None:
    """Delete a trial's database with its WAL and shared-memory files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def measure_clean(
    zygote: Zygote, workload: str, params: dict[str, Any], *, reset: Callable[[], None]
) -> tuple[float, int]:
    """Run ``workload`` to completion twice: (the faster run's seconds from fork to exit, reports made).

    ``reset`` restores the workload's files before each run.
    """
    timings: list[float] = []
    reports = 0
    for _ in range(2):
        reset()
        trial = await zygote.run(workload, params)
        assert trial.exit is not None
        assert trial.error is None, trial.error
        assert trial.exit["exit"] == 0, trial.exit
        timings.append(float(trial.exit["elapsed"]))
        reports = len(trial.messages)
    reset()
    return min(timings), reports


def choose_kill(rng: random.Random, clean_seconds: float, counts: dict[str, int]) -> KillPlan:
    """Half the trials die by a timer spread over the clean run, half at a counted point."""
    if rng.random() < 0.5:
        return rng.uniform(0.0, clean_seconds), None, "timer"
    point = rng.choice(sorted(counts))
    return None, {"point": point, "count": rng.randint(1, max(1, counts[point]))}, f"self {point}"


def _verdict(number: int, killed: bool, point: str, problems: list[str]) -> TrialVerdict:
    return TrialVerdict(trial=number, killed=killed, point=point, problems=problems)


# ------------------------------------------------------------------ runtime / legacy runs


def _restored(session_id: str, size: int, event_id: str) -> Event:
    return create_event(
        "session.restored",
        {
            "sessionId": session_id,
            "afterSeq": -1,
            "availableThroughSeq": size - 1,
            "availableEvents": size,
            "outcome": "interrupted",
            "note": "crash harness recovery",
        },
        event_id=event_id,
        at=AT,
        actor="kernel",
    )


async def check_recovery(db: Path, log: Log) -> list[str]:
    """Replay every stored event, then recover twice: exactly one marker, every event replayed."""
    if SESSION not in log.sessions:
        return []
    later = datetime.now(UTC) + timedelta(days=1)
    problems: list[str] = []
    stored = [row.event_id for row in log.of(SESSION)]
    async with SqliteSessionStore(db, now=lambda: later) as store:
        port = SqliteEventStore(store, SESSION)
        replayed = [event.event_id async for event in port.read_session(SESSION)]
        if replayed != stored:
            problems.append(f"replay differs from the stored rows: {len(replayed)} vs {len(stored)}")
        first = await store.recover_interrupted(
            SESSION, _restored(SESSION, len(stored), "evt-restored-1"), expected_metadata=None
        )
        second = await store.recover_interrupted(SESSION, _restored(SESSION, len(stored), "evt-restored-2"))
        after = [event async for event in port.read_session(SESSION)]
    if not first.recovered or second.recovered:
        problems.append(f"recover_interrupted gave recovered={first.recovered}, then {second.recovered}")
    markers = [event.event_id for event in after if event.type == "session.restored"]
    if markers != ["evt-restored-1"]:
        problems.append(f"expected exactly one session.restored marker, found {markers}")
    if [event.event_id for event in after] != [*stored, "evt-restored-1"]:
        problems.append("after recovery the log is not the stored events plus the marker")
    return problems + check_integrity(db) + check_log(read_log(db))


async def kernel_trial(
    zygote: Zygote,
    directory: Path,
    number: int,
    *,
    workload: str,
    synchronous: str,
    rounds: int,
    calls: int,
    kill_after: float | None,
    self_kill: dict[str, Any] | None,
    how: str,
    write_behind: bool = False,
) -> TrialVerdict:
    """One run of ``workload`` ("runtime" or "legacy") killed as asked, then every check.

    ``write_behind`` breaks the runtime's store on purpose (the harness's negative control).
    """
    db = directory / f"run-{number}.sqlite"
    marker = directory / f"run-{number}.marks"
    params = {
        "db": str(db),
        "marker": str(marker),
        "synchronous": synchronous,
        "rounds": rounds,
        "calls": calls,
        "self_kill": self_kill,
        "write_behind": write_behind,
    }
    trial = await zygote.run(workload, params, kill_after=kill_after)
    assert trial.exit is not None
    problems: list[str] = []
    if trial.error is not None:
        problems.append(f"the workload failed: {trial.error}")
    elif not trial.sigkilled and trial.exit["exit"] != 0:
        problems.append(f"the workload exited with {trial.exit}")
    problems += check_integrity(db)
    log = read_log(db)
    markers, torn = read_markers(marker)
    problems += torn + check_log(log) + check_effects(log, markers)
    problems += check_acknowledged(log, trial.values("ack"))
    problems += await check_recovery(db, log)
    point = kill_point(log, markers, how if trial.sigkilled else "finished")
    remove_database(db)
    marker.unlink(missing_ok=True)
    return _verdict(number, trial.sigkilled, point, problems)


async def run_kernel_target(
    zygotes: list[Zygote],
    directory: Path,
    rng: random.Random,
    summary: Summary,
    *,
    workload: str,
    synchronous: str,
    trials: int,
    rounds: int = 4,
    calls: int = 3,
) -> None:
    """Measure a clean run, then kill runs until ``trials`` kill points are recorded into ``summary``."""

    async def one(zygote: Zygote, number: int, plan: KillPlan) -> TrialVerdict:
        kill_after, self_kill, how = plan
        return await kernel_trial(
            zygote,
            directory,
            number,
            workload=workload,
            synchronous=synchronous,
            rounds=rounds,
            calls=calls,
            kill_after=kill_after,
            self_kill=self_kill,
            how=how,
        )

    zygote = zygotes[0]
    summary.record(await one(zygote, 0, (None, None, "clean")))
    params = {
        "db": str(directory / "measure.sqlite"),
        "marker": str(directory / "measure.marks"),
        "synchronous": synchronous,
        "rounds": rounds,
        "calls": calls,
    }

    def reset() -> None:
        remove_database(directory / "measure.sqlite")
        (directory / "measure.marks").unlink(missing_ok=True)

    seconds, acks = await measure_clean(zygote, workload, params, reset=reset)
    summary.clean_seconds = seconds
    effects = rounds * calls
    counts = {"before-append": acks, "after-append": acks, "before-effect": effects, "after-effect": effects}

    await run_lanes(
        zygotes, summary, trials=trials, plan=lambda: choose_kill(rng, seconds, counts), trial=one
    )


# ------------------------------------------------------------------ migration


def build_v1_template(path: Path, *, sessions: int, events_per_session: int) -> None:
    """A schema-1 database (as ``test_store_migration.py`` builds one) with many rows."""
    with closing(sqlite3.connect(path)) as connection:
        connection.executescript(
            """
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE sessions(session_id TEXT PRIMARY KEY, task_id TEXT,
              status TEXT NOT NULL CHECK (status IN ('active','closed','archived')),
              created_at TEXT NOT NULL, closed_at TEXT);
            CREATE TABLE events(session_id TEXT NOT NULL REFERENCES sessions(session_id),
              seq INTEGER NOT NULL, event_id TEXT NOT NULL, at TEXT NOT NULL, actor TEXT,
              type TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (session_id, seq));
            """
        )
        for s in range(sessions):
            sid = f"s{s}"
            connection.execute(
                "INSERT INTO sessions VALUES (?, NULL, 'active', '2024-01-01T00:00:00Z', NULL)", (sid,)
            )
            rows: list[tuple[str, int, str, str, str]] = []
            for seq in range(events_per_session):
                event = create_event("session.created", {"sessionId": sid}, event_id=f"{sid}-{seq}", at=AT)
                rows.append((sid, seq, f"{sid}-{seq}", AT, serialize_event(event).decode()))
            connection.executemany("INSERT INTO events VALUES (?, ?, ?, ?, NULL, 'session.created', ?)", rows)
        connection.commit()


_V2_ARTIFACTS: Final = (
    ("column", "events.global_seq"),
    ("column", "sessions.metadata"),
    ("column", "sessions.next_seq"),
    ("column", "sessions.checkpoint_revision"),
    ("column", "sessions.checkpoint_seq"),
    ("column", "sessions.checkpoint_payload"),
    ("column", "sessions.checkpoint_updated_at"),
    ("index", "events_event_id_uq"),
    ("index", "events_global_seq_uq"),
    ("trigger", "events_global_seq_required"),
    ("meta", "next_global_seq"),
    ("meta", "schema_version"),
)


def schema_state(path: Path) -> tuple[str, list[str], str]:
    """("v1" | "v2" | "half", problems, fingerprint of the events) of a migrated-or-not file."""
    with closing(sqlite3.connect(path)) as connection:
        present: set[tuple[str, str]] = set()
        for table in ("events", "sessions"):
            present |= {
                ("column", f"{table}.{row[1]}") for row in connection.execute(f"PRAGMA table_info({table})")
            }
        for kind, name in connection.execute("SELECT type, name FROM sqlite_master"):
            present.add((str(kind), str(name)))
        meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
        present |= {("meta", key) for key in meta}
        rows = connection.execute(
            "SELECT session_id, seq, event_id, payload FROM events ORDER BY session_id, seq"
        )
        digest = hashlib.sha256()
        count = 0
        for row in rows:
            digest.update(repr(row).encode())
            count += 1
        fingerprint = f"{count}:{digest.hexdigest()}"
        have = [artifact in present for artifact in _V2_ARTIFACTS]
        if not any(have):
            return "v1", [], fingerprint
        if not all(have):
            missing = [name for (_, name), ok in zip(_V2_ARTIFACTS, have, strict=True) if not ok]
            return "half", [f"half-migrated schema: missing {missing}"], fingerprint
        problems: list[str] = []
        if meta.get("schema_version") != "2":
            problems.append(
                f"schema_version is {meta.get('schema_version')!r} with every v2 artifact present"
            )
        nulls = connection.execute("SELECT COUNT(*) FROM events WHERE global_seq IS NULL").fetchone()[0]
        top = connection.execute("SELECT COALESCE(MAX(global_seq), -1) FROM events").fetchone()[0]
        if nulls or int(meta.get("next_global_seq", -1)) <= top:
            problems.append(
                f"global_seq backfill incomplete: {nulls} nulls, next {meta.get('next_global_seq')}"
            )
        behind = connection.execute(
            "SELECT COUNT(*) FROM sessions WHERE next_seq <"
            " COALESCE((SELECT MAX(seq) + 1 FROM events WHERE events.session_id = sessions.session_id), 0)"
        ).fetchone()[0]
        if behind:
            problems.append(f"{behind} sessions have next_seq behind their events")
    return "v2", problems, fingerprint


def _migration_moment(trial: Trial) -> str:
    """When the kill landed: before the store began opening, while it migrated, or after."""
    assert trial.exit is not None
    if not trial.sigkilled:
        return "finished"
    killed_at = trial.exit["killed_at"]
    opening, migrated = trial.values("opening"), trial.values("migrated")
    if not opening or killed_at < opening[0]:
        return "timer, before opening"
    if not migrated:
        return "timer, while opening and migrating"
    return "timer, after the migration committed"


async def migration_trial(
    zygote: Zygote, template: Path, directory: Path, number: int, *, kill_after: float | None
) -> TrialVerdict:
    """Open a copy of the v1 template with the current store, killed after ``kill_after`` s."""
    db = directory / f"migrate-{number}.sqlite"
    shutil.copyfile(template, db)
    _, _, original = schema_state(db)
    trial = await zygote.run("migrate", {"db": str(db), "synchronous": "FULL"}, kill_after=kill_after)
    problems = [] if trial.error is None else [f"the workload failed: {trial.error}"]
    problems += check_integrity(db)
    state, found, fingerprint = schema_state(db)
    problems += found
    if fingerprint != original:
        problems.append(f"events changed by the interrupted migration: {original} -> {fingerprint}")
    acknowledged = bool(trial.values("migrated"))
    if acknowledged and state != "v2":
        problems.append(f"the store reported the file open but it reads as {state}")
    async with SqliteSessionStore(db) as store:
        listing = await store.list()
        total = sum(entry.event_count for entry in listing)
    if total != int(original.split(":")[0]):
        problems.append(f"after a completed migration the store holds {total} events")
    state_after, found_after, fingerprint_after = schema_state(db)
    if state_after != "v2" or found_after or fingerprint_after != original:
        problems.append(f"re-migration left {state_after} {found_after}")
    remove_database(db)
    return _verdict(number, trial.sigkilled, f"{_migration_moment(trial)}: file left as {state}", problems)


# ------------------------------------------------------------------ checkpoints


async def build_checkpoint_template(path: Path) -> None:
    """A store with one session of ``CHECKPOINT_EVENTS`` events and no checkpoint."""
    async with SqliteSessionStore(path) as store:
        await store.create(SESSION, metadata={"ownerId": OWNER})
        for index in range(CHECKPOINT_EVENTS):
            event = create_event("session.created", {"sessionId": SESSION}, event_id=f"e{index}", at=AT)
            await store.append(SESSION, event)


async def checkpoint_trial(
    zygote: Zygote,
    template: Path,
    directory: Path,
    number: int,
    *,
    synchronous: str,
    sizes: list[int],
    kill_after: float | None,
    self_kill: dict[str, Any] | None,
    how: str,
) -> TrialVerdict:
    """Save checkpoints in a loop, get killed, and read back one whole, acknowledged-or-later one."""
    db = directory / f"checkpoint-{number}.sqlite"
    shutil.copyfile(template, db)
    params = {"db": str(db), "synchronous": synchronous, "sizes": sizes, "self_kill": self_kill}
    trial = await zygote.run("checkpoint", params, kill_after=kill_after)
    problems = [] if trial.error is None else [f"the workload failed: {trial.error}"]
    problems += check_integrity(db)
    acknowledged: list[int] = trial.values("checkpoint")
    last = max(acknowledged, default=0)
    async with SqliteSessionStore(db) as store:
        checkpoint = await store.get_checkpoint(SESSION)
    revision = 0 if checkpoint is None else checkpoint.revision
    if not last <= revision <= last + 1:
        problems.append(f"checkpoint revision {revision} but the last acknowledged save was {last}")
    if checkpoint is not None:
        expected = checkpoint_payload(revision, sizes[revision - 1])
        payload: Any = checkpoint.payload
        if dict(payload) != expected:
            problems.append(f"checkpoint {revision} payload is not the one written")
        if checkpoint.after_seq != min(revision - 1, CHECKPOINT_EVENTS - 1):
            problems.append(f"checkpoint {revision} after_seq {checkpoint.after_seq}")
    remove_database(db)
    state = "none" if checkpoint is None else ("acknowledged" if revision == last else "unacknowledged")
    return _verdict(number, trial.sigkilled, f"{how}: read back {state} checkpoint", problems)
