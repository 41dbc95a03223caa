"""The benchmark's command line and the order of its phases."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from agent_server import ServerConfig, ServerHandle, serve

from ._cycles import phase_cycles
from ._flood import phase_flood
from ._idle import phase_idle
from ._levels import phase_levels
from ._mixed import phase_mixed
from ._profile import profiled_levels
from ._server import echo_tools, plain_model, tool_model
from ._sigterm import phase_sigterm
from ._stalled import phase_stalled
from ._stalled_server import serve_stalled
from ._tasks import phase_task_cycles
from ._verdicts import Verdicts


def _in_process_config(directory: Path, arguments: argparse.Namespace) -> ServerConfig:
    """The in-process server: SQLite store under ``directory``, the scripted models, ``echo``."""
    return ServerConfig(
        port=0,
        workspace_root=str(directory / "root"),
        db_path=str(directory / "state" / "sessions.sqlite"),
        tools=echo_tools,
        models={"plain": plain_model, "tool": tool_model},
        max_connections=max(1024, max(arguments.levels) + arguments.idle + 64),
        # The server-wide session cap (256 by default) would refuse the 500 level's sessions.
        max_sessions=max(256, max(arguments.levels) + arguments.mixed_sessions + 64),
    )


async def _in_process_phases(
    directory: Path, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, Any]:
    """idle, levels, mixed and tasks, against one server in this process."""
    report: dict[str, Any] = {}
    config = _in_process_config(directory, arguments)
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        # Idle memory first, before the load levels leave freed heap behind for reuse.
        url = f"{handle.url}?token={handle.token}"
        report["idle"] = await phase_idle(url, arguments.idle, arguments.timeout)
        report["levels"] = await phase_levels(url, arguments, verdicts)
        report["mixed"] = await phase_mixed(handle, arguments, verdicts)
        report["tasks"] = await phase_task_cycles(url, arguments.task_cycles, verdicts)
        await handle.aclose()
    return report


async def run(arguments: argparse.Namespace) -> dict[str, Any]:
    """Every phase in order; the report, its verdicts and how many failed."""
    verdicts = Verdicts()
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        (directory / "root" / "ws").mkdir(parents=True)
        if arguments.profile is not None:
            # The profile is of the levels alone: the other phases would bury them, and the
            # subprocess phases are out of this process's profiler's reach.
            config = _in_process_config(directory, arguments)
            report = {"levels": await profiled_levels(config, arguments, verdicts)}
            return _finish(report, verdicts)
        report = await _in_process_phases(directory, arguments, verdicts)
        phases: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
            ("stalled", lambda: phase_stalled(directory, arguments, verdicts)),
            ("flood", lambda: phase_flood(directory, arguments, verdicts)),
            ("cycles", lambda: phase_cycles(directory, arguments, verdicts)),
            ("sigterm", lambda: phase_sigterm(directory, arguments, verdicts)),
        ]
        for phase, body in phases:
            report[phase] = await body()
    return _finish(report, verdicts)


def _finish(report: dict[str, Any], verdicts: Verdicts) -> dict[str, Any]:
    """``report`` with the verdicts and how many failed."""
    report["verdicts"] = [{"expectation": n, "passed": p, "detail": d} for n, p, d in verdicts.rows]
    report["failed"] = verdicts.failed
    return report


class CountingHandler(logging.Handler):
    """Counts the in-process server's log records instead of printing their tracebacks."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        """Count one record by its message."""
        message = record.getMessage()
        self.messages[message] = self.messages.get(message, 0) + 1


def raise_fd_limit() -> None:
    """Raise this process's soft descriptor limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _arguments(description: str | None) -> argparse.Namespace:
    """The command line, with the phases' counts (smaller with ``--quick``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--levels",
        type=lambda text: [int(part) for part in text.split(",")],
        default=None,
        help="concurrent sessions per level, comma-separated (default 1,100,500)",
    )
    parser.add_argument(
        "--lone-rounds",
        type=int,
        default=None,
        help="how many times the level of one session runs in a row (default 50, 5 with --quick)",
    )
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument(
        "--profile",
        metavar="PATH",
        default=None,
        help="run only the levels phase (default one level: 100, 20 with --quick) under cProfile"
        " and write its sorted profile (pstats text) to PATH",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="upper bound per phase, seconds")
    parser.add_argument("--serve-stalled", nargs=2, metavar=("DB", "ROOT"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    quick = arguments.quick
    if arguments.profile is not None:
        arguments.profile = str(Path(arguments.profile).resolve())
        # Fail before the run rather than after it, with nowhere to write what it measured.
        if not Path(arguments.profile).parent.is_dir():
            parser.error(f"--profile: no such directory for {arguments.profile}")
    if arguments.levels is None and arguments.profile is not None:
        arguments.levels = [20] if quick else [100]
    if arguments.levels is None:
        arguments.levels = [1, 20] if quick else [1, 100, 500]
    if arguments.lone_rounds is None:
        arguments.lone_rounds = 5 if quick else 50
    arguments.idle = 20 if quick else 200
    arguments.mixed_sessions = 20 if quick else 100
    arguments.offenders = 2 if quick else 10
    arguments.task_cycles = 100 if quick else 1000
    arguments.stalled = 4 if quick else 32
    arguments.flood = 1100
    arguments.cycles = 500 if quick else 10_000
    arguments.sigterm_sessions = 10 if quick else 64
    return arguments


def main(description: str | None = None) -> None:
    """Run the benchmark (or, with ``--serve-stalled``, the stalled phase's server); exit 1 on a failure."""
    arguments = _arguments(description)
    if arguments.serve_stalled is not None:  # the stalled phase's server subprocess
        db, root = arguments.serve_stalled
        trio.run(serve_stalled, Path(db), Path(root), arguments.trace)
        return
    raise_fd_limit()
    # Aborted runs are answered -32603 and logged (spec §3.3); count them, print no tracebacks.
    logged = CountingHandler()
    server_log = logging.getLogger("agent_server")
    server_log.addHandler(logged)
    server_log.propagate = False
    started = time.perf_counter()
    print(
        f"python {sys.version.split()[0]}, {platform.machine()}, {os.cpu_count()} CPUs; loopback only",
        flush=True,
    )
    report = trio.run(run, arguments)
    elapsed = time.perf_counter() - started
    print(f"in-process server log records: {json.dumps(logged.messages, sort_keys=True)}")
    print(
        f"{len(report['verdicts']) - report['failed']}/{len(report['verdicts'])} expectations passed"
        f" in {elapsed:.0f} s"
    )
    summary = {
        "benchmark": "agent_server_load",
        "machine": {"platform": platform.platform(), "machine": platform.machine()},
        "python": sys.version.split()[0],
        "parameters": dict(vars(arguments)),
        "results": report,
    }
    print(json.dumps(summary, sort_keys=True, default=str))
    sys.exit(1 if report["failed"] else 0)
