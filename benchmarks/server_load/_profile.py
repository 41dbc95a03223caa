"""``--profile PATH``: where the levels' time goes, as a sorted profile written to a file.

``--profile`` writes sorted pstats text (cProfile). With the clients in worker processes (the
default) the levels' server subprocess profiles itself and the profile is the server's alone
(see ``_levels_server``); with ``--clients in-process`` this module runs the levels in this
process under cProfile, and the benchmark's own WebSocket clients appear too. Either way only
the trio thread is profiled (``cProfile`` follows one thread): the store's SQLite work runs in
``trio.to_thread`` workers and shows as time waiting in the event loop, not as ``sqlite3``
calls. The third section keeps to the project's code (``packages/`` and ``services/``), which
in-process still includes ``agent_server.client``, the clients' own library. ``--flame``
(``_flame``) samples every thread of the server instead.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from typing import Any

import trio

from agent_server import ServerConfig, ServerHandle, serve

from ._levels import phase_levels_in_process
from ._verdicts import Verdicts

TOP: int = 60
# pstats restrictions are regular expressions matched against "file:line(function)".
PROJECT_CODE = r"/(packages|services)/"


async def profiled_levels(
    config: ServerConfig, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, Any]:
    """``--clients in-process``: start the server here, run the levels under cProfile, write the profile."""
    profiler = cProfile.Profile()
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        url = f"{handle.url}?token={handle.token}"
        started = time.perf_counter()
        profiler.enable()
        try:
            report = await phase_levels_in_process(url, arguments, verdicts)
        finally:
            profiler.disable()
        elapsed = time.perf_counter() - started
        await handle.aclose()
    path = trio.Path(arguments.profile)  # absolute: the command line resolved it
    header = (
        f"agent_server_load --profile: levels {arguments.levels}, lone rounds {arguments.lone_rounds},"
        f" {elapsed:.2f} s wall under the profiler (trio thread only; client and server in one process)"
    )
    await path.write_text(render_profile(profiler, header))
    print(f"profile written to {path}", flush=True)
    return {**report, "profile": str(path), "profiled_seconds": elapsed}


def render_profile(profiler: cProfile.Profile, header: str) -> str:
    """Three pstats listings: top ``TOP`` by cumulative time, by own time, and project code by own time."""
    out = io.StringIO()
    out.write(f"{header}\n")
    sections: list[tuple[str, str, tuple[str | int, ...]]] = [
        ("cumulative", f"top {TOP} by cumulative time", (TOP,)),
        ("tottime", f"top {TOP} by own time (tottime)", (TOP,)),
        ("tottime", f"project code (packages/, services/) by own time, top {TOP}", (PROJECT_CODE, TOP)),
    ]
    for key, title, restrictions in sections:
        out.write(f"\n{'=' * 20} {title} {'=' * 20}\n")
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats(key).print_stats(*restrictions)
    return out.getvalue()
