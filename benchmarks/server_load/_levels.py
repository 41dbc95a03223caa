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
from typing import Any, Final

import trio

from ._flame import flame_graph
from ._measure import cpu_seconds, percentile, reset_peak_rss, vm_hwm_kib
from ._server import SIGTERM_SECONDS, server_process
from ._sessions import LevelResult, print_level, run_level
from ._verdicts import Verdicts
from ._workers import ClientWorkers, LineReader, client_workers

RSS_BOUND_MIB: Final = 512
# Issue #21's targets for the server: (sessions, at least sessions/s, at most p99 ms).
THROUGHPUT_TARGETS: Final = ((100, 300.0, 250.0), (500, 300.0, 1500.0))
LONE_P50_TARGET_MS: Final = 5.0
RSS_TARGET_MIB: Final = 150.0
RSS_TARGET_SESSIONS: Final = 500


@dataclass
class LevelHost:
    """Where a pass of levels runs: the client mode, how a level runs, whose figures are taken."""

    mode: str
    server_pid: int | str
    """The process whose peak RSS and CPU are measured ("self": client and server together)."""
    run_level: Callable[[int, int], Awaitable[LevelResult]]
    client_cpu: Callable[[], float] | None = None
    """CPU time of the client worker processes so far (``None`` in-process: they share the server's)."""


async def phase_levels_in_process(
    url: str, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, Any]:
    """The levels against the server at ``url`` in this process, the clients in its trio thread."""
    print("levels, clients in-process: the sessions share the server's process and trio thread", flush=True)

    async def level(count: int, rounds: int) -> LevelResult:
        return await run_level(url, count, arguments.timeout, rounds)

    return await _run_levels(LevelHost("in-process", "self", level), arguments, verdicts)


async def phase_levels_processes(
    directory: Path, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, Any]:
    """The levels against a server subprocess, the clients in ``arguments.client_processes`` workers.

    With ``arguments.profile`` the server profiles itself over the levels; with
    ``arguments.flame`` py-spy samples it.
    """
    workers_count = arguments.client_processes
    connections, sessions = server_limits(arguments)

    def entry(db: Path) -> list[str]:
        return ["--serve-levels", str(directory), str(db), str(connections), str(sessions)]

    async with server_process(directory, "levels", entry=entry) as (server, url, _db):
        print(
            f"levels, clients in {workers_count} worker process{'es' if workers_count > 1 else ''}:"
            f" the server alone in subprocess {server.pid}",
            flush=True,
        )
        assert server.stdin is not None
        assert server.stdout is not None
        replies = LineReader(server.stdout)
        async with AsyncExitStack() as stack:
            workers: ClientWorkers = await stack.enter_async_context(
                client_workers(url, workers_count, directory)
            )
            if arguments.flame is not None:
                await stack.enter_async_context(flame_graph(server.pid, arguments.flame, directory))

            async def level(count: int, rounds: int) -> LevelResult:
                return await workers.run_level(count, rounds, arguments.timeout)

            host = LevelHost("processes", server.pid, level, workers.cpu_seconds)
            async with _server_profile(server.stdin, replies, arguments) as profiled:
                report = await _run_levels(host, arguments, verdicts)
            report |= profiled
        await server.stdin.aclose()  # end of stdin: the server shuts down gracefully
        with trio.move_on_after(SIGTERM_SECONDS):
            await server.wait()
    return report


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
    """One level, with the measured process's peak RSS over that level alone and the CPU it took."""
    reset_peak_rss(host.server_pid)
    server_cpu = cpu_seconds(host.server_pid)
    client_cpu = host.client_cpu() if host.client_cpu else None
    level = await host.run_level(count, rounds)
    figures: dict[str, Any] = {
        "peak_rss_mib": vm_hwm_kib(host.server_pid) / 1024,
        "server_cpu_seconds": round(cpu_seconds(host.server_pid) - server_cpu, 3),
    }
    if host.client_cpu and client_cpu is not None:
        figures["client_cpu_seconds"] = round(host.client_cpu() - client_cpu, 3)
    print_level(f"level {count}", level)
    whose = "server" if host.mode == "processes" else "process (client and server)"
    busy = figures["server_cpu_seconds"] / level.seconds if level.seconds else float("nan")
    line = (
        f"    {whose}: peak RSS {figures['peak_rss_mib']:.1f} MiB, CPU {figures['server_cpu_seconds']:.2f} s"
    )
    line += f" ({busy:.0%} of one core)"
    if "client_cpu_seconds" in figures:
        line += f"; client workers: CPU {figures['client_cpu_seconds']:.2f} s"
    print(line, flush=True)
    return level, figures


async def _run_levels(host: LevelHost, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """Each level of ``arguments.levels`` in turn; every prompt completes, under 120 s, RSS bounded."""
    print("  one in eight sessions makes a permission round trip", flush=True)
    rows: list[dict[str, Any]] = []
    for count in arguments.levels:
        rounds = arguments.lone_rounds if count == 1 else 1
        level, figures = await _run_level_measured(host, count, rounds)
        ok = not level.failures and not level.timed_out and len(level.latencies) == count * rounds
        verdicts.expect(
            f"level {count} ({host.mode} clients): every prompt completes, seq contiguous,"
            " restore equals stream",
            ok,
            f"{len(level.latencies)}/{count * rounds} completed, {len(level.failures)} failures",
        )
        verdicts.expect(
            f"level {count} ({host.mode} clients): under 120 s", level.seconds < 120, f"{level.seconds:.2f} s"
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
            f"server peak RSS under {RSS_BOUND_MIB} MiB", peak < RSS_BOUND_MIB, f"peak {peak:.1f} MiB"
        )
    else:
        verdicts.expect(
            f"RSS under {RSS_BOUND_MIB} MiB (client and server together)",
            peak < RSS_BOUND_MIB,
            f"peak {peak:.1f} MiB",
        )
    _report_targets(host.mode, rows, verdicts)
    return {
        "mode": host.mode,
        "client_processes": arguments.client_processes if host.mode == "processes" else 0,
        "levels": rows,
        "peak_rss_mib": peak,
    }


def _report_targets(mode: str, rows: list[dict[str, Any]], verdicts: Verdicts) -> None:
    """Issue #21's targets for the levels that ran: reported, met or missed, never a failure."""
    by_count = {row["sessions"]: row for row in rows}
    where = f"{mode} clients"
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
