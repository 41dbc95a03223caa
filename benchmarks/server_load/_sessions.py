"""Levels of concurrent sessions: the load that the levels and mixed phases run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import trio

from agent_server.client import connect

from ._clients import replay_all
from ._measure import percentile

PERMISSION_EVERY: Final = 8


@dataclass
class LevelResult:
    """One level: its session count, the prompt round trips, failures and duration."""

    sessions: int
    rounds: int
    latencies: list[float]
    failures: list[str]
    seconds: float
    timed_out: bool


async def one_session(url: str, index: int, latencies: list[float], failures: list[str]) -> None:
    """Connect, create a session and run a short prompt; check its ``seq`` and its restore."""
    model = "tool" if index % PERMISSION_EVERY == 0 else "plain"
    try:
        async with connect(url) as client:
            await client.initialize()
            created = await client.request("session/new", {"workspace": "ws", "model": model})
            session_id = created["sessionId"]
            started = time.perf_counter()
            result, notes = await client.prompt(session_id, "go")
            latencies.append(time.perf_counter() - started)
            streamed = [note["params"] for note in notes]
            seqs = [note["seq"] for note in streamed]
            if result["status"] != "completed" or seqs != list(range(len(seqs))):
                failures.append(f"session {index}: {result['status']}, seq {seqs}")
                return
            asked = any(note["event"]["type"] == "permission.requested" for note in streamed)
            if asked != (model == "tool"):
                failures.append(f"session {index}: permission round trip {asked}, model {model}")
            # A session stays open for follow-ups until it is closed (issue #23); a live one
            # cannot be restored.
            await client.request("session/close", {"sessionId": session_id})
            if await replay_all(client, session_id) != streamed:
                failures.append(f"session {index}: restore from -1 differs from the streamed events")
    except Exception as error:
        failures.append(f"session {index}: {error!r}")


def replica_of(index: int, replicas: int) -> int:
    """Which of ``replicas`` servers session ``index`` connects to: round robin, rotated per eight.

    Plain round robin on two replicas would send every permission session (one in eight, the
    costlier kind) to the first; rotating each block of eight by one spreads those too.
    """
    return (index % PERMISSION_EVERY + index // PERMISSION_EVERY) % replicas


async def run_level(
    url: str | Sequence[str], count: int, seconds: float, rounds: int = 1, *, first: int = 0
) -> LevelResult:
    """``count`` sessions at once, ``rounds`` times one after another, bounded by ``seconds``.

    A level of one session is a single sample; repeating it gives its p50 a meaning. The
    sessions are numbered from ``first`` (a client worker runs its share of a level, and the
    number decides which sessions make a permission round trip). With several URLs (replicas
    of one server on one database) each session runs, and is checked, on the one
    :func:`replica_of` picks, moved on by one replica each round.
    """
    urls = [url] if isinstance(url, str) else list(url)
    latencies: list[float] = []
    failures: list[str] = []
    started = time.perf_counter()
    with trio.move_on_after(seconds) as scope:
        for round_ in range(rounds):
            async with trio.open_nursery() as nursery:
                for index in range(first, first + count):
                    # Each round moves on by one replica: the lone session's rounds alternate.
                    target = urls[(replica_of(index, len(urls)) + round_) % len(urls)]
                    nursery.start_soon(one_session, target, index, latencies, failures)
    elapsed = time.perf_counter() - started
    return LevelResult(count, rounds, latencies, failures, elapsed, scope.cancelled_caught)


def print_level(name: str, level: LevelResult) -> None:
    """One line of figures for a level, then its first failures."""
    rate = len(level.latencies) / level.seconds if level.seconds else 0.0
    print(
        f"  {name}: {level.sessions} sessions"
        f"{f' x {level.rounds} rounds' if level.rounds > 1 else ''}, {len(level.latencies)} completed,"
        f" {len(level.failures)} failures,"
        f" {level.seconds:.2f} s, {rate:.1f} sessions/s,"
        f" p50 {statistics.median(level.latencies) * 1000 if level.latencies else float('nan'):.1f} ms,"
        f" p99 {percentile(level.latencies, 0.99) * 1000:.1f} ms",
        flush=True,
    )
    for failure in level.failures[:5]:
        print(f"    {failure}")
