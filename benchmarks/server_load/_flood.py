"""Phase flood: idle sockets beyond the server's descriptors lock no client out (issue #15, finding 7)."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import trio

from agent_server.client import connect

from ._server import server_process
from ._verdicts import Verdicts

FLOOD_DESCRIPTOR_LIMIT: Final = 1024


async def client_latency(url: str) -> float:
    """Seconds for one client to connect, authenticate and initialize."""
    started = time.perf_counter()
    async with connect(url) as client:
        await client.initialize()
    return time.perf_counter() - started


async def _flooded_latencies(
    url: str, idle: list[trio.SocketStream], count: int, seconds: float
) -> list[float]:
    """Open ``count`` idle sockets into ``idle``, then time five clients (inf for one that waits 30 s)."""
    port = urlsplit(url).port
    assert port is not None
    with trio.move_on_after(seconds):
        for _ in range(count):
            idle.append(await trio.open_tcp_stream("127.0.0.1", port))
    await trio.sleep(0.5)  # let the server accept (and evict) what it can
    flooded: list[float] = []
    for _ in range(5):
        with trio.move_on_after(30) as late:
            flooded.append(await client_latency(url))
        if late.cancelled_caught:
            flooded.append(math.inf)
    return sorted(flooded)


async def phase_flood(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """Idle sockets that never send a request, beyond the server's descriptors (issue #15, finding 7)."""
    count = arguments.flood
    print(
        f"flood: {count} idle sockets that never send a request, against a server subprocess"
        f" limited to {FLOOD_DESCRIPTOR_LIMIT} descriptors",
        flush=True,
    )
    async with server_process(directory, "flood", descriptor_limit=FLOOD_DESCRIPTOR_LIMIT) as (_, url, _db):
        quiet = sorted([await client_latency(url) for _ in range(5)])
        idle: list[trio.SocketStream] = []
        try:
            flooded = await _flooded_latencies(url, idle, count, arguments.timeout)
            evicted = 0
            for stream in idle:
                with trio.move_on_after(0.01):
                    evicted += await stream.receive_some(1) == b""
        finally:
            for stream in idle:
                await stream.aclose()
    print(
        f"  client connect+initialize p50: {quiet[2] * 1000:.1f} ms quiet, {flooded[2] * 1000:.1f} ms"
        f" with {len(idle)} idle sockets open ({evicted} of them already closed by the server); worst"
        f" {flooded[-1] * 1000:.1f} ms"
    )
    verdicts.expect(
        "a client gets in within 1 s while idle sockets exceed the server's descriptors",
        flooded[-1] < 1.0,
        f"worst {flooded[-1] * 1000:.1f} ms, quiet p50 {quiet[2] * 1000:.1f} ms",
    )
    return {
        "idle_sockets": len(idle),
        "evicted": evicted,
        "quiet_p50_ms": quiet[2] * 1000,
        "flooded_ms": [seconds * 1000 for seconds in flooded],
    }
