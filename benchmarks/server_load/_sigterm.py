"""Phase sigterm: sessions in flight, SIGTERM; clients see 1001 or their response, the store is sound."""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from agent_server.client import (
    AcpClient,
    AcpClientError,
    ConnectionClosedError,
    HandshakeRejectedError,
    connect,
)
from harness_kernel.store import SqliteSessionStore

from ._measure import active_rows
from ._server import SIGTERM_SECONDS, server_process
from ._verdicts import Verdicts


@dataclass
class ShutdownRace:
    """What the sessions of the SIGTERM phase share."""

    asked: list[trio.Event]
    signalled: trio.Event = field(default_factory=trio.Event)
    signalled_at: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict[str, int])
    late: int = 0


async def answer_after_signal(client: AcpClient, session_id: str, index: int, race: ShutdownRace) -> None:
    """Report the permission request; even sessions answer it once SIGTERM has been sent."""
    async for note in client.notifications:
        event = note["params"]["event"]
        if event["type"] != "permission.requested":
            continue
        race.asked[index].set()
        if index % 2:
            continue
        await race.signalled.wait()
        answer = {"sessionId": session_id, "permissionId": event["data"]["permissionId"], "decision": "allow"}
        try:
            await client.request("permission/respond", answer)
        except (AcpClientError, ConnectionClosedError):
            return


async def shutdown_session(url: str, index: int, race: ShutdownRace) -> None:
    """One session in flight at SIGTERM; records how it ended (a response or a close code)."""
    outcome = "no outcome"
    try:
        async with connect(url) as client:
            await client.initialize()
            session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_after_signal, client, session_id, index, race)
                try:
                    params = {"sessionId": session_id, "content": "go"}
                    outcome = f"response {(await client.request('session/prompt', params))['status']}"
                except ConnectionClosedError as error:
                    outcome = f"close {error.code}"
                except AcpClientError as error:
                    outcome = f"error {error.code}"
                nursery.cancel_scope.cancel()
            if race.signalled.is_set() and time.perf_counter() - race.signalled_at > SIGTERM_SECONDS:
                race.late += 1
    except (OSError, HandshakeRejectedError, ConnectionClosedError, AcpClientError) as error:
        outcome = type(error).__name__
    race.outcomes[outcome] = race.outcomes.get(outcome, 0) + 1


async def _store_verdicts(db: Path, count: int, verdicts: Verdicts) -> str:
    """The store after the shutdown: integrity, and every session reads back; the integrity answer."""
    with sqlite3.connect(db) as database:
        integrity = database.execute("PRAGMA integrity_check").fetchone()[0]
        sessions = [row[0] for row in database.execute("SELECT session_id FROM sessions")]
        still_active = active_rows(db)
    verdicts.expect("store passes PRAGMA integrity_check", integrity == "ok", str(integrity))
    readable = 0
    async with SqliteSessionStore(db) as store:
        for session_id in sessions:
            page = await store.read(session_id, limit=1000)
            readable += len(page.events)
    verdicts.expect(
        "store opens cleanly and every session reads back",
        len(sessions) == count,
        f"{len(sessions)} sessions, {readable} events, {still_active} rows left active",
    )
    return integrity


async def phase_sigterm(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """Sessions in flight, then SIGTERM to the server subprocess; the process exits 0 within 10 s."""
    count = arguments.sigterm_sessions
    print(f"sigterm: {count} sessions in flight, then SIGTERM to the server subprocess", flush=True)
    race = ShutdownRace(asked=[trio.Event() for _ in range(count)])
    async with server_process(directory, "sigterm") as (process, url, db):
        exit_code: int | None = None
        with trio.move_on_after(arguments.timeout):
            async with trio.open_nursery() as nursery:
                for index in range(count):
                    nursery.start_soon(shutdown_session, url, index, race)
                for event in race.asked:
                    await event.wait()
                race.signalled_at = time.perf_counter()
                process.send_signal(signal.SIGTERM)
                race.signalled.set()
                with trio.move_on_after(SIGTERM_SECONDS):
                    exit_code = await process.wait()
        exit_seconds = time.perf_counter() - race.signalled_at
    allowed = {"close 1001", "response completed"}
    verdicts.expect(
        "every client sees 1001 or its completed response within 10 s",
        set(race.outcomes) <= allowed and sum(race.outcomes.values()) == count and race.late == 0,
        f"{json.dumps(race.outcomes)}, {race.late} late",
    )
    verdicts.expect("the process exits 0", exit_code == 0, f"exit {exit_code} after {exit_seconds:.2f} s")
    integrity = await _store_verdicts(db, count, verdicts)
    return {"outcomes": race.outcomes, "exit_code": exit_code, "integrity": integrity}
