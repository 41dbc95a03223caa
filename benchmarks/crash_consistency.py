"""The crash-consistency harness in its long mode: many SIGKILLs, a kill-point distribution, violations.

Run by hand (it is not a test)::

    uv run python benchmarks/crash_consistency.py --trials 2000 [--seed N] [--targets kernel,server,store]
    uv run python benchmarks/crash_consistency.py --targets postgres [--database-url postgresql://…]

It drives the same trials as ``packages/kernel/tests/faults`` and
``services/agent-server/tests/faults`` (a pre-warmed zygote forks one grandchild per trial;
the grandchild is SIGKILLed after a seeded delay or kills itself at a seeded append or
effect; the file left behind is checked) with ``--trials`` kill points per target
(``kernel`` runs MinimalAgentRuntime with FULL, ``kernel-legacy`` run_agent, ``kernel-normal``
MinimalAgentRuntime with ``synchronous="NORMAL"``, ``continuation`` a checkpointed turn killed
on either side of every request, intent, policy, result and checkpoint append or inside an
effect and then continued with ``continue_session`` (no effect twice, no acknowledged event
lost, one terminal pair), ``server`` the agent server mid-prompt,
``migration`` and ``checkpoint`` the store; ``postgres`` the PostgreSQL store's writer killed
mid-batch, as ``packages/store-postgres/tests/test_crash_consistency.py`` does). It prints,
per target, the trials, the kill points, how they were distributed over the workload, and
every violation, then one JSON object. The exit status is 1 when any violation was found.

``postgres`` is not in the default targets: it needs a PostgreSQL server. With
``--database-url`` (a role with ``CREATEDB``) it creates its databases there; without, it
starts a throwaway cluster from the installed server binaries (``initdb``/``pg_ctl``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages" / "kernel" / "tests"))
sys.path.insert(0, str(ROOT / "services" / "agent-server" / "tests" / "faults"))
sys.path.insert(0, str(ROOT / "packages" / "store-postgres" / "tests" / "support"))

from faults.continuation_crash_trials import CONTINUATION_MODULES, run_continuation_target  # noqa: E402
from faults.crash_harness import (  # noqa: E402
    DEFAULT_SEED,
    LANES,
    KillPlan,
    Summary,
    TrialVerdict,
    Zygote,
    fault_rng,
    run_lanes,
    start_zygotes,
)
from faults.kernel_crash_trials import (  # noqa: E402
    KERNEL_MODULES,
    build_checkpoint_template,
    build_v1_template,
    checkpoint_trial,
    measure_clean,
    migration_trial,
    remove_database,
    run_kernel_target,
)
from pg_cluster import Cluster, server_binaries, throwaway_cluster  # noqa: E402
from pg_crash_trials import PG_MODULES, PG_SUPPORT, run_postgres_target  # noqa: E402

TARGETS = ("kernel", "kernel-legacy", "kernel-normal", "continuation", "server", "migration", "checkpoint")
OPTIONAL_TARGETS = ("postgres",)
ServerTarget = Callable[..., Awaitable[None]]


async def _kernel(
    directory: Path, summary: Summary, rng: Any, trials: int, *, workload: str, sync: str
) -> None:
    async with start_zygotes(LANES, [], KERNEL_MODULES) as zygotes:
        await run_kernel_target(
            zygotes, directory, rng, summary, workload=workload, synchronous=sync, trials=trials
        )


async def _continuation(directory: Path, summary: Summary, rng: Any, trials: int) -> None:
    async with start_zygotes(LANES, [], CONTINUATION_MODULES) as zygotes:
        await run_continuation_target(zygotes, directory, rng, summary, trials=trials)


async def _server(directory: Path, summary: Summary, rng: Any, trials: int) -> None:
    module = importlib.import_module("server_crash_trials")
    run_server_target = cast(ServerTarget, module.run_server_target)
    path = cast(Path, module.SERVER_PATH)
    modules = cast(tuple[str, ...], module.SERVER_MODULES)
    async with start_zygotes(LANES, [path], modules) as zygotes:
        await run_server_target(zygotes, directory, rng, summary, trials=trials)


async def _migration(directory: Path, summary: Summary, rng: Any, trials: int) -> None:
    template = directory / "v1-template.sqlite"
    build_v1_template(template, sessions=8, events_per_session=1000)
    copy = directory / "measure.sqlite"

    def reset() -> None:
        remove_database(copy)
        copy.write_bytes(template.read_bytes())

    async with start_zygotes(LANES, [], KERNEL_MODULES) as zygotes:
        params = {"db": str(copy), "synchronous": "FULL"}
        seconds, _ = await measure_clean(zygotes[0], "migrate", params, reset=reset)
        summary.clean_seconds = seconds

        async def one(zygote: Zygote, number: int, plan: KillPlan) -> TrialVerdict:
            return await migration_trial(zygote, template, directory, number, kill_after=plan[0])

        def plan() -> KillPlan:
            return rng.uniform(0.0, seconds), None, "timer"

        await run_lanes(zygotes, summary, trials=trials, plan=plan, trial=one)


async def _checkpoint(directory: Path, summary: Summary, rng: Any, trials: int) -> None:
    template = directory / "checkpoint-template.sqlite"
    await build_checkpoint_template(template)
    saves = 40
    copy = directory / "measure.sqlite"

    def reset() -> None:
        remove_database(copy)
        copy.write_bytes(template.read_bytes())

    async with start_zygotes(LANES, [], KERNEL_MODULES) as zygotes:
        sizes = [rng.randrange(0, 100_000) for _ in range(saves)]
        params = {"db": str(copy), "synchronous": "FULL", "sizes": sizes, "self_kill": None}
        seconds, _ = await measure_clean(zygotes[0], "checkpoint", params, reset=reset)
        summary.clean_seconds = seconds
        plans: dict[int, tuple[list[int], str]] = {}

        def plan() -> KillPlan:
            sizes = [rng.randrange(0, 100_000) for _ in range(saves)]
            synchronous = rng.choice(("FULL", "NORMAL"))
            plans[len(plans) + 1] = (sizes, synchronous)
            if rng.random() < 0.5:
                return rng.uniform(0.0, seconds), None, f"timer {synchronous}"
            point = {"point": "after-checkpoint", "count": rng.randint(1, saves)}
            return None, point, f"self after-checkpoint {synchronous}"

        async def one(zygote: Zygote, number: int, kill: KillPlan) -> TrialVerdict:
            sizes, synchronous = plans[number]
            return await checkpoint_trial(
                zygote,
                template,
                directory,
                number,
                synchronous=synchronous,
                sizes=sizes,
                kill_after=kill[0],
                self_kill=kill[1],
                how=kill[2],
            )

        await run_lanes(zygotes, summary, trials=trials, plan=plan, trial=one)


async def _postgres(summary: Summary, rng: Any, trials: int, database_url: str | None) -> None:
    if database_url is not None:
        await _postgres_on(Cluster(database_url), summary, rng, trials)
        return
    binaries = server_binaries()
    if binaries is None:
        raise SystemExit("the postgres target needs --database-url or the PostgreSQL server binaries")
    with throwaway_cluster(binaries) as cluster:
        await _postgres_on(cluster, summary, rng, trials)


async def _postgres_on(cluster: Cluster, summary: Summary, rng: Any, trials: int) -> None:
    databases = [cluster.new_database() for _ in range(LANES)]
    async with start_zygotes(LANES, [PG_SUPPORT], PG_MODULES) as zygotes:
        await run_postgres_target(zygotes, databases, rng, summary, trials=trials)


async def run(targets: list[str], trials: int, seed: int, database_url: str | None = None) -> list[Summary]:
    summaries: list[Summary] = []
    for target in targets:
        summary = Summary(target, seed)
        summaries.append(summary)
        rng = fault_rng(seed, f"benchmark {target}")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"crash-{target}-") as name:
            directory = Path(name)
            if target == "postgres":
                await _postgres(summary, rng, trials, database_url)
            elif target == "kernel":
                await _kernel(directory, summary, rng, trials, workload="runtime", sync="FULL")
            elif target == "kernel-legacy":
                await _kernel(directory, summary, rng, trials, workload="legacy", sync="FULL")
            elif target == "kernel-normal":
                await _kernel(directory, summary, rng, trials, workload="runtime", sync="NORMAL")
            elif target == "continuation":
                await _continuation(directory, summary, rng, trials)
            elif target == "server":
                await _server(directory, summary, rng, trials)
            elif target == "migration":
                await _migration(directory, summary, rng, trials)
            else:
                await _checkpoint(directory, summary, rng, trials)
        summary.seconds = time.monotonic() - started
        print("\n".join(summary.lines()), flush=True)
    return summaries


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=2000, help="kill points per target (default 2000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help=f"comma-separated, of {', '.join(TARGETS + OPTIONAL_TARGETS)} (default: all but postgres)",
    )
    parser.add_argument(
        "--database-url",
        default=None,
        help="the postgres target's server (a role with CREATEDB); default: a throwaway cluster",
    )
    options = parser.parse_args()
    targets = [name for name in options.targets.split(",") if name]
    unknown = set(targets) - set(TARGETS + OPTIONAL_TARGETS)
    if unknown or options.trials < 1:
        parser.error(f"unknown targets {sorted(unknown)}" if unknown else "--trials must be >= 1")
    print(f"crash consistency: seed={options.seed} trials={options.trials} targets={','.join(targets)}")
    summaries = trio.run(run, targets, options.trials, options.seed, options.database_url)
    report = {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "seed": options.seed,
        "trials_per_target": options.trials,
        "results": [
            {
                "target": s.target,
                "trials": s.trials,
                "kill_points": s.kills,
                "violations": s.violations,
                "seconds": round(s.seconds, 1),
                "clean_workload_ms": round(s.clean_seconds * 1000),
                "distribution": dict(sorted(s.points.items())),
            }
            for s in summaries
        ],
    }
    print(json.dumps(report, indent=2))
    return 1 if any(s.violations for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
