"""``event_store.py --store postgres``: the PostgreSQL store's appends against raw psycopg commits.

In one run, on one server (``--database-url``, a role with ``CREATEDB``; or a throwaway
cluster started from the installed binaries, with ``fsync`` as ``--fsync`` says, default
on), each measurement in a fresh database:

1. raw psycopg: one autocommitted ``INSERT`` per row into a table shaped like
   ``harness_events`` (one statement, one commit, one round trip; commits/s);
2. ``PostgresSessionStore.append`` with 1, 8 and 64 concurrent writers (``--sweep``), each a
   trio task with its own session of ONE store, ``--sweep-events`` appends in all (stored
   events/s, p50/p99 latency, and the ratio to step 1). The store group-commits: several
   writers share one transaction, so the ratio may pass 1.

It prints a table and one JSON object. Nothing is asserted.
"""

from __future__ import annotations

import contextlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Generator
from pathlib import Path

import psycopg
import trio

from harness_kernel.events import Event, serialize_event
from harness_store_postgres import PostgresSessionStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages/store-postgres/tests/support"))

from pg_cluster import Cluster, server_binaries, throwaway_cluster


@contextlib.contextmanager
def _server(database_url: str | None, fsync: bool) -> Generator[tuple[Cluster, str]]:
    """The server to measure on, and how it was obtained."""
    if database_url is not None:
        yield Cluster(database_url), "--database-url"
        return
    binaries = server_binaries()
    if binaries is None:
        raise SystemExit("--store postgres needs --database-url or the PostgreSQL server binaries")
    with throwaway_cluster(binaries, fsync=fsync) as cluster:
        yield cluster, f"throwaway cluster ({binaries.parent.name}), fsync={'on' if fsync else 'off'}"


def _raw_commits_per_second(conninfo: str, rows: int, payload: str) -> float:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE raw_events (session_id TEXT NOT NULL, seq BIGINT NOT NULL,"
            " global_seq BIGINT NOT NULL UNIQUE, event_id TEXT NOT NULL UNIQUE, at TEXT NOT NULL,"
            " actor TEXT, type TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (session_id, seq))"
        )
        started = time.perf_counter()
        for seq in range(rows):
            connection.execute(
                "INSERT INTO raw_events VALUES"
                " ('bench', %s, %s, %s, '2024-01-01T00:00:00.000Z', NULL, 'tool.call', %s)",
                (seq, seq, f"event-{seq}", payload),
            )
        return rows / (time.perf_counter() - started)


async def _concurrent_appends(
    conninfo: str, writers: int, per_writer: int, events: list[Event]
) -> tuple[float, list[float]]:
    """``writers`` tasks, each appending ``per_writer`` events to its own session of one store.

    The store is opened and every session created before the clock starts, which starts
    once every writer waits at the gate.
    """
    latencies: list[float] = []
    gate = trio.Event()
    all_waiting = trio.Event()
    waiting = 0

    async def writer(store: PostgresSessionStore, session_id: str, mine: list[Event]) -> None:
        nonlocal waiting
        waiting += 1
        if waiting == writers:
            all_waiting.set()
        await gate.wait()
        for event in mine:
            before = time.perf_counter()
            await store.append(session_id, event)
            latencies.append(time.perf_counter() - before)

    async with PostgresSessionStore(conninfo) as store:
        for index in range(writers):
            await store.create(f"writer-{index}")
        async with trio.open_nursery() as nursery:
            for index in range(writers):
                mine = events[index * per_writer : (index + 1) * per_writer]
                nursery.start_soon(writer, store, f"writer-{index}", mine)
            await all_waiting.wait()
            started = time.perf_counter()
            gate.set()
        elapsed = time.perf_counter() - started
    with psycopg.connect(conninfo) as connection:
        row = connection.execute("SELECT COUNT(*) FROM harness_events").fetchone()
    stored = 0 if row is None else int(row[0])
    if stored != writers * per_writer:
        raise RuntimeError(f"{writers} writers: {stored} rows stored, {writers * per_writer} appended")
    return writers * per_writer / elapsed, latencies


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_postgres(
    *,
    database_url: str | None,
    fsync: bool,
    rows: int,
    sweep: list[int],
    sweep_events: int,
    events: list[Event],
) -> None:
    """Measure, print the table and the JSON report (``events`` holds at least ``sweep_events``)."""
    payload = serialize_event(events[0]).decode()
    with _server(database_url, fsync) as (cluster, server):
        raw_rate = _raw_commits_per_second(cluster.new_database(), rows, payload)
        with psycopg.connect(cluster.admin_conninfo) as admin:
            version = admin.execute("SHOW server_version").fetchone()
            settings = {
                name: str((admin.execute(f"SHOW {name}").fetchone() or ("?",))[0])
                for name in ("fsync", "synchronous_commit", "wal_sync_method")
            }
        results: dict[str, dict[str, float]] = {}
        for writers in sweep:
            per_writer = max(1, sweep_events // writers)
            rate, latencies = trio.run(
                _concurrent_appends, cluster.new_database(), writers, per_writer, events
            )
            results[str(writers)] = {
                "writers": writers,
                "events": writers * per_writer,
                "store_events_per_s": rate,
                "append_p50_ms": statistics.median(latencies) * 1000,
                "append_p99_ms": _percentile(latencies, 0.99) * 1000,
                "to_raw_ratio": rate / raw_rate,
            }
    server_version = None if version is None else str(version[0])
    print(
        f"python {sys.version.split()[0]}, psycopg {psycopg.__version__}, PostgreSQL {server_version},"
        f" {platform.machine()}; {server}; {settings}"
    )
    print(f"raw psycopg single-statement commits: {raw_rate:,.0f}/s ({rows:,} rows, one connection)")
    print(f"{'writers':>8}{'events':>8}{'store events/s':>16}{'p50 ms':>9}{'p99 ms':>9}{'÷ raw':>8}")
    for row in results.values():
        print(
            f"{row['writers']:>8.0f}{row['events']:>8.0f}{row['store_events_per_s']:>16,.0f}"
            f"{row['append_p50_ms']:>9.3f}{row['append_p99_ms']:>9.3f}{row['to_raw_ratio']:>8.2f}"
        )
    report = {
        "benchmark": "event_store",
        "store": "postgres",
        "server": server,
        "postgresql": server_version,
        "settings": settings,
        "python": sys.version.split()[0],
        "psycopg": psycopg.__version__,
        "machine": platform.machine(),
        "parameters": {"raw_rows": rows, "sweep": sweep, "sweep_events": sweep_events},
        "results": {"raw_commits_per_s": raw_rate, "sweep": results},
        "ratios_to_raw": {writers: row["to_raw_ratio"] for writers, row in results.items()},
    }
    print(json.dumps(report, sort_keys=True))
