"""Agent-server crash trials, parent side: clients mid-prompt, a SIGKILL, then checks and restore.

Each trial forks a server from the zygote, runs ``sessions`` clients concurrently (each one
``session/new`` and one ``session/prompt`` whose permission asks it allows), and kills the
server after a seeded delay spread over a clean run, or the server kills itself at a seeded
append or effect. With the server gone, the file is checked like the kernel's, every
``session/event`` a client received (the server sends only after the commit) must be stored
with the same seq, and a freshly started server (in this process, its store clock a day
ahead so every lease has expired) restores every session twice: the first restore marks an
interrupted session once, the second adds nothing, and both replay every stored event.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import trio
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
    kill_point,
    read_log,
    read_markers,
    run_lanes,
)
from faults.kernel_crash_trials import remove_database

from agent_server import (
    LimitsConfig,
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    ServerHandle,
    StorageConfig,
    WorkspaceConfig,
    serve,
)
from agent_server.client import (
    AcpClient,
    AcpClientError,
    ConnectionClosedError,
    HandshakeRejectedError,
    connect,
)
from harness_kernel.models import FakeModel
from harness_kernel.store import SqliteSessionStore

__all__ = ["SERVER_MODULES", "SERVER_PATH", "run_server_target", "server_trial"]

SERVER_PATH: Final = Path(__file__).resolve().parent
SERVER_MODULES: Final = ("server_crash_workloads",)
MODEL: Final = "fake-model/v1"
CLIENT_ERRORS: Final = (
    ConnectionClosedError,
    AcpClientError,
    HandshakeRejectedError,
    OSError,
    trio.BrokenResourceError,
)
Streamed = list[tuple[str, int, str]]  # (session id, seq, event id) in arrival order


async def _prompt_until_done_or_dead(client: AcpClient, session_id: str, streamed: Streamed) -> None:
    async def answer() -> None:
        async for note in client.notifications:
            params = note["params"]
            event = params["event"]
            streamed.append((params["sessionId"], params["seq"], event["eventId"]))
            if event["type"] == "permission.requested":
                answer = {"sessionId": session_id, "permissionId": event["data"]["permissionId"]}
                await client.request("permission/respond", {**answer, "decision": "allow"})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer)
        try:
            await client.request("session/prompt", {"sessionId": session_id, "content": "mark everything"})
        finally:
            nursery.cancel_scope.cancel()
    for note in client.drain_notifications():
        params = note["params"]
        streamed.append((params["sessionId"], params["seq"], params["event"]["eventId"]))


async def _one_client(url: str, token: str, streamed: Streamed) -> None:
    try:
        async with connect(url, token=token) as client:
            await client.initialize()
            created = await client.request("session/new", {"workspace": "ws"})
            await _prompt_until_done_or_dead(client, created["sessionId"], streamed)
    except* CLIENT_ERRORS:
        pass  # the server was killed under this client


def _check_streamed(log: Log, streamed: Streamed) -> list[str]:
    """Every event a client saw is stored under the seq it was sent with; wire seqs are contiguous."""
    problems = check_acknowledged(log, [event_id for _, _, event_id in streamed])
    stored = {(row.session_id, row.seq, row.event_id) for row in log.rows}
    wrong = [item for item in streamed if item not in stored]
    if wrong:
        problems.append(f"streamed events stored under another seq: {wrong[:5]}")
    per_session: dict[str, list[int]] = {}
    for session_id, seq, _ in streamed:
        per_session.setdefault(session_id, []).append(seq)
    for session_id, seqs in per_session.items():
        if seqs != list(range(len(seqs))):
            problems.append(f"session {session_id}: streamed seqs not contiguous from 0: {seqs}")
    return problems


async def _replay(client: AcpClient, session_id: str) -> tuple[list[str], list[tuple[int, str, str]]]:
    """(statuses of each page, (seq, event id, type) replayed) of one full restore from -1."""
    statuses: list[str] = []
    replayed: list[tuple[int, str, str]] = []
    after = -1
    while True:
        result = await client.request(
            "session/restore", {"sessionId": session_id, "afterSeq": after, "limit": 1000}
        )
        statuses.append(result["status"])
        for note in client.drain_notifications():
            params = note["params"]
            replayed.append((params["seq"], params["event"]["eventId"], params["event"]["type"]))
        after = result["replayedThroughSeq"]
        if not result["hasMore"]:
            return statuses, replayed


async def _restore_three_times(
    client: AcpClient, rival: AcpClient, session_id: str, status: str, rows: list[Row]
) -> list[str]:
    """Two concurrent first restores (from two connections), then a third: one marker, all replayed."""
    problems: list[str] = []
    interrupted = status == "active" and (not rows or rows[-1].type != "agent.stopped")
    expected = [(row.seq, row.event_id, row.type) for row in rows]
    results: dict[str, tuple[list[str], list[tuple[int, str, str]]]] = {}

    async def restore(name: str, connection: AcpClient) -> None:
        results[name] = await _replay(connection, session_id)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(restore, "first", client)
        nursery.start_soon(restore, "rival", rival)
    await restore("again", client)
    first = results["first"][1]
    if first[: len(expected)] != expected:
        problems.append(f"restore of {session_id} does not replay the stored events")
    markers = [item for item in first if item[2] == "session.restored"]
    want = 1 if interrupted else 0
    if len(first) != len(expected) + want or len(markers) != want:
        problems.append(f"restore of {session_id} ({status}) added {len(markers)} markers")
    for name in ("rival", "again"):
        if results[name][1] != first:
            problems.append(
                f"the {name} restore of {session_id} replayed {results[name][1][len(expected) :]}"
            )
    restored_before = any(row.type == "session.restored" for row in rows)
    label = "interrupted" if interrupted or restored_before else "completed"
    statuses = {status for statuses, _ in results.values() for status in statuses}
    if statuses != {label}:
        problems.append(f"restores of {session_id} answered {statuses}, not {label}")
    return problems


async def check_restore(root: Path, db: Path, log: Log) -> list[str]:
    """Restore every session through a freshly started server; one marker at most, all replayed."""
    if not log.sessions:
        return []
    later = datetime.now(UTC) + timedelta(days=1)
    problems: list[str] = []
    store = SqliteSessionStore(db, now=lambda: later)
    config = ServerConfig(
        network=NetworkConfig(port=0),
        storage=StorageConfig(session_store=store),
        model=ModelConfig(models={MODEL: FakeModel}),
        workspace=WorkspaceConfig(workspace_root=str(root)),
        limits=LimitsConfig(session_lease_ms=1000),
    )
    async with store, trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        try:
            async with handle.connect() as client, handle.connect() as rival:
                await client.initialize()
                await rival.initialize()
                for session_id, (status, _) in sorted(log.sessions.items()):
                    problems += await _restore_three_times(
                        client, rival, session_id, status, log.of(session_id)
                    )
        finally:
            await handle.aclose()
    after = read_log(db)
    for session_id in log.sessions:
        if after.sessions[session_id][0] == "active":
            problems.append(f"session {session_id} still active after restore")
    return problems + check_integrity(db) + check_log(after)


async def server_trial(
    zygote: Zygote,
    directory: Path,
    number: int,
    *,
    sessions: int,
    rounds: int,
    calls: int,
    kill_after: float | None,
    self_kill: dict[str, Any] | None,
    how: str,
) -> tuple[TrialVerdict, float]:
    """One server killed as asked while ``sessions`` clients prompt it; (verdict, client seconds)."""
    root = directory / f"root-{number}"
    (root / "ws").mkdir(parents=True)
    db = directory / f"server-{number}.sqlite"
    marker = directory / f"server-{number}.marks"
    params = {
        "db": str(db),
        "marker": str(marker),
        "root": str(root),
        "rounds": rounds,
        "calls": calls,
        "self_kill": self_kill,
    }
    trial = await zygote.start("server", params)
    streamed: Streamed = []
    fired: list[bool] = []
    started = trio.current_time()
    ready = await trial.wait_message("port")
    if ready is not None:
        url = f"ws://127.0.0.1:{ready['port']}/acp"
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                if kill_after is not None:

                    async def kill_later() -> None:
                        await trio.sleep(kill_after)
                        fired.append(True)
                        await zygote.kill(trial)

                    nursery.start_soon(kill_later)
                async with trio.open_nursery() as clients:
                    for _ in range(sessions):
                        clients.start_soon(_one_client, url, ready["token"], streamed)
                nursery.cancel_scope.cancel()
    elapsed = trio.current_time() - started
    killed_in_time = bool(fired or trial.values("self_killed"))
    await zygote.kill(trial)  # a server that outlived its clients is killed now, idle
    exit = await trial.wait_exit()
    zygote.forget(trial)
    problems: list[str] = []
    if trial.error is not None:
        problems.append(f"the server failed: {trial.error}")
    if exit["signal"] is None:
        problems.append(f"the server exited by itself: {exit}")
    problems += check_integrity(db)
    log = read_log(db)
    markers, torn = read_markers(marker)
    problems += torn + check_log(log) + check_effects(log, markers) + _check_streamed(log, streamed)
    problems += await check_restore(root, db, log)
    point = kill_point(log, markers, how if killed_in_time else "idle after the prompts")
    remove_database(db)
    marker.unlink(missing_ok=True)
    return TrialVerdict(trial=number, killed=killed_in_time, point=point, problems=problems), elapsed


async def run_server_target(
    zygotes: list[Zygote],
    directory: Path,
    rng: random.Random,
    summary: Summary,
    *,
    trials: int,
    sessions: int = 2,
    rounds: int = 2,
    calls: int = 3,
) -> None:
    """Measure a clean run, then kill servers until ``trials`` kills mid-prompt are recorded."""
    shape = {"sessions": sessions, "rounds": rounds, "calls": calls}
    timings: list[float] = []
    for number in (0, 1_000_000):  # the faster of two clean runs sets the timer range
        clean, seconds = await server_trial(
            zygotes[0], directory, number, **shape, kill_after=None, self_kill=None, how="clean"
        )
        summary.record(clean)
        timings.append(seconds)
    seconds = summary.clean_seconds = min(timings)
    effects = sessions * rounds * calls
    # Store calls per session: one for session.created with the three admission events,
    # model.request, model.response and message.completed per model call, five per tool
    # call (tool.call, policy.decision, the ask pair, tool.result), one for the terminal pair.
    appends = sessions * (2 + 3 * (rounds + 1) + 5 * rounds * calls)
    counts = {
        "before-append": appends,
        "after-append": appends,
        "before-effect": effects,
        "after-effect": effects,
    }

    def plan() -> KillPlan:
        if rng.random() < 0.5:
            return rng.uniform(0.0, seconds), None, "timer"
        point = rng.choice(sorted(counts))
        return None, {"point": point, "count": rng.randint(1, counts[point])}, f"self {point}"

    async def one(zygote: Zygote, number: int, kill: KillPlan) -> TrialVerdict:
        verdict, _ = await server_trial(
            zygote, directory, number, **shape, kill_after=kill[0], self_kill=kill[1], how=kill[2]
        )
        return verdict

    await run_lanes(zygotes, summary, trials=trials, plan=plan, trial=one)
