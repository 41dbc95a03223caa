"""The crash-consistency harness, parent side: the zygote client, the seed, and the checks.

A trial forks a grandchild from a pre-warmed zygote (``crash_zygote.py``), lets it run a
workload against a real SQLite file, SIGKILLs it (after a seeded delay, on request, or the
grandchild kills itself at a seeded point), and once the zygote has reaped it, inspects
what is left on disk. Every check returns violations as strings, so the tests assert there
are none and the benchmark counts them.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sqlite3
import sys
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trio

from harness_tools import PureBoundary, Tool, ToolExecutionContext, create_bounded_tool, create_tool

__all__ = [
    "DEFAULT_SEED",
    "LANES",
    "MARK_TOOL",
    "SUMMARIES",
    "KillPlan",
    "Summary",
    "Trial",
    "TrialVerdict",
    "Zygote",
    "check_acknowledged",
    "check_effects",
    "check_integrity",
    "check_log",
    "fault_rng",
    "fault_seed",
    "fault_trials",
    "kill_point",
    "mark_tool",
    "read_log",
    "read_markers",
    "run_lanes",
    "start_zygote",
    "start_zygotes",
]

DEFAULT_SEED: Final = 20_261_202
LANES: Final = 2
"""Trials run in this many zygotes at once: the machine has two cores and a trial mostly waits on fsync."""
MARK_TOOL: Final = "mark"
ZYGOTE_SCRIPT: Final = Path(__file__).with_name("crash_zygote.py")
KERNEL_TESTS: Final = Path(__file__).resolve().parent.parent
JsonDict = dict[str, Any]


# ------------------------------------------------------------------ seed and trial counts


def fault_seed() -> int:
    """``HARNESS_FAULT_SEED`` if set, else a fixed default (runs are reproducible by default)."""
    text = os.environ.get("HARNESS_FAULT_SEED", "").strip()
    return int(text) if text else DEFAULT_SEED


def fault_trials(default: int) -> int:
    """``HARNESS_FAULT_TRIALS`` if set (the kill points per target), else ``default``."""
    text = os.environ.get("HARNESS_FAULT_TRIALS", "").strip()
    return int(text) if text else default


def fault_rng(seed: int, name: str) -> random.Random:
    """An independent, reproducible stream per (seed, target)."""
    return random.Random(f"{seed}:{name}")


# ------------------------------------------------------------------ the test tool


def mark_tool(marker_path: str, on_effect: Callable[[str], None] | None = None) -> Tool[dict[str, object]]:
    """A pure tool whose effect appends ``<call id>\\n`` to ``marker_path`` (one ``os.write``, O_APPEND).

    ``on_effect(phase)`` is called with ``"before-effect"`` and ``"after-effect"`` around the
    write (the workload's self-kill points).
    """

    async def execute(params: dict[str, object], context: ToolExecutionContext | None) -> object:
        assert context is not None
        assert context.call_id is not None
        if on_effect is not None:
            on_effect("before-effect")
        fd = os.open(marker_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{context.call_id}\n".encode())
        finally:
            os.close(fd)
        if on_effect is not None:
            on_effect("after-effect")
        return {"marked": context.call_id}

    tool = create_tool(
        name=MARK_TOOL,
        description="appends the call id to a marker file (crash-consistency tests)",
        parameters=dict[str, object],
        execute=execute,
    )
    return create_bounded_tool(tool, PureBoundary())


# ------------------------------------------------------------------ the zygote client


@dataclass(eq=False)
class Trial:
    """One forked grandchild: its messages as they arrive, and its exit."""

    number: int
    messages: list[JsonDict] = field(default_factory=list[JsonDict])
    exit: JsonDict | None = None
    pid: int | None = None
    _changed: trio.Event = field(default_factory=trio.Event)

    def _add(self, message: JsonDict) -> None:
        if "exit" in message:
            self.exit = message
        elif "pid" in message and self.pid is None:
            self.pid = message["pid"]
        else:
            self.messages.append(message)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    async def wait_message(self, key: str) -> JsonDict | None:
        """The first message carrying ``key``, or ``None`` if the grandchild exited without one."""
        found: list[JsonDict] = []

        def ready() -> bool:
            found[:] = [m for m in self.messages if key in m]
            return bool(found) or self.exit is not None

        await self.wait_for(ready)
        return found[0] if found else None

    async def wait_exit(self) -> JsonDict:
        await self.wait_for(lambda: self.exit is not None)
        assert self.exit is not None
        return self.exit

    def values(self, key: str) -> list[Any]:
        return [m[key] for m in self.messages if key in m]

    @property
    def error(self) -> str | None:
        errors = self.values("error")
        return errors[0] if errors else None

    @property
    def sigkilled(self) -> bool:
        return self.exit is not None and self.exit["signal"] == signal.SIGKILL


class Zygote:
    """The parent's handle on a running zygote; build it with :func:`start_zygote`."""

    def __init__(self, process: trio.Process) -> None:
        self._process = process
        self._trials: dict[int, Trial] = {}
        self._next = 0
        self.ready = trio.Event()

    async def _send(self, document: JsonDict) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.send_all((json.dumps(document) + "\n").encode())

    async def read_messages(self) -> None:
        assert self._process.stdout is not None
        buffer = b""
        async for chunk in self._process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message: JsonDict = json.loads(line)
                if "ready" in message:
                    self.ready.set()
                else:
                    self._trials[message["trial"]]._add(message)  # pyright: ignore[reportPrivateUsage]

    async def start(self, workload: str, params: JsonDict, *, kill_after: float | None = None) -> Trial:
        """Fork a grandchild for ``workload``; with ``kill_after`` the zygote SIGKILLs it then."""
        self._next += 1
        trial = self._trials[self._next] = Trial(self._next)
        await self._send(
            {"trial": trial.number, "workload": workload, "params": params, "kill_after": kill_after}
        )
        await trial.wait_for(lambda: trial.pid is not None or trial.exit is not None)
        return trial

    async def kill(self, trial: Trial) -> None:
        """Ask the zygote to SIGKILL the grandchild now (a no-op once it exited)."""
        if trial.exit is None:
            await self._send({"kill": trial.number})

    async def run(self, workload: str, params: JsonDict, *, kill_after: float | None = None) -> Trial:
        """Start a trial and wait until the grandchild is reaped."""
        trial = await self.start(workload, params, kill_after=kill_after)
        await trial.wait_exit()
        self._trials.pop(trial.number, None)
        return trial

    def forget(self, trial: Trial) -> None:
        self._trials.pop(trial.number, None)


@asynccontextmanager
async def start_zygote(paths: Sequence[Path], modules: Sequence[str]) -> AsyncGenerator[Zygote]:
    """Start a zygote that imports ``modules`` (found under ``paths``); stop and reap it on exit."""
    command = [sys.executable, str(ZYGOTE_SCRIPT)]
    for path in (KERNEL_TESTS, *paths):
        command += ["--path", str(path)]
    for module in modules:
        command += ["--module", module]
    process = await trio.lowlevel.open_process(command, stdin=-1, stdout=-1)
    try:
        async with trio.open_nursery() as nursery:
            zygote = Zygote(process)
            nursery.start_soon(zygote.read_messages)
            try:
                with trio.fail_after(60):
                    await zygote.ready.wait()
                yield zygote
            finally:
                assert process.stdin is not None
                # EOF: the zygote kills and reaps any running trial, then exits, which ends
                # the reader's stream.
                with trio.CancelScope(shield=True):
                    await process.stdin.aclose()
                    with trio.move_on_after(10):
                        await process.wait()
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    await pipe.aclose()


@asynccontextmanager
async def start_zygotes(
    count: int, paths: Sequence[Path], modules: Sequence[str]
) -> AsyncGenerator[list[Zygote]]:
    """``count`` zygotes (one per lane), stopped together."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(start_zygote(paths, modules)) for _ in range(count)]


KillPlan = tuple[float | None, dict[str, Any] | None, str]
"""(zygote timer delay, self-kill point, label): how one trial's grandchild dies."""


async def run_lanes(
    zygotes: Sequence[Zygote],
    summary: Summary,
    *,
    trials: int,
    plan: Callable[[], KillPlan],
    trial: Callable[[Zygote, int, KillPlan], Awaitable[TrialVerdict]],
) -> None:
    """Run trials on every zygote at once until ``trials`` more kill points are recorded.

    Plans are drawn in trial-number order (no await between numbering and drawing), so a
    seed always yields the same sequence of kill plans. A timer that outlives its workload
    kills nothing and does not count; at most ``2 * trials`` trials run.
    """
    wanted = summary.kills + trials
    numbers = itertools.count(1)

    async def lane(zygote: Zygote) -> None:
        while summary.kills < wanted:
            number = next(numbers)
            if number > 2 * trials:
                return
            summary.record(await trial(zygote, number, plan()))

    async with trio.open_nursery() as nursery:
        for zygote in zygotes:
            nursery.start_soon(lane, zygote)


# ------------------------------------------------------------------ reading what a crash left


@dataclass(frozen=True, slots=True)
class Row:
    """One stored event as the raw table holds it."""

    session_id: str
    seq: int
    global_seq: int | None
    event_id: str
    type: str
    data: JsonDict


@dataclass(frozen=True, slots=True)
class Log:
    """Everything in a store file, read with plain ``sqlite3`` (not the store under test)."""

    sessions: dict[str, tuple[str, int]]  # session id -> (status, next_seq)
    rows: tuple[Row, ...]
    next_global_seq: int | None

    def of(self, session_id: str) -> list[Row]:
        return sorted((row for row in self.rows if row.session_id == session_id), key=lambda row: row.seq)


def check_integrity(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` and ``foreign_key_check`` on the file; violations as text."""
    if not path.exists():
        return []
    with closing(sqlite3.connect(path)) as connection:
        result = [row[0] for row in connection.execute("PRAGMA integrity_check")]
        keys = connection.execute("PRAGMA foreign_key_check").fetchall()
    problems = [] if result == ["ok"] else [f"integrity_check: {result}"]
    return problems + ([f"foreign_key_check: {keys}"] if keys else [])


def read_log(path: Path) -> Log:
    """The sessions and events of a schema-2 store file (empty if the file or tables are absent)."""
    if not path.exists():
        return Log({}, (), None)
    with closing(sqlite3.connect(path)) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"sessions", "events", "meta"} <= tables:
            return Log({}, (), None)
        sessions = {
            str(sid): (str(status), int(next_seq))
            for sid, status, next_seq in connection.execute(
                "SELECT session_id, status, next_seq FROM sessions"
            )
        }
        rows = tuple(
            Row(str(sid), int(seq), gseq, str(eid), str(kind), json.loads(payload)["data"])
            for sid, seq, gseq, eid, kind, payload in connection.execute(
                "SELECT session_id, seq, global_seq, event_id, type, payload FROM events ORDER BY global_seq"
            )
        )
        meta = connection.execute("SELECT value FROM meta WHERE key = 'next_global_seq'").fetchone()
    return Log(sessions, rows, None if meta is None else int(meta[0]))


def read_markers(path: Path) -> tuple[list[str], list[str]]:
    """(call ids in effect order, violations): every line must be whole."""
    if not path.exists():
        return [], []
    text = path.read_bytes().decode()
    lines = text.split("\n")
    problems = [] if lines[-1] == "" else [f"marker file ends with a torn line {lines[-1]!r}"]
    return lines[:-1], problems


# ------------------------------------------------------------------ the invariants


def check_log(log: Log) -> list[str]:
    """Gapless seqs matching ``next_seq``, unique ids and global seqs, no event twice."""
    problems: list[str] = []
    for session_id, (_, next_seq) in log.sessions.items():
        seqs = [row.seq for row in log.of(session_id)]
        if seqs != list(range(len(seqs))):
            problems.append(f"session {session_id}: seqs are not gapless from 0: {seqs}")
        if next_seq != len(seqs):
            problems.append(f"session {session_id}: next_seq {next_seq} but {len(seqs)} events")
    orphans = {row.session_id for row in log.rows} - set(log.sessions)
    if orphans:
        problems.append(f"events of unknown sessions {sorted(orphans)}")
    for name, values in (
        ("event id", [row.event_id for row in log.rows]),
        ("global seq", [row.global_seq for row in log.rows]),
    ):
        twice = [value for value, count in Counter(values).items() if count > 1]
        if twice:
            problems.append(f"{name}s stored twice: {twice}")
    if None in {row.global_seq for row in log.rows}:
        problems.append("an event without global_seq")
    top = max((row.global_seq or 0 for row in log.rows), default=-1)
    if log.rows and (log.next_global_seq is None or log.next_global_seq <= top):
        problems.append(f"next_global_seq {log.next_global_seq} is not above {top}")
    per_call = Counter(
        (row.session_id, row.type, row.data.get("callId"), row.data.get("permissionId"))
        for row in log.rows
        if row.type in ("tool.call", "policy.decision", "tool.result", "permission.requested")
        and row.data.get("callId") is not None
    )
    twice_calls = [key for key, count in per_call.items() if count > 1]
    if twice_calls:
        problems.append(f"call events stored twice: {twice_calls}")
    return problems


def check_effects(log: Log, markers: Iterable[str]) -> list[str]:
    """No effect without its durable intent, and no ``ok`` result without its effect.

    For every marker (call id): a ``tool.call`` and a ``policy.decision`` of that call are
    stored, in that order; the decision is ``allow``, or ``ask`` followed by a stored
    ``permission.resolved`` allowing it; and any ``tool.result`` of the call comes after
    them. Every ``ok`` result has its marker. Each call's effect happened at most once.
    """
    problems: list[str] = []
    marks = list(markers)
    twice = [call for call, count in Counter(marks).items() if count > 1]
    if twice:
        problems.append(f"effects performed twice: {twice}")
    position: dict[tuple[str, str], Row] = {}
    for session_id in log.sessions:
        current: object = None
        for row in log.of(session_id):
            call = row.data.get("callId")
            if row.type == "tool.call":
                current = call
            elif row.type == "policy.decision" and call is None:
                # The legacy loop's bare policy.decision carries no callId: it belongs to
                # the tool.call before it (calls run one at a time).
                call = current
            if type(call) is str:
                position.setdefault((row.type, call), row)
    for call in set(marks):
        intent = position.get(("tool.call", call))
        decision = position.get(("policy.decision", call))
        resolved = position.get(("permission.resolved", call))
        result = position.get(("tool.result", call))
        if intent is None or decision is None:
            problems.append(f"effect of {call} without durable tool.call/policy.decision")
            continue
        if not intent.seq < decision.seq:
            problems.append(f"effect of {call}: policy.decision precedes tool.call")
        effect = decision.data.get("effect")
        if effect == "ask":
            if resolved is None or resolved.data.get("decision") != "allow":
                problems.append(f"effect of {call} without a durable permission.resolved allowing it")
                continue
            if not decision.seq < resolved.seq:
                problems.append(f"effect of {call}: permission.resolved precedes policy.decision")
        elif effect != "allow":
            problems.append(f"effect of {call} although its policy.decision said {effect}")
        last_intent = resolved.seq if resolved is not None else decision.seq
        if result is not None and not last_intent < result.seq:
            problems.append(f"effect of {call}: tool.result precedes its authorization")
    done = {
        row.data["callId"] for row in log.rows if row.type == "tool.result" and row.data.get("ok") is True
    }
    missing = done - set(marks)
    if missing:
        problems.append(f"ok tool.result without its effect: {sorted(missing)}")
    return problems


def check_acknowledged(log: Log, acknowledged: Iterable[str]) -> list[str]:
    """Every event id the parent saw acknowledged (the append returned) is stored."""
    stored = {row.event_id for row in log.rows}
    lost = [event_id for event_id in acknowledged if event_id not in stored]
    return [f"acknowledged events lost: {lost}"] if lost else []


def kill_point(log: Log, markers: Iterable[str], how: str) -> str:
    """A label for where the kill landed: how, and the durable state it left."""
    pending = set(markers) - {row.data.get("callId") for row in log.rows if row.type == "tool.result"}
    if pending:
        return f"{how}: effect done, tool.result not durable"
    if not log.rows:
        return f"{how}: before the first event"
    return f"{how}: after {log.rows[-1].type}"


# ------------------------------------------------------------------ per-target summaries


@dataclass
class Summary:
    """Trials, kill points and violations of one target, for the terminal summary and the benchmark."""

    target: str
    seed: int
    trials: int = 0
    kills: int = 0
    seconds: float = 0.0
    clean_seconds: float = 0.0
    points: Counter[str] = field(default_factory=Counter[str])
    violations: list[str] = field(default_factory=list[str])

    def record(self, verdict: TrialVerdict) -> None:
        self.trials += 1
        self.kills += verdict.killed
        self.points[verdict.point] += 1
        self.violations += [f"trial {verdict.trial}: {problem}" for problem in verdict.problems]

    def lines(self) -> list[str]:
        head = (
            f"{self.target}: seed={self.seed} trials={self.trials} kill points={self.kills}"
            f" violations={len(self.violations)} time={self.seconds:.1f}s"
            f" (one clean workload {self.clean_seconds * 1000:.0f} ms)"
        )
        body = [f"    {count:5d}  {point}" for point, count in sorted(self.points.items())]
        return [head, *body, *(f"    VIOLATION {v}" for v in self.violations[:20])]


@dataclass(frozen=True, slots=True)
class TrialVerdict:
    """What one trial found."""

    trial: int
    killed: bool
    point: str
    problems: list[str]


SUMMARIES: Final[list[Summary]] = []
