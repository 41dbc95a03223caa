"""Phase levels: 1, 100 and 500 concurrent sessions, with the clients out of the server's process or in it.

``--clients processes`` (the default): the server runs alone in a subprocess
(``--serve-levels``) and the sessions in ``--client-processes`` worker processes, so the
figures are the server's: its peak RSS is its own ``VmHWM``, its CPU time its own.
``--clients in-process``: the sessions run in this process, beside the in-process server, in
its trio thread (how the benchmark measured before issue #21); its RSS and CPU are client and
server together. Both modes may run in one invocation (``--clients processes,in-process``), and
then a comparison follows.

The level of one session runs ``--lone-rounds`` times in a row (a single prompt is one
noisy sample); the others run once.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from ._flame import flame_graph
from ._measure import cpu_seconds, percentile, reset_peak_rss, vm_hwm_kib
from ._server import POSTGRES, SIGTERM_SECONDS, server_process
from ._sessions import LevelResult, print_level, run_level
from ._verdicts import Verdicts
from ._workers import ClientWorkers, LineReader, client_workers

if TYPE_CHECKING:  # psycopg stays out of the levels' servers and the default run
    from ._postgres import Database

RSS_BOUND_MIB: Final = 512
# Issue #21's targets for the server: (sessions, at least sessions/s, at most p99 ms).
THROUGHPUT_TARGETS: Final = ((100, 300.0, 250.0), (500, 300.0, 1500.0))
LONE_P50_TARGET_MS: Final = 5.0
RSS_TARGET_MIB: Final = 150.0
RSS_TARGET_SESSIONS: Final = 500


@dataclass(frozen=True)
class LevelsStore:
    """The store of a pass of levels: SQLite (one server), or PostgreSQL shared by ``replicas`` servers."""

    replicas: int = 1
    database: Database | None = None
    """The PostgreSQL server (``None`` for SQLite)."""

    @property
    def key(self) -> str:
        """The pass's name in the report: ``processes`` for SQLite, as before there were stores."""
        return "processes" if self.database is None else f"processes-postgres-{self.replicas}"

    @property
    def label(self) -> str:
        """How verdicts and figures name the store (empty for SQLite, as before there were stores)."""
        if self.database is None:
            return ""
        return f"postgres, {self.replicas} replica{'s' if self.replicas > 1 else ''}"


@dataclass
class LevelHost:
    """Where a pass of levels runs: the client mode, how a level runs, whose figures are taken."""

    mode: str
    server_pids: list[int | str]
    """The processes whose peak RSS and CPU are measured ("self": client and server together)."""
    run_level: Callable[[int, int], Awaitable[LevelResult]]
    client_cpu: Callable[[], float] | None = None
    """CPU time of the client worker processes so far (``None`` in-process: they share the server's)."""
    label: str = ""
    """How verdicts name the store beside the mode (empty for SQLite)."""
    database: Database | None = None
    """The PostgreSQL server of the pass (``None`` for SQLite): its CPU and wait events are read."""

    @property
    def name(self) -> str:
        """The pass's name in verdicts and targets: ``processes clients, postgres, 2 replicas``."""
        return f"{self.mode} clients{f', {self.label}' if self.label else ''}"


async def phase_levels_in_process(
    url: str, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, Any]:
    """The levels against the server at ``url`` in this process, the clients in its trio thread."""
    print("levels, clients in-process: the sessions share the server's process and trio thread", flush=True)

    async def level(count: int, rounds: int) -> LevelResult:
        return await run_level(url, count, arguments.timeout, rounds)

    return await _run_levels(LevelHost("in-process", ["self"], level), arguments, verdicts)


async def phase_levels_processes(
    directory: Path, arguments: argparse.Namespace, verdicts: Verdicts, store: LevelsStore | None = None
) -> dict[str, Any]:
    """The levels against server subprocesses, the clients in ``arguments.client_processes`` workers.

    With SQLite (``store`` ``None``) one server; with PostgreSQL ``store.replicas`` servers on a
    fresh database of ``store.database``, each session on one of them (round robin). With
    ``arguments.profile`` the server profiles itself over the levels; with ``arguments.flame``
    py-spy samples it (one server only).
    """
    store = store or LevelsStore()
    workers_count = arguments.client_processes
    async with AsyncExitStack() as servers:
        replicas = await _start_replicas(servers, directory, arguments, store)
        (first, _url, _db), urls = replicas[0], [url for _, url, _ in replicas]
        pids = [process.pid for process, _, _ in replicas]
        whom = f"the server alone in subprocess {first.pid}"
        if len(replicas) > 1:
            whom = f"{len(replicas)} servers on one database, subprocesses {', '.join(map(str, pids))}"
        print(
            f"levels, clients in {workers_count} worker process{'es' if workers_count > 1 else ''}: {whom}",
            flush=True,
        )
        assert first.stdin is not None
        assert first.stdout is not None
        replies = LineReader(first.stdout)
        async with AsyncExitStack() as stack:
            workers: ClientWorkers = await stack.enter_async_context(
                client_workers(urls, workers_count, directory)
            )
            if arguments.flame is not None:
                await stack.enter_async_context(flame_graph(first.pid, arguments.flame, directory))

            async def level(count: int, rounds: int) -> LevelResult:
                return await workers.run_level(count, rounds, arguments.timeout)

            database = store.database
            host = LevelHost(
                "processes",
                list[int | str](pids),
                level,
                workers.cpu_seconds,
                label=store.label,
                database=database,
            )
            async with _server_profile(first.stdin, replies, arguments) as profiled:
                report = await _run_levels(host, arguments, verdicts)
            report |= profiled
            if database is not None:
                report |= {"store": "postgres", "replicas": store.replicas}
        for process, _, _ in replicas:
            assert process.stdin is not None
            await process.stdin.aclose()  # end of stdin: the server shuts down gracefully
        with trio.move_on_after(SIGTERM_SECONDS):
            for process, _, _ in replicas:
                await process.wait()
    return report


async def _start_replicas(
    stack: AsyncExitStack, directory: Path, arguments: argparse.Namespace, store: LevelsStore
) -> list[tuple[trio.Process, str, Path]]:
    """The pass's server subprocesses, each ``(process, url, db path)``: one on SQLite, or the replicas."""
    connections, sessions = server_limits(arguments)
    if store.database is None:

        def entry(db: Path) -> list[str]:
            return ["--serve-levels", str(directory), str(db), str(connections), str(sessions)]

        return [await stack.enter_async_context(server_process(directory, "levels", entry=entry))]

    def replica_entry(_db: Path) -> list[str]:
        return ["--serve-levels", str(directory), POSTGRES, str(connections), str(sessions)]

    url = await trio.to_thread.run_sync(store.database.fresh_database)
    environment = {"HARNESS_DATABASE_URL": url}
    # One after another: the first migrates the fresh database before the next one opens it.
    started: list[tuple[trio.Process, str, Path]] = []
    for replica in range(store.replicas):
        name = f"levels-pg{store.replicas}-{replica}"
        process = server_process(directory, name, entry=replica_entry, environment=environment)
        started.append(await stack.enter_async_context(process))
    return started


@asynccontextmanager
async def _server_profile(
    commands: trio.abc.SendStream, replies: LineReader, arguments: argparse.Namespace
) -> AsyncGenerator[dict[str, Any]]:
    """With ``--profile``, the levels' server profiles itself while the block runs.

    Yields a dictionary that is filled, once the block ends, with the profile's path and seconds.
    """
    profiled: dict[str, Any] = {}
    if arguments.profile is None:
        yield profiled
        return

    async def ask(command: str) -> dict[str, Any]:
        await commands.send_all(command.encode() + b"\n")
        line = await replies.line()
        if line is None:
            raise RuntimeError("the levels' server exited while profiling")
        return json.loads(line)

    await ask("profile-on")
    yield profiled
    title = f"levels {arguments.levels}, lone rounds {arguments.lone_rounds}"
    answer = await ask(f"profile-off {json.dumps({'path': arguments.profile, 'title': title})}")
    print(f"profile written to {arguments.profile}", flush=True)
    profiled.update(profile=arguments.profile, profiled_seconds=answer["profiled_seconds"])


def server_limits(arguments: argparse.Namespace) -> tuple[int, int]:
    """The levels' server's connection and session caps: room for the largest level and the rest.

    The server-wide session cap (256 by default) would refuse the 500 level's sessions.
    """
    connections = max(1024, max(arguments.levels) + arguments.idle + 64)
    sessions = max(256, max(arguments.levels) + arguments.mixed_sessions + 64)
    return connections, sessions


async def _run_level_measured(host: LevelHost, count: int, rounds: int) -> tuple[LevelResult, dict[str, Any]]:
    """One level, with the measured processes' peak RSS over that level alone and the CPU it took.

    With several servers (replicas) ``peak_rss_mib`` is the highest of theirs, ``server_cpu_seconds``
    their sum, and ``replicas`` holds each one's; with PostgreSQL of our own, its CPU too.
    """
    for pid in host.server_pids:
        reset_peak_rss(pid)
    server_cpu = [cpu_seconds(pid) for pid in host.server_pids]
    client_cpu = host.client_cpu() if host.client_cpu else None
    database_cpu = host.database.cpu_seconds() if host.database else None
    async with AsyncExitStack() as stack:
        waits = None
        if host.database is not None:  # its own 50 ms query is in PostgreSQL's CPU, a small part
            waits = await stack.enter_async_context(host.database.sampled_waits())
        level = await host.run_level(count, rounds)
    each = [
        {"peak_rss_mib": vm_hwm_kib(pid) / 1024, "cpu_seconds": round(cpu_seconds(pid) - before, 3)}
        for pid, before in zip(host.server_pids, server_cpu, strict=True)
    ]
    figures: dict[str, Any] = {
        "peak_rss_mib": max(replica["peak_rss_mib"] for replica in each),
        "server_cpu_seconds": round(sum(replica["cpu_seconds"] for replica in each), 3),
    }
    if host.client_cpu and client_cpu is not None:
        figures["client_cpu_seconds"] = round(host.client_cpu() - client_cpu, 3)
    if host.database and database_cpu is not None and (after := host.database.cpu_seconds()) is not None:
        figures["postgres_cpu_seconds"] = round(after - database_cpu, 3)
    if waits is not None:
        figures["postgres_busy_backends"] = waits.mean_backends()
    if len(each) > 1:
        figures["replicas"] = each
    print_level(f"level {count}", level)
    _print_figures(host, level, figures)
    return level, figures


def _print_figures(host: LevelHost, level: LevelResult, figures: dict[str, Any]) -> None:
    """The level's CPU and peak RSS line: the server's (each replica's), the clients', PostgreSQL's."""

    def busy(seconds: float) -> str:
        return f"{seconds / level.seconds:.0%}" if level.seconds else "nan"

    whose = "server" if host.mode == "processes" else "process (client and server)"
    if "replicas" in figures:
        whose = f"{len(figures['replicas'])} servers"
        peak = f"peak RSS {figures['peak_rss_mib']:.1f} MiB (highest)"
    else:
        peak = f"peak RSS {figures['peak_rss_mib']:.1f} MiB"
    line = f"    {whose}: {peak}, CPU {figures['server_cpu_seconds']:.2f} s"
    line += f" ({busy(figures['server_cpu_seconds'])} of one core)"
    if "client_cpu_seconds" in figures:
        line += f"; client workers: CPU {figures['client_cpu_seconds']:.2f} s"
    if "postgres_cpu_seconds" in figures:
        seconds = figures["postgres_cpu_seconds"]
        line += f"; PostgreSQL: CPU {seconds:.2f} s ({busy(seconds)} of one core)"
    print(line, flush=True)
    if (waits := figures.get("postgres_busy_backends")) is not None:
        shown = ", ".join(f"{name} {mean:.2f}" for name, mean in waits.items()) or "none"
        print(f"      PostgreSQL busy backends, mean of 50 ms samples: {shown}", flush=True)
    for number, replica in enumerate(figures.get("replicas", [])):
        print(
            f"      replica {number}: peak RSS {replica['peak_rss_mib']:.1f} MiB,"
            f" CPU {replica['cpu_seconds']:.2f} s ({busy(replica['cpu_seconds'])} of one core)",
            flush=True,
        )


async def _run_levels(host: LevelHost, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """Each level of ``arguments.levels`` in turn; every prompt completes, under 120 s, RSS bounded."""
    print("  one in eight sessions makes a permission round trip", flush=True)
    rows: list[dict[str, Any]] = []
    for count in arguments.levels:
        rounds = arguments.lone_rounds if count == 1 else 1
        level, figures = await _run_level_measured(host, count, rounds)
        ok = not level.failures and not level.timed_out and len(level.latencies) == count * rounds
        verdicts.expect(
            f"level {count} ({host.name}): every prompt completes, seq contiguous, restore equals stream",
            ok,
            f"{len(level.latencies)}/{count * rounds} completed, {len(level.failures)} failures",
        )
        verdicts.expect(
            f"level {count} ({host.name}): under 120 s", level.seconds < 120, f"{level.seconds:.2f} s"
        )
        rows.append(
            {
                "sessions": count,
                "rounds": rounds,
                "completed": len(level.latencies),
                "failures": len(level.failures),
                "seconds": level.seconds,
                "sessions_per_second": len(level.latencies) / level.seconds if level.seconds else None,
                "p50_ms": statistics.median(level.latencies) * 1000 if level.latencies else None,
                "p99_ms": percentile(level.latencies, 0.99) * 1000 if level.latencies else None,
                **figures,
            }
        )
    peak = max(row["peak_rss_mib"] for row in rows)
    if host.mode == "processes":
        verdicts.expect(
            f"server peak RSS under {RSS_BOUND_MIB} MiB{f' ({host.label})' if host.label else ''}",
            peak < RSS_BOUND_MIB,
            f"peak {peak:.1f} MiB",
        )
    else:
        verdicts.expect(
            f"RSS under {RSS_BOUND_MIB} MiB (client and server together)",
            peak < RSS_BOUND_MIB,
            f"peak {peak:.1f} MiB",
        )
    _report_targets(host.mode, host.name, rows, verdicts)
    return {
        "mode": host.mode,
        "client_processes": arguments.client_processes if host.mode == "processes" else 0,
        "levels": rows,
        "peak_rss_mib": peak,
    }


def _report_targets(mode: str, where: str, rows: list[dict[str, Any]], verdicts: Verdicts) -> None:
    """Issue #21's targets for the levels that ran: reported, met or missed, never a failure."""
    by_count = {row["sessions"]: row for row in rows}
    if (lone := by_count.get(1)) and lone["p50_ms"] is not None:
        verdicts.target(
            f"level 1 ({where}) p50 <= {LONE_P50_TARGET_MS:g} ms",
            lone["p50_ms"] <= LONE_P50_TARGET_MS,
            f"{lone['p50_ms']:.1f} ms",
        )
    for count, rate, p99 in THROUGHPUT_TARGETS:
        row = by_count.get(count)
        if row is None or row["p99_ms"] is None:
            continue
        verdicts.target(
            f"level {count} ({where}) >= {rate:g} sessions/s",
            row["sessions_per_second"] >= rate,
            f"{row['sessions_per_second']:.1f}",
        )
        verdicts.target(
            f"level {count} ({where}) p99 <= {p99:g} ms", row["p99_ms"] <= p99, f"{row['p99_ms']:.1f} ms"
        )
    if row := by_count.get(RSS_TARGET_SESSIONS):
        whose = "the server's" if mode == "processes" else "client and server together, an upper bound"
        verdicts.target(
            f"level {RSS_TARGET_SESSIONS} ({where}) peak RSS <= {RSS_TARGET_MIB:g} MiB",
            row["peak_rss_mib"] <= RSS_TARGET_MIB,
            f"{row['peak_rss_mib']:.1f} MiB ({whose})",
        )


def print_comparison(reports: dict[str, dict[str, Any]]) -> None:
    """With both client modes run: each level's figures side by side, processes against in-process."""
    if set(reports) != {"processes", "in-process"}:
        return
    print("levels compared: clients in worker processes vs in-process (ratio processes / in-process)")
    pairs = zip(reports["processes"]["levels"], reports["in-process"]["levels"], strict=True)
    for out, inside in pairs:
        cells: list[str] = []
        for key, label, unit in (
            ("sessions_per_second", "sessions/s", ""),
            ("p50_ms", "p50", " ms"),
            ("p99_ms", "p99", " ms"),
        ):
            a, b = out[key], inside[key]
            ratio = f"{a / b:.2f}x" if a is not None and b else "n/a"
            cells.append(f"{label} {a or float('nan'):.1f}{unit} vs {b or float('nan'):.1f}{unit} ({ratio})")
        print(f"  level {out['sessions']}: {', '.join(cells)}")


def print_store_comparison(reports: dict[str, dict[str, Any]]) -> None:
    """With PostgreSQL passes beside the SQLite one: each level's figures against SQLite's, as ratios.

    Also each pass's CPU per session: the servers' (all replicas), PostgreSQL's and the clients'.
    """
    postgres = {key: report for key, report in reports.items() if report.get("store") == "postgres"}
    baseline = reports.get("processes")
    if not postgres:
        return
    print(
        "levels by store: sessions/s, p50, p99 (ratio to SQLite's);"
        " CPU ms per session (servers, PostgreSQL, clients)"
    )
    passes = ([("sqlite", baseline)] if baseline else []) + [
        (f"postgres x{report['replicas']}", report) for report in postgres.values()
    ]
    for name, report in passes:
        for index, row in enumerate(report["levels"]):
            base = baseline["levels"][index] if baseline else None
            cells: list[str] = []
            for key, unit in (("sessions_per_second", "/s"), ("p50_ms", " ms"), ("p99_ms", " ms")):
                value = row[key]
                ratio = f" ({value / base[key]:.2f}x)" if base and value is not None and base[key] else ""
                cells.append(f"{value or float('nan'):.1f}{unit}{ratio}")
            samples = row["completed"] or 1
            cpu = [row["server_cpu_seconds"], row.get("postgres_cpu_seconds"), row.get("client_cpu_seconds")]
            per = "/".join("-" if seconds is None else f"{seconds * 1000 / samples:.1f}" for seconds in cpu)
            print(f"  {name:12} level {row['sessions']:>4}: {', '.join(cells)}; CPU ms/session {per}")
