"""The order of the benchmark's phases, and which of its processes (driver, server, client worker) to be."""

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
from typing import Any, Final

import trio

from agent_server import ServerConfig, ServerHandle, serve

from ._arguments import parse_arguments
from ._cycles import phase_cycles
from ._flood import phase_flood
from ._idle import phase_idle
from ._levels import (
    LevelsStore,
    phase_levels_in_process,
    phase_levels_processes,
    print_comparison,
    print_store_comparison,
    server_limits,
)
from ._levels_server import serve_levels
from ._mixed import phase_mixed
from ._profile import profiled_levels
from ._server import levels_config
from ._sigterm import phase_sigterm
from ._stalled import phase_stalled
from ._stalled_server import serve_stalled
from ._tasks import phase_task_cycles
from ._verdicts import Verdicts
from ._workers import client_worker

IN_PROCESS_PHASES: Final = ("idle", "mixed", "tasks")
"""Phases against the server in this process (levels too, with ``--clients in-process``)."""


def _in_process_config(directory: Path, arguments: argparse.Namespace) -> ServerConfig:
    """The in-process server: SQLite store under ``directory``, the scripted models, ``echo``."""
    connections, sessions = server_limits(arguments)
    db = directory / "state" / "sessions.sqlite"
    return levels_config(directory, db, connections=connections, sessions=sessions)


async def _in_process_phases(
    directory: Path, arguments: argparse.Namespace, verdicts: Verdicts, levels: dict[str, Any]
) -> dict[str, Any]:
    """idle, levels (clients in-process), mixed and tasks, those selected, against one server here."""
    report: dict[str, Any] = {}
    selected = arguments.phases
    config = _in_process_config(directory, arguments)
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        # Idle memory first, before the load levels leave freed heap behind for reuse.
        url = f"{handle.url}?token={handle.token}"
        if "idle" in selected:
            report["idle"] = await phase_idle(url, arguments.idle, arguments.timeout)
        if "levels" in selected and "in-process" in arguments.clients:
            levels["in-process"] = await phase_levels_in_process(url, arguments, verdicts)
        if "mixed" in selected:
            report["mixed"] = await phase_mixed(handle, arguments, verdicts)
        if "tasks" in selected:
            report["tasks"] = await phase_task_cycles(url, arguments.task_cycles, verdicts)
        await handle.aclose()
    return report


async def _profiled(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """``--profile``: the levels alone, the server profiled (with its clients, in-process)."""
    if arguments.clients == ["in-process"]:
        return await profiled_levels(_in_process_config(directory, arguments), arguments, verdicts)
    (report,) = (await _processes_passes(directory, arguments, verdicts)).values()
    return report


async def _processes_passes(
    directory: Path, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, dict[str, Any]]:
    """The levels with the clients in worker processes: one pass per store and replica count.

    SQLite first (the baseline, reported as ``processes`` as before there were stores), then
    PostgreSQL with each ``--replicas`` count, every pass on a fresh database of one cluster.
    """
    passes: dict[str, dict[str, Any]] = {}
    if "sqlite" in arguments.store:
        passes["processes"] = await phase_levels_processes(directory, arguments, verdicts)
    if "postgres" in arguments.store:
        # psycopg and pg_cluster (which imports pytest) only when asked for
        from ._postgres import levels_database  # noqa: PLC0415

        with levels_database(arguments.database_url) as database:
            for replicas in arguments.replicas:
                store = LevelsStore(replicas, database)
                passes[store.key] = await phase_levels_processes(directory, arguments, verdicts, store)
    return passes


async def run(arguments: argparse.Namespace) -> dict[str, Any]:
    """Every selected phase in order; the report, its verdicts and how many failed."""
    verdicts = Verdicts()
    selected = arguments.phases
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        (directory / "root" / "ws").mkdir(parents=True)
        if arguments.profile is not None:
            # The profile is of the levels alone: the other phases would bury them.
            report = {"levels": {arguments.clients[0]: await _profiled(directory, arguments, verdicts)}}
            return _finish(report, verdicts)
        levels: dict[str, Any] = {}
        report: dict[str, Any] = {"levels": levels}
        # First, while nothing else runs here: the server subprocess and the client workers
        # have the machine's two cores to themselves.
        if "levels" in selected and "processes" in arguments.clients:
            levels |= await _processes_passes(directory, arguments, verdicts)
        in_process_levels = "levels" in selected and "in-process" in arguments.clients
        if in_process_levels or any(phase in selected for phase in IN_PROCESS_PHASES):
            report |= await _in_process_phases(directory, arguments, verdicts, levels)
        print_comparison(levels)
        print_store_comparison(levels)
        phases: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
            ("stalled", lambda: phase_stalled(directory, arguments, verdicts)),
            ("flood", lambda: phase_flood(directory, arguments, verdicts)),
            ("cycles", lambda: phase_cycles(directory, arguments, verdicts)),
            ("sigterm", lambda: phase_sigterm(directory, arguments, verdicts)),
        ]
        for phase, body in phases:
            if phase in selected:
                report[phase] = await body()
    return _finish(report, verdicts)


def _finish(report: dict[str, Any], verdicts: Verdicts) -> dict[str, Any]:
    """``report`` with the verdicts and how many failed."""
    report["verdicts"] = [{"expectation": n, "passed": p, "detail": d} for n, p, d in verdicts.rows]
    report["targets"] = [{"target": n, "met": m, "detail": d} for n, m, d in verdicts.targets]
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


def main(description: str | None = None) -> None:
    """Run the benchmark (or one of its subprocesses: a server or a client worker); exit 1 on a failure."""
    arguments = parse_arguments(description)
    if arguments.serve_stalled is not None:  # the stalled phase's server subprocess
        db, root = arguments.serve_stalled
        trio.run(serve_stalled, Path(db), Path(root), arguments.trace)
        return
    if arguments.serve_levels is not None:  # the levels' server subprocess
        directory, db, connections, sessions = arguments.serve_levels
        trio.run(serve_levels, Path(directory), db, int(connections), int(sessions))
        return
    if arguments.client_worker is not None:  # a levels' client worker
        trio.run(client_worker, arguments.client_worker)
        return
    raise_fd_limit()  # before any subprocess: they inherit it
    # Aborted runs are answered -32603 and logged (spec §3.3); count them, print no tracebacks.
    logged = CountingHandler()
    server_log = logging.getLogger("agent_server")
    server_log.addHandler(logged)
    server_log.propagate = False
    started = time.perf_counter()
    print(
        f"python {sys.version.split()[0]}, {platform.machine()}, {os.cpu_count()} CPUs; loopback only;"
        f" phases {','.join(arguments.phases)}; levels' clients: {_clients_line(arguments)}",
        flush=True,
    )
    report = trio.run(run, arguments)
    elapsed = time.perf_counter() - started
    print(f"in-process server log records: {json.dumps(logged.messages, sort_keys=True)}")
    targets = report["targets"]
    met = sum(1 for target in targets if target["met"])
    print(
        f"{len(report['verdicts']) - report['failed']}/{len(report['verdicts'])} expectations passed"
        f"{f', {met}/{len(targets)} targets met (reported, not failures)' if targets else ''}"
        f" in {elapsed:.0f} s"
    )
    summary = {
        "benchmark": "agent_server_load",
        "machine": {"platform": platform.platform(), "machine": platform.machine()},
        "python": sys.version.split()[0],
        "parameters": {**vars(arguments), "database_url": _redacted(arguments.database_url)},
        "results": report,
    }
    print(json.dumps(summary, sort_keys=True, default=str))
    sys.exit(1 if report["failed"] else 0)


def _redacted(database_url: str | None) -> str | None:
    """Whether a database URL was given, without the URL (it may hold a password)."""
    return None if database_url is None else "(given)"


def _clients_line(arguments: argparse.Namespace) -> str:
    """Where the levels' clients run, as the header says it."""
    parts: list[str] = []
    for mode in arguments.clients:
        if mode == "processes":
            count = arguments.client_processes
            parts.append(f"{count} worker process{'es' if count > 1 else ''} (server in a subprocess)")
        else:
            parts.append("in-process (beside the server, in its trio thread)")
    line = " then ".join(parts)
    if arguments.store != ["sqlite"]:
        stores = ["sqlite"] if "sqlite" in arguments.store else []
        if "postgres" in arguments.store:
            stores += [f"postgres x{count}" for count in arguments.replicas]
        line += f"; levels' store: {', then '.join(stores)}"
    return line
