"""Phase tasks: connect/initialize/close cycles leave no trio task behind in the server."""

from __future__ import annotations

from typing import Any

import trio

from agent_server.client import connect

from ._measure import trio_task_count
from ._verdicts import Verdicts


async def phase_task_cycles(url: str, cycles: int, verdicts: Verdicts) -> dict[str, Any]:
    """``cycles`` cycles against the in-process server (every tenth creates a session)."""
    print(f"tasks: {cycles} connect/initialize/close cycles against the in-process server", flush=True)
    before = trio_task_count()
    for index in range(cycles):
        async with connect(url) as client:
            await client.initialize()
            if index % 10 == 0:
                await client.request("session/new", {"workspace": "ws"})
    after = trio_task_count()
    # A connection's tasks end after its close handshake; give the last one a moment.
    with trio.move_on_after(5):
        while after > before:
            await trio.sleep(0.05)
            after = trio_task_count()
    verdicts.expect("trio tasks return to baseline", after <= before, f"{before} -> {after}")
    return {"tasks_before": before, "tasks_after": after}
