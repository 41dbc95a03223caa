"""The stalled phase's server subprocess (``--serve-stalled DB ROOT [--trace]``) and its run seam."""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tracemalloc
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Final

import trio

from agent_server import (
    LimitsConfig,
    NetworkConfig,
    ServerConfig,
    ServerHandle,
    StorageConfig,
    WorkspaceConfig,
)
from agent_server._config import ServerHooks
from agent_server._server import serve_with_hooks
from harness_kernel.models import ModelEvent, ModelRequest, TextDeltaFrame
from harness_kernel.runtime import MinimalAgentRuntime, RunInput, RunStream
from harness_kernel.store import SqliteSessionStore

STALL_MESSAGE_BYTES: Final = 262_144
STALL_DELTA_BYTES: Final = 65_536
STALL_EVENTS: Final = 32
"""Events per run in the stalled phase, stalled and control alike: 2 MiB, four times the cap."""
# Frames of these show whose allocation it was (the benchmark's own files included).
_OURS: Final = ("agent_server", "harness_kernel", "wsproto", "h11", "server_load")


class DeltaFlood:
    """The model of one run of the stalled phase's server subprocess.

    Every run, stalled and control alike, streams ``STALL_EVENTS`` text deltas of
    ``STALL_DELTA_BYTES`` each, then waits to be cancelled; it keeps nothing of what it
    emitted. A stalled run stops early: the runtime pulls the next delta only after the
    previous event was sent, and that send waits for outbound room until the 1013 close drops
    the frame. Each run reports ``{"aborted": session id, "emitted": n}`` when it is cancelled.
    """

    def __init__(self, session_id: str, report: Callable[[dict[str, object]], None]) -> None:
        self._session_id = session_id
        self._report = report

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the deltas, then wait for the cancellation."""
        emitted = 0
        try:
            while emitted < STALL_EVENTS:
                self._report({"emitting": self._session_id, "n": emitted})
                emitted += 1
                yield TextDeltaFrame("x" * STALL_DELTA_BYTES)
            await trio.sleep_forever()
        finally:
            self._report({"aborted": self._session_id, "emitted": emitted})


class FloodRuntime(MinimalAgentRuntime):
    """The ``runtime`` seam: each run's model is a :class:`DeltaFlood` that knows its session."""

    def __init__(self, report: Callable[[dict[str, object]], None]) -> None:
        super().__init__()
        self._report = report

    def run(self, input: RunInput) -> RunStream:
        """Run ``input`` with a flooding model."""
        return super().run(replace(input, model_adapter=DeltaFlood(input.session_id, self._report)))


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
            network=NetworkConfig(port=0),
            storage=StorageConfig(session_store=store),
            workspace=WorkspaceConfig(workspace_root=str(root)),
            limits=LimitsConfig(max_message_bytes=STALL_MESSAGE_BYTES),
        )
        # The flooding runtime is a test seam, not configuration: it goes in the server's hooks.
        hooks = ServerHooks(runtime=lambda: FloodRuntime(_report))
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve_with_hooks, config, hooks)
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
