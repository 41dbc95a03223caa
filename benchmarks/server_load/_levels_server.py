"""The levels' server subprocess (``--serve-levels DIRECTORY DB CONNECTIONS SESSIONS``).

With the clients in worker processes, the server of the levels runs alone in this process, so
its peak RSS (``VmHWM``) and CPU time are its own and a profile of it holds no client code.
``DB`` is the SQLite file, or the word ``postgres``: then the store is PostgreSQL at
``HARNESS_DATABASE_URL`` (in the environment, where a password stays out of the process list),
one of ``--replicas`` such servers on that database.
"""

from __future__ import annotations

import cProfile
import json
import os
import sys
import time
from pathlib import Path

import trio

from agent_server import ServerHandle, serve

from ._profile import render_profile
from ._server import POSTGRES, levels_config
from ._workers import LineReader


def _reply(message: dict[str, object]) -> None:
    print(json.dumps(message), flush=True)


async def _obey_commands() -> None:
    """Read commands from stdin, one per line, until end of file (see :func:`serve_levels`)."""
    profiler = cProfile.Profile()
    started = 0.0
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        commands = LineReader(stdin)
        while (line := await commands.line()) is not None:
            verb, _, argument = line.decode().partition(" ")
            if verb == "profile-on":
                started = time.perf_counter()
                profiler.enable()
                _reply({"profiling": True})
            elif verb == "profile-off":
                profiler.disable()
                elapsed = time.perf_counter() - started
                where: dict[str, str] = json.loads(argument)
                header = (
                    f"agent_server_load --profile: {where['title']}; {elapsed:.2f} s wall under the"
                    " profiler (the server's trio thread only, in its own process; the clients ran"
                    " in worker processes)"
                )
                await trio.Path(where["path"]).write_text(render_profile(profiler, header))
                _reply({"profiled_seconds": elapsed})


async def serve_levels(directory: Path, db: str, connections: int, sessions: int) -> None:
    """The levels' server, alone in its process.

    Prints ``agent-server: <url>``, then reads commands from stdin, one per line, until end of
    file, then shuts down gracefully: ``profile-on`` (start cProfile on the trio thread) and
    ``profile-off {"path": ..., "title": ...}`` (stop it and write the sorted profile to
    ``path``); each answers one JSON line. The workspace root is ``DIRECTORY/root``.
    """
    if db == POSTGRES:
        url = os.environ["HARNESS_DATABASE_URL"]
        config = levels_config(directory, None, connections=connections, sessions=sessions, database_url=url)
    else:
        config = levels_config(directory, Path(db), connections=connections, sessions=sessions)
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        print(f"agent-server: {handle.url}?token={handle.token}", flush=True)
        await _obey_commands()
        await handle.aclose()
