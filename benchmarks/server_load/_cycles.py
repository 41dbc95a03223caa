"""Phase cycles: connect/initialize/close cycles return the server's descriptors and store rows."""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from typing import Any

import trio

from agent_server.client import connect

from ._measure import active_rows, open_fds, rss_kib, settle
from ._server import SIGTERM_SECONDS, server_process
from ._verdicts import Verdicts

_WORKERS = 4


async def _cycle(url: str, index: int) -> None:
    async with connect(url) as client:
        await client.initialize()
        if index % 10 == 0:
            await client.request("session/new", {"workspace": "ws"})


async def _run_cycles(url: str, cycles: int, seconds: float) -> tuple[int, bool]:
    """``cycles`` cycles over four workers, bounded by ``seconds``; how many started, and a timeout."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < cycles:
            index = next_index
            next_index += 1
            await _cycle(url, index)

    with trio.move_on_after(seconds) as scope:
        async with trio.open_nursery() as nursery:
            for _ in range(_WORKERS):
                nursery.start_soon(worker)
    return next_index, scope.cancelled_caught


async def phase_cycles(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """Cycles against a server subprocess (descriptors counted honestly from ``/proc/<pid>/fd``)."""
    cycles = arguments.cycles
    print(f"cycles: {cycles} connect/initialize/close cycles against a server subprocess", flush=True)
    async with server_process(directory, "cycles") as (process, url, db):
        pid = process.pid
        for index in range(10):  # warm up, so lazily created state is in the baseline
            await _cycle(url, index)
        fds_before, rss_before = open_fds(pid), rss_kib(pid)
        rows_before = active_rows(db)
        started = time.perf_counter()
        next_index, timed_out = await _run_cycles(url, cycles, arguments.timeout)
        elapsed = time.perf_counter() - started
        fds_after = await settle(lambda: open_fds(pid), fds_before, 5)
        rows_after = await settle(lambda: active_rows(db), rows_before, 5)
        rss_after = rss_kib(pid)
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(SIGTERM_SECONDS):
            await process.wait()
    done = min(next_index, cycles) - (1 if timed_out else 0)
    print(
        f"  {done} cycles in {elapsed:.1f} s ({done / elapsed:.0f}/s);"
        f" server RSS {rss_before:,} -> {rss_after:,} KiB"
    )
    verdicts.expect("all cycles ran within the time bound", not timed_out, f"{done}/{cycles}")
    verdicts.expect(
        "server file descriptors return to baseline", fds_after <= fds_before, f"{fds_before} -> {fds_after}"
    )
    verdicts.expect(
        "active sessions (store rows) return to baseline",
        rows_after <= rows_before,
        f"{rows_before} -> {rows_after}",
    )
    return {"cycles": done, "fds": [fds_before, fds_after], "active_rows": [rows_before, rows_after]}
