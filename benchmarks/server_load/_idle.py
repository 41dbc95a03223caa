"""Phase idle: RSS per initialised idle connection (client and server share this process)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import trio

from agent_server.client import AcpClient, connect

from ._measure import rss_kib


async def phase_idle(url: str, count: int, seconds: float) -> dict[str, Any]:
    """Open ``count`` initialised connections and hold them; the RSS each one adds."""
    print("idle: RSS per initialised idle connection (client and server together)", flush=True)
    before = after = rss_kib()
    opened = 0
    with trio.move_on_after(seconds):
        async with AsyncExitStack() as stack:
            for _ in range(count):
                client: AcpClient = await stack.enter_async_context(connect(url))
                await client.initialize()
                opened += 1
            after = rss_kib()
    per = (after - before) / opened if opened else float("nan")
    print(f"  {opened} connections, RSS {before:,} -> {after:,} KiB, {per:.1f} KiB per connection")
    return {"connections": opened, "kib_per_connection": per}
