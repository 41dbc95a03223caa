"""What the durable event store costs over raw SQLite commits, and the event codec's speed.

Run by hand (it is not a test): ``uv run python benchmarks/event_store.py [--events N]
[--sweep 1,8,64,256] [--sweep-events N]``. ``--store postgres [--database-url URL]
[--fsync on|off]`` measures the PostgreSQL store instead (``_event_store_postgres.py``: raw
psycopg single-statement commits against appends with 1, 8 and 64 concurrent writers); the
default, ``--store sqlite``, is what follows.

In one run, on the same machine and disk (a fresh temporary directory per measurement):

1. raw ``sqlite3``: one ``BEGIN IMMEDIATE; INSERT; COMMIT`` per row of a payload like a
   stored event, with the store's pragmas (WAL, foreign keys), under ``synchronous=FULL``
   and ``NORMAL`` (commits/s);
2. ``SqliteSessionStore.append`` of realistic events with the same settings (events/s,
   append latency p50/p99, and the store ÷ raw ratio; the project's target is >= 0.5);
3. a concurrency sweep under ``synchronous=FULL``: 1, 8, 64 and 256 concurrent writers
   (``--sweep``), each a trio task with its own session, appending ``--sweep-events`` events
   in all to ONE ``SqliteSessionStore`` (stored events/s, append latency p50/p99, and the
   ratio to the raw FULL single-commit rate of step 1);
4. msgspec encode and decode of 100 000 events (events/s);
5. the hand-over floors: one ``trio.to_thread.run_sync`` round trip, and one round trip
   through the store's own long-lived writer thread (a queue in, a trio token out) with no
   work, which is what each group commit pays instead (µs);
6. reads beside writes: the latency of ``slice`` (a restore) of a 100-event session while
   64 writers append to the same store, p50/p99 (reads go to their own connection and
   never wait behind a commit).

It prints a table and then one JSON object (machine, Python and SQLite versions,
parameters, results, ratios). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import msgspec
import trio
import trio.lowlevel

from harness_kernel.events import Event, create_event, deserialize_event, serialize_event
from harness_kernel.store import SqliteSessionStore
from harness_kernel.store._worker import ConnectionThread, Job

SYNCHRONOUS_MODES: tuple[Literal["FULL", "NORMAL"], ...] = ("FULL", "NORMAL")
TARGET_RATIO = 0.5


def realistic_event(index: int) -> Event:
    """A tool call with a modest argument object, the runtime's most common append."""
    return create_event(
        "tool.call",
        {
            "callId": f"call-{index}",
            "tool": "read_file",
            "input": {"path": f"src/module_{index % 50}.py", "offset": index, "limit": 200},
            "runId": "run-1",
            "sessionId": "bench",
            "turnId": f"turn-{index // 20}",
        },
    )


def raw_commits_per_second(directory: Path, synchronous: str, rows: int, payload: str) -> float:
    connection = sqlite3.connect(directory / "raw.db", isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute(
            "CREATE TABLE events(session_id TEXT NOT NULL, seq INTEGER NOT NULL, global_seq INTEGER,"
            " event_id TEXT NOT NULL, at TEXT NOT NULL, actor TEXT, type TEXT NOT NULL,"
            " payload TEXT NOT NULL, PRIMARY KEY (session_id, seq))"
        )
        connection.execute("CREATE UNIQUE INDEX events_event_id_uq ON events(event_id)")
        started = time.perf_counter()
        for seq in range(rows):
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "INSERT INTO events VALUES"
                " ('bench', ?, ?, ?, '2024-01-01T00:00:00.000Z', NULL, 'tool.call', ?)",
                (seq, seq, f"event-{seq}", payload),
            )
            connection.execute("COMMIT")
        return rows / (time.perf_counter() - started)
    finally:
        connection.close()


async def store_appends(
    directory: Path, synchronous: Literal["FULL", "NORMAL"], events: list[Event]
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    async with SqliteSessionStore(directory / "store.db", synchronous=synchronous) as store:
        await store.create("bench")
        started = time.perf_counter()
        for event in events:
            before = time.perf_counter()
            await store.append("bench", event)
            latencies.append(time.perf_counter() - before)
        elapsed = time.perf_counter() - started
    return len(events) / elapsed, latencies


async def concurrent_appends(directory: Path, writers: int, per_writer: int) -> tuple[float, list[float]]:
    """``writers`` tasks, each appending ``per_writer`` events to its own session of one store.

    Every session is created (and the store opened) before the clock starts, and the clock
    starts only once every writer waits at the gate, so the figure is the appends alone.
    """
    batches = [[realistic_event(w * per_writer + i) for i in range(per_writer)] for w in range(writers)]
    latencies: list[float] = []
    gate = trio.Event()
    all_waiting = trio.Event()
    waiting = 0

    async def writer(store: SqliteSessionStore, session_id: str, events: list[Event]) -> None:
        nonlocal waiting
        waiting += 1
        if waiting == writers:
            all_waiting.set()
        await gate.wait()
        for event in events:
            before = time.perf_counter()
            await store.append(session_id, event)
            latencies.append(time.perf_counter() - before)

    async with SqliteSessionStore(directory / "sweep.db", synchronous="FULL") as store:
        for index in range(writers):
            await store.create(f"writer-{index}")
        async with trio.open_nursery() as nursery:
            for index, events in enumerate(batches):
                nursery.start_soon(writer, store, f"writer-{index}", events)
            await all_waiting.wait()
            started = time.perf_counter()
            gate.set()
        elapsed = time.perf_counter() - started
    # A rate is only worth printing if every append landed: count the rows the file holds.
    with sqlite3.connect(directory / "sweep.db") as database:
        stored = int(database.execute("SELECT count(*) FROM events").fetchone()[0])
    if stored != writers * per_writer:
        raise RuntimeError(f"{writers} writers: {stored} rows stored, {writers * per_writer} appended")
    return writers * per_writer / elapsed, latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def codec_rates(count: int) -> dict[str, float]:
    events = [realistic_event(i) for i in range(count)]
    started = time.perf_counter()
    encoded = [serialize_event(event) for event in events]
    encode_rate = count / (time.perf_counter() - started)
    started = time.perf_counter()
    for raw in encoded:
        deserialize_event(raw)
    decode_rate = count / (time.perf_counter() - started)
    return {"encode_events_per_s": encode_rate, "decode_events_per_s": decode_rate}


async def thread_hop_seconds(calls: int) -> float:
    """One ``trio.to_thread.run_sync`` round trip, which the store's contract requires per call."""
    limiter = trio.CapacityLimiter(1)
    for _ in range(min(calls, 200)):
        await trio.to_thread.run_sync(_nothing, limiter=limiter)
    started = time.perf_counter()
    for _ in range(calls):
        await trio.to_thread.run_sync(_nothing, limiter=limiter)
    return (time.perf_counter() - started) / calls


def _nothing() -> None:
    return None


class _NoConnection:
    def close(self) -> None:
        return None


def _run_nothing(_resource: _NoConnection, jobs: list[Job[Any]]) -> None:
    for job in jobs:
        job.succeed(None)


async def writer_hop_seconds(calls: int) -> float:
    """One round trip through a store connection thread (queue in, trio token out), no work."""
    thread = ConnectionThread(_NoConnection(), _run_nothing, name="bench-writer", grouped=True)
    try:
        for _ in range(min(calls, 200)):
            await thread.run(_nothing_with)
        started = time.perf_counter()
        for _ in range(calls):
            await thread.run(_nothing_with)
        return (time.perf_counter() - started) / calls
    finally:
        await trio.to_thread.run_sync(thread.stop)


def _nothing_with(_tables: object) -> None:
    return None


async def reads_beside_writes(directory: Path, writers: int, per_writer: int) -> list[float]:
    """``slice`` latencies of a 100-event session, one read after another, while ``writers``
    tasks append ``per_writer`` events each to the same store (only reads made while some
    writer is still appending are counted)."""
    latencies: list[float] = []
    async with SqliteSessionStore(directory / "reads.db", synchronous="FULL") as store:
        await store.create("restored")
        await store.append_many("restored", [realistic_event(10_000_000 + i) for i in range(100)])
        for index in range(writers):
            await store.create(f"writer-{index}")
        running = writers

        async def writer(session_id: str, first: int) -> None:
            nonlocal running
            for number in range(per_writer):
                await store.append(session_id, realistic_event(first + number))
            running -= 1

        async with trio.open_nursery() as nursery:
            for index in range(writers):
                nursery.start_soon(writer, f"writer-{index}", index * per_writer)
            await trio.lowlevel.checkpoint()
            while running:
                before = time.perf_counter()
                restored = await store.slice("restored", 0)
                if running:
                    latencies.append(time.perf_counter() - before)
                if len(restored) != 100:
                    raise RuntimeError(f"restore read {len(restored)} events, not 100")
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=2000, help="rows/appends per durability mode")
    parser.add_argument("--codec-events", type=int, default=100_000, help="events for the codec timing")
    parser.add_argument(
        "--sweep",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[1, 8, 64, 256],
        help="concurrent writers per sweep level, comma-separated (default 1,8,64,256)",
    )
    parser.add_argument(
        "--sweep-events",
        type=int,
        default=2048,
        help="appends per sweep level in all, split evenly between its writers (at least 1 each)",
    )
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--database-url",
        default=None,
        help="postgres: the server (a role with CREATEDB); default: a throwaway cluster",
    )
    parser.add_argument(
        "--fsync",
        choices=("on", "off"),
        default="on",
        help="postgres: the throwaway cluster's fsync (default on)",
    )
    arguments = parser.parse_args()
    count: int = arguments.events
    if arguments.store == "postgres":
        _postgres(arguments)
        return
    events = [realistic_event(i) for i in range(count)]
    payload = serialize_event(events[0]).decode()

    results: dict[str, dict[str, float]] = {}
    for mode in SYNCHRONOUS_MODES:
        with tempfile.TemporaryDirectory() as raw_dir:
            raw_rate = raw_commits_per_second(Path(raw_dir), mode, count, payload)
        with tempfile.TemporaryDirectory() as store_dir:
            store_rate, latencies = trio.run(store_appends, Path(store_dir), mode, events)
        results[mode] = {
            "raw_commits_per_s": raw_rate,
            "store_events_per_s": store_rate,
            "append_p50_ms": statistics.median(latencies) * 1000,
            "append_p99_ms": percentile(latencies, 0.99) * 1000,
            "store_to_raw_ratio": store_rate / raw_rate,
        }
    raw_full = results["FULL"]["raw_commits_per_s"]
    sweep: dict[str, dict[str, float]] = {}
    for writers in arguments.sweep:
        per_writer = max(1, arguments.sweep_events // writers)
        with tempfile.TemporaryDirectory() as sweep_dir:
            rate, latencies = trio.run(concurrent_appends, Path(sweep_dir), writers, per_writer)
        sweep[str(writers)] = {
            "writers": writers,
            "events": writers * per_writer,
            "store_events_per_s": rate,
            "append_p50_ms": statistics.median(latencies) * 1000,
            "append_p99_ms": percentile(latencies, 0.99) * 1000,
            "to_raw_full_ratio": rate / raw_full,
        }
    with tempfile.TemporaryDirectory() as reads_dir:
        read_latencies = trio.run(reads_beside_writes, Path(reads_dir), 64, 64)
    reads = {
        "writers": 64,
        "reads": len(read_latencies),
        "slice_p50_ms": statistics.median(read_latencies) * 1000,
        "slice_p99_ms": percentile(read_latencies, 0.99) * 1000,
    }
    codec = codec_rates(arguments.codec_events)
    hop = trio.run(thread_hop_seconds, count)
    writer_hop = trio.run(writer_hop_seconds, count)

    versions = f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}"
    print(f"{versions}, {platform.machine()}; {count:,} rows per mode")
    print(
        f"{'synchronous':<13}{'raw commits/s':>15}{'store events/s':>16}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'ratio':>8}"
    )
    for mode, row in results.items():
        print(
            f"{mode:<13}{row['raw_commits_per_s']:>15,.0f}{row['store_events_per_s']:>16,.0f}"
            f"{row['append_p50_ms']:>9.3f}{row['append_p99_ms']:>9.3f}{row['store_to_raw_ratio']:>8.2f}"
        )
    # The store must hand every call to a worker thread; that round trip is a floor of its
    # own, which the raw baseline (same thread) does not pay.
    print(f"trio.to_thread round trip (the store's per-call floor on top of SQLite): {hop * 1e6:,.0f} µs")
    for mode, row in results.items():
        ceiling = 1 / (1 / row["raw_commits_per_s"] + hop) / row["raw_commits_per_s"]
        print(f"  best possible ratio with that hop, {mode}: {ceiling:.2f}")
    # What the store pays instead: a round trip through its long-lived writer thread.
    print(f"store writer thread round trip (queue in, trio token out): {writer_hop * 1e6:,.0f} µs")
    for mode, row in results.items():
        ceiling = 1 / (1 / row["raw_commits_per_s"] + writer_hop) / row["raw_commits_per_s"]
        print(f"  best possible ratio with that hop, {mode}: {ceiling:.2f}")
    print(f"concurrency sweep, synchronous=FULL, one database (raw FULL commits/s: {raw_full:,.0f})")
    print(f"{'writers':>8}{'events':>8}{'store events/s':>16}{'p50 ms':>9}{'p99 ms':>9}{'÷ raw FULL':>12}")
    for row in sweep.values():
        print(
            f"{row['writers']:>8.0f}{row['events']:>8.0f}{row['store_events_per_s']:>16,.0f}"
            f"{row['append_p50_ms']:>9.3f}{row['append_p99_ms']:>9.3f}{row['to_raw_full_ratio']:>12.2f}"
        )
    print(
        f"restore (slice of 100 events) beside {reads['writers']} writers, {reads['reads']} reads:"
        f" p50 {reads['slice_p50_ms']:.3f} ms, p99 {reads['slice_p99_ms']:.3f} ms"
    )
    print(
        f"msgspec codec, {arguments.codec_events:,} events: encode {codec['encode_events_per_s']:,.0f}/s,"
        f" decode {codec['decode_events_per_s']:,.0f}/s"
    )
    report = {
        "benchmark": "event_store",
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor(),
        },
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "msgspec": msgspec.__version__,
        "parameters": {
            "events": count,
            "codec_events": arguments.codec_events,
            "modes": list(SYNCHRONOUS_MODES),
            "sweep": arguments.sweep,
            "sweep_events": arguments.sweep_events,
        },
        "results": {
            "append": results,
            "sweep": sweep,
            "codec": codec,
            "thread_hop_us": hop * 1e6,
            "writer_hop_us": writer_hop * 1e6,
            "reads_beside_writes": reads,
        },
        "ratios": {mode: row["store_to_raw_ratio"] for mode, row in results.items()},
        "sweep_ratios_to_raw_full": {writers: row["to_raw_full_ratio"] for writers, row in sweep.items()},
        "target_ratio": TARGET_RATIO,
    }
    print(json.dumps(report, sort_keys=True))


def _postgres(arguments: argparse.Namespace) -> None:
    # Imported only here: the SQLite run needs no PostgreSQL driver.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _event_store_postgres import run_postgres  # noqa: PLC0415 - the SQLite run imports no driver

    sweep: list[int] = [1, 8, 64] if arguments.sweep == [1, 8, 64, 256] else arguments.sweep
    total: int = arguments.sweep_events
    run_postgres(
        database_url=arguments.database_url,
        fsync=arguments.fsync == "on",
        rows=arguments.events,
        sweep=sweep,
        sweep_events=total,
        events=[realistic_event(i) for i in range(max(total, *sweep))],
    )


if __name__ == "__main__":
    main()
