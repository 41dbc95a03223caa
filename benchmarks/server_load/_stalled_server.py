"""The stalled phase's server subprocess (``--serve-stalled DB ROOT [--trace]``) and its run seam."""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Final

import trio

from agent_server import ServerConfig, ServerHandle, serve
from harness_kernel.events import create_event
from harness_kernel.legacy import RunCanceledError, RunOptions, RunResult
from harness_kernel.store import SqliteSessionStore

STALL_MESSAGE_BYTES: Final = 262_144
STALL_DELTA_BYTES: Final = 65_536
STALL_EVENTS: Final = 32
"""Events per run in the stalled phase, stalled and control alike: 2 MiB, four times the cap."""
# Frames of these show whose allocation it was (the benchmark's own files included).
_OURS: Final = ("agent_server", "harness_kernel", "wsproto", "h11", "server_load")


class DeltaFlood:
    """The ``run`` seam of the stalled phase's server subprocess.

    Every run, stalled and control alike, streams ``STALL_EVENTS`` ``message.delta`` events of
    ``STALL_DELTA_BYTES`` each, then waits for its abort; it keeps nothing of what it emitted.
    A stalled run stops early: its ``on_event`` waits for outbound room until the 1013 close
    drops the frame. Each run reports ``{"aborted": session id, "emitted": n}`` when it sees
    its abort.
    """

    def __init__(self, report: Callable[[dict[str, object]], None]) -> None:
        self._report = report

    async def __call__(self, options: RunOptions) -> RunResult:
        """Stream the events, then wait for the abort."""
        assert options.on_event is not None
        assert options.signal is not None
        session_id = options.session_id or "?"
        ids = {"runId": "run-1", "sessionId": session_id, "turnId": "turn-1", "requestId": "req-1"}
        emitted = 0
        while emitted < STALL_EVENTS and not options.signal.aborted:
            data: dict[str, object] = {
                **ids,
                "messageId": "msg-1",
                "role": "assistant",
                "sequence": emitted,
                "delta": "x" * STALL_DELTA_BYTES,
            }
            self._report({"emitting": session_id, "n": emitted})
            try:
                await options.on_event(create_event("message.delta", data))
            finally:
                emitted += 1
        await options.signal.wait()
        self._report({"aborted": session_id, "emitted": emitted})
        raise RunCanceledError


def malloc_trim() -> bool:
    """Ask glibc to return free heap pages to the system (False where there is no glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


def _report(message: dict[str, object]) -> None:
    print(json.dumps(message), flush=True)


async def _obey_commands(trace: bool) -> None:
    """Read commands from stdin, one per line, until end of file (see :func:`serve_stalled`)."""
    snapshots: dict[str, tracemalloc.Snapshot] = {}
    commands = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with commands:
        pending = b""
        while chunk := await commands.receive_some(4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                verb, *names = line.decode().split()
                if verb == "trim":
                    _report({"trimmed": malloc_trim()})
                elif verb == "snapshot" and trace:
                    snapshots[names[0]] = tracemalloc.take_snapshot()
                    _report({"snapshot": names[0], "traced": tracemalloc.get_traced_memory()[0]})
                elif verb == "compare" and trace:
                    _report({"compare": allocation_sites(snapshots[names[0]], snapshots[names[1]])})


async def serve_stalled(db: Path, root: Path, trace: bool) -> None:
    """The stalled phase's server, alone in its process (``--serve-stalled DB ROOT [--trace]``).

    Prints ``agent-server: <url>``, then one JSON report per line. Reads commands from stdin,
    one per line, until end of file, then shuts down gracefully:
    ``snapshot NAME`` (a tracemalloc snapshot, with ``--trace``), ``compare NEW OLD`` (the
    biggest allocation differences between two snapshots, grouped by the allocating line and
    its nearest server or kernel caller) and ``trim`` (glibc ``malloc_trim``; reports whether
    it ran).
    """
    if trace:
        tracemalloc.start(12)
    async with SqliteSessionStore(db) as store:
        config = ServerConfig(
            port=0,
            workspace_root=str(root),
            session_store=store,
            run=DeltaFlood(_report),
            max_message_bytes=STALL_MESSAGE_BYTES,
        )
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve, config)
            print(f"agent-server: {handle.url}?token={handle.token}", flush=True)
            await _obey_commands(trace)
            await handle.aclose()


def allocation_sites(new: tracemalloc.Snapshot, old: tracemalloc.Snapshot) -> list[list[object]]:
    """The biggest growths from ``old`` to ``new``: ``[bytes, blocks, where]`` rows.

    ``where`` is the allocating line, then the nearest frames of the server, kernel, wsproto or
    this benchmark that led to it (so ``"x" * n`` in a library shows whose event it was).
    """
    rows: list[list[object]] = []
    for stat in new.compare_to(old, "traceback")[:40]:
        if stat.size_diff <= 0:
            continue
        frames = list(stat.traceback)  # newest frame last (most_recent_first is False by default)
        chain = [f"{Path(frames[-1].filename).name}:{frames[-1].lineno}"]
        chain += [
            f"{Path(frame.filename).name}:{frame.lineno}"
            for frame in reversed(frames[:-1])
            if any(part in frame.filename for part in _OURS)
        ][:3]
        rows.append([stat.size_diff, stat.count_diff, " < ".join(chain)])
    return rows[:16]
