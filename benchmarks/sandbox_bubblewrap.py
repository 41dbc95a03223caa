"""Benchmark: one command through the bubblewrap engine vs the same command as a bare host process.

Run by hand with ``uv run python benchmarks/sandbox_bubblewrap.py [repeat]`` (as root the
sandbox runs as a uid of its own; otherwise as yours). Prints milliseconds per command
(median, mean, 90th percentile) for ``true`` and ``python3 -c pass`` and the ratios
against the baseline measured in the same run:

- ``host``: the program through ``run_host_process`` (the same supervision, no sandbox);
- ``bwrap only``: a bare ``bwrap`` with namespaces and read-only ``/usr``, no supervision
  of ours, to show what bubblewrap itself costs;
- ``engine``: ``BubblewrapEnvironment.run`` (``timeout`` -> ``setpriv`` -> ``bwrap`` with
  the whole layout and the seccomp filter -> ``prlimit`` -> the program), including the
  admission of the sandbox's pid 1 and waiting for it to exit.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

import trio
from _sandbox_bench import samples_ms

from harness_sandbox import BubblewrapEngine, CommandSpec, EnvironmentSpec, SandboxLimits
from harness_sandbox._supervise import run_host_process

ENVIRONMENT = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
ROOT = os.geteuid() == 0
UID = 200_000 + os.getpid() % 100_000 if ROOT else os.getuid()
GID = UID if ROOT else os.getgid()
COMMANDS = [
    (label, argv)
    for label, argv in (("true", ["/usr/bin/true"]), ("python3 -c pass", ["/usr/bin/python3", "-c", "pass"]))
    if os.path.exists(argv[0])
]


def summary(samples: Sequence[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), statistics.fmean(ordered), ordered[int(len(ordered) * 0.9) - 1]


async def host(argv: Sequence[str]) -> None:
    run = await run_host_process(
        argv,
        budget_ms=10_000,
        signal=None,
        environment=ENVIRONMENT,
        max_output_bytes=1 << 20,
        kill_grace_ms=200,
    )
    assert run.status == 0, run.stderr.text("stderr")


async def main(repeat: int) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        sys.exit("bwrap not found: apt-get install bubblewrap")
    base = tempfile.mkdtemp(prefix="harness-bwrap-bench-")
    try:
        os.chmod(base, 0o711)
        copy = os.path.join(base, "copy")
        os.mkdir(copy)
        os.chown(copy, UID, GID)
        spec = EnvironmentSpec(
            name="harness-sbx-bench", copy_path=copy, uid=UID, gid=GID, limits=SandboxLimits(), owner="bench"
        )
        started = time.perf_counter()
        environment = await BubblewrapEngine().start(spec)
        print(f"start (engine probe + environment probe): {(time.perf_counter() - started) * 1000:.1f} ms")
        drop = ["setpriv", f"--reuid={UID}", f"--regid={GID}", "--clear-groups"] if ROOT else []
        bare_bwrap = [*drop, bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr"]
        bare_bwrap += [
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
        ]
        bare_bwrap += ["/lib64", "--proc", "/proc", "--dev", "/dev", "--"]
        print(f"{repeat} runs each; ms per command (median / mean / p90), ratio of medians to host")
        print(f"{'command':<18}{'variant':<12}{'median':>9}{'mean':>9}{'p90':>9}{'ratio':>8}")
        for label, argv in COMMANDS:

            async def sandboxed(argv: Sequence[str] = argv) -> None:
                outcome = await environment.run(
                    CommandSpec(
                        argv=tuple(argv), cwd="", budget_ms=10_000, environment=ENVIRONMENT, signal=None
                    )
                )
                assert outcome.exit_code == 0, outcome

            baseline = summary(await samples_ms(lambda argv=argv: host(argv), repeat))
            variants = {
                "host": baseline,
                "bwrap only": summary(await samples_ms(lambda argv=argv: host([*bare_bwrap, *argv]), repeat)),
                "engine": summary(await samples_ms(sandboxed, repeat)),
            }
            for variant, (median, mean, p90) in variants.items():
                ratio = median / baseline[0]
                print(f"{label:<18}{variant:<12}{median:>9.2f}{mean:>9.2f}{p90:>9.2f}{ratio:>7.1f}x")
        await environment.stop()
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
