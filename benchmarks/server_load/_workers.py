"""Client worker processes: the levels' sessions run outside the server's process.

On this two-core machine a client in the server's process and trio thread takes the server's
CPU: a level's sessions/s would measure client plus server on one core. A worker is this
benchmark's own entry script with ``--client-worker URL``; it runs its share of each level
(:func:`~server_load._sessions.run_level`, with every per-session check) on command and prints
the result as one JSON line. The driver splits a level across its workers and merges what they
report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import trio

from ._measure import cpu_seconds
from ._server import ENTRY_SCRIPT
from ._sessions import LevelResult, run_level

READY_SECONDS: Final = 30.0
"""How long a worker may take to import its client and say it is ready."""
REPLY_GRACE_SECONDS: Final = 30.0
"""Beyond a level's own bound, how long the driver waits for a worker's result."""


class LineReader:
    """Lines of a byte stream, one at a time (``None`` once the stream ends)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._pending = b""

    async def line(self) -> bytes | None:
        """The next complete line without its newline, or ``None`` at the end of the stream."""
        while b"\n" not in self._pending:
            chunk = await self._stream.receive_some(65_536)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line


async def client_worker(urls: Sequence[str]) -> None:
    """``--client-worker URL [URL ...]``: run shares of levels against ``urls`` on command, until stdin ends.

    Prints ``{"ready": pid}`` once imported; then, for each JSON command line read from stdin
    (``{"first", "count", "rounds", "seconds"}``), runs those sessions and prints
    ``{"level": LevelResult fields, "started", "finished"}`` (``time.monotonic``: one clock for
    every process of the machine, so the driver can take the level's span across workers).
    """
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        commands = LineReader(stdin)
        print(json.dumps({"ready": os.getpid()}), flush=True)
        while (line := await commands.line()) is not None:
            share: dict[str, Any] = json.loads(line)
            started = time.monotonic()
            level = await run_level(
                urls,
                int(share["count"]),
                float(share["seconds"]),
                int(share["rounds"]),
                first=int(share["first"]),
            )
            finished = time.monotonic()
            print(json.dumps({"level": asdict(level), "started": started, "finished": finished}), flush=True)


def split(count: int, workers: int) -> list[tuple[int, int]]:
    """``count`` sessions over ``workers``: ``(first, how many)`` per worker, as even as can be."""
    shares: list[tuple[int, int]] = []
    first = 0
    for worker in range(workers):
        size = count // workers + (1 if worker < count % workers else 0)
        shares.append((first, size))
        first += size
    return shares


@dataclass
class ClientWorkers:
    """Worker processes ready for commands, with their result streams and logs."""

    processes: list[trio.Process]
    replies: list[LineReader]
    logs: list[Path]

    @property
    def pids(self) -> list[int]:
        """The workers' process ids."""
        return [process.pid for process in self.processes]

    def cpu_seconds(self) -> float:
        """CPU time the workers have used so far, all of them together."""
        return sum(cpu_seconds(pid) for pid in self.pids)

    async def run_level(self, count: int, rounds: int, seconds: float) -> LevelResult:
        """``count`` sessions split across the workers, ``rounds`` times; their merged result.

        The level's duration runs from the first worker's start to the last one's finish. A
        worker that gives no result within ``seconds`` plus a grace counts as a failure.
        """
        reports: list[dict[str, Any]] = []
        failures: list[str] = []

        async def share(worker: int, first: int, size: int) -> None:
            command = {"first": first, "count": size, "rounds": rounds, "seconds": seconds}
            stdin = self.processes[worker].stdin
            assert stdin is not None
            await stdin.send_all(json.dumps(command).encode() + b"\n")
            line: bytes | None = None
            with trio.move_on_after(seconds + REPLY_GRACE_SECONDS):
                line = await self.replies[worker].line()
            if line is None:
                failures.append(f"client worker {worker} gave no result (its stderr: {self.logs[worker]})")
            else:
                reports.append(json.loads(line))

        async with trio.open_nursery() as nursery:
            for worker, (first, size) in enumerate(split(count, len(self.processes))):
                if size:
                    nursery.start_soon(share, worker, first, size)
        return _merge(count, rounds, reports, failures)


def _merge(count: int, rounds: int, reports: list[dict[str, Any]], failures: list[str]) -> LevelResult:
    """One level's result from its workers' reports (and the failures of workers that gave none)."""
    levels = [report["level"] for report in reports]
    span = max((r["finished"] for r in reports), default=0.0) - min(
        (r["started"] for r in reports), default=0.0
    )
    return LevelResult(
        sessions=count,
        rounds=rounds,
        latencies=[latency for level in levels for latency in level["latencies"]],
        failures=[failure for level in levels for failure in level["failures"]] + failures,
        seconds=span,
        timed_out=any(level["timed_out"] for level in levels) or bool(failures),
    )


@asynccontextmanager
async def client_workers(urls: Sequence[str], count: int, directory: Path) -> AsyncGenerator[ClientWorkers]:
    """Start ``count`` client workers against ``urls`` (replicas) and wait until each is ready.

    Each worker's stderr goes to ``client-worker-N.log`` under ``directory``. On the way out
    their stdin is closed (they end by themselves); one still running after 10 s is killed.
    """
    workers = ClientWorkers([], [], [])
    try:
        for worker in range(count):
            log_path = directory / f"client-worker-{worker}.log"
            with log_path.open("wb") as log:  # the worker holds its own copy of the descriptor
                process = await trio.lowlevel.open_process(
                    [sys.executable, str(ENTRY_SCRIPT), "--client-worker", *urls],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                )
            assert process.stdout is not None
            workers.processes.append(process)
            workers.replies.append(LineReader(process.stdout))
            workers.logs.append(log_path)
        for worker, replies in enumerate(workers.replies):
            with trio.fail_after(READY_SECONDS):
                ready = await replies.line()
            if ready is None:
                raise RuntimeError(
                    f"client worker {worker} exited before it was ready: {workers.logs[worker]}"
                )
        yield workers
    finally:
        with trio.CancelScope(shield=True):
            for process in workers.processes:
                if process.stdin is not None:
                    await process.stdin.aclose()
            with trio.move_on_after(10):
                for process in workers.processes:
                    await process.wait()
            for process in workers.processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
