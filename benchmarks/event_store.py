"""What the durable event store costs over raw SQLite commits, and the event codec's speed.

Run by hand (it is not a test): ``uv run python benchmarks/event_store.py [--events N]``.

In one run, on the same machine and disk (a fresh temporary directory per measurement):

1. raw ``sqlite3``: one ``BEGIN IMMEDIATE; INSERT; COMMIT`` per row of a payload like a
   stored event, with the store's pragmas (WAL, foreign keys), under ``synchronous=FULL``
   and ``NORMAL`` (commits/s);
2. ``SqliteSessionStore.append`` of realistic events with the same settings (events/s,
   append latency p50/p99, and the store ÷ raw ratio; the project's target is >= 0.5);
3. msgspec encode and decode of 100 000 events (events/s).

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
from typing import Literal

import msgspec
import trio

from harness_kernel.events import Event, create_event, deserialize_event, serialize_event
from harness_kernel.store import SqliteSessionStore

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=2000, help="rows/appends per durability mode")
    parser.add_argument("--codec-events", type=int, default=100_000, help="events for the codec timing")
    arguments = parser.parse_args()
    count: int = arguments.events
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
    codec = codec_rates(arguments.codec_events)
    hop = trio.run(thread_hop_seconds, count)

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
        },
        "results": {"append": results, "codec": codec, "thread_hop_us": hop * 1e6},
        "ratios": {mode: row["store_to_raw_ratio"] for mode, row in results.items()},
        "target_ratio": TARGET_RATIO,
    }
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
