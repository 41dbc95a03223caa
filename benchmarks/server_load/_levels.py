"""Phase levels: 1, 100 and 500 concurrent sessions against the in-process server.

The level of one session runs ``--lone-rounds`` times in a row (a single prompt is one
noisy sample); the others run once.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from ._measure import peak_rss_mib, percentile
from ._sessions import print_level, run_level
from ._verdicts import Verdicts


async def phase_levels(url: str, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """Each level of ``arguments.levels`` in turn; every prompt completes, under 120 s, RSS bounded."""
    print("levels: concurrent sessions, one in eight with a permission round trip", flush=True)
    rows: list[dict[str, Any]] = []
    for count in arguments.levels:
        rounds = arguments.lone_rounds if count == 1 else 1
        level = await run_level(url, count, arguments.timeout, rounds)
        print_level(f"level {count}", level)
        ok = not level.failures and not level.timed_out and len(level.latencies) == count * rounds
        verdicts.expect(
            f"level {count}: every prompt completes, seq contiguous, restore equals stream",
            ok,
            f"{len(level.latencies)}/{count * rounds} completed, {len(level.failures)} failures",
        )
        verdicts.expect(f"level {count}: under 120 s", level.seconds < 120, f"{level.seconds:.2f} s")
        rows.append(
            {
                "sessions": count,
                "rounds": rounds,
                "completed": len(level.latencies),
                "failures": len(level.failures),
                "seconds": level.seconds,
                "p50_ms": statistics.median(level.latencies) * 1000 if level.latencies else None,
                "p99_ms": percentile(level.latencies, 0.99) * 1000 if level.latencies else None,
            }
        )
    peak = peak_rss_mib()
    verdicts.expect("RSS under 512 MiB (client and server together)", peak < 512, f"peak {peak:.1f} MiB")
    return {"levels": rows, "peak_rss_mib": peak}
