"""Benchmark: the Docker sandbox engine against a bare host process, measured in the same run.

Run with ``uv run python benchmarks/sandbox_docker.py`` on a machine with a running Docker
daemon (as root, so the copy can be given to an id above the sandbox range). It uses the
busybox test image (built in a second if missing) and, when it has been built, the default
Debian image. Prints milliseconds per operation (median of the repeats) and ratios:

- per-command latency of ``run(("true",))`` and ``python3 -c pass``, against the same program
  started on the host, and against the raw ``docker exec`` underneath;
- what a command that leaves a background process costs (the kill round);
- the pieces of the design: ``docker top`` (the leftover check after every command),
  ``docker exec … kill -KILL -1`` (the kill round), ``docker run --rm`` (the per-command
  container this engine does not use);
- environment start and stop.
"""

from __future__ import annotations

import os
import secrets
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

import trio
from _sandbox_bench import load_build_script, samples_ms

from harness_sandbox import SANDBOX_ID_RANGE, CommandSpec, DockerEngine, EnvironmentSpec, SandboxLimits
from harness_sandbox._docker import DockerEnvironment

REPEAT = 30
LIFECYCLE_REPEAT = 8
UID = SANDBOX_ID_RANGE.stop + 2  # above the leased ids: no host account's, no workspace's


async def median_ms(function: Callable[[], Awaitable[object]], repeat: int = REPEAT) -> float:
    return statistics.median(await samples_ms(function, repeat, warmup=1))


async def host(*argv: str) -> None:
    await trio.run_process(list(argv), capture_stdout=True, capture_stderr=True)


def new_spec(base: str) -> EnvironmentSpec:
    copy = tempfile.mkdtemp(dir=base)
    os.chown(copy, UID, UID)
    return EnvironmentSpec(
        name=f"harness-sbx-bench-{secrets.token_hex(6)}",
        copy_path=copy,
        uid=UID,
        gid=UID,
        limits=SandboxLimits(),
        owner=f"{socket.gethostname()}:{os.getpid()}",
    )


def command(*argv: str) -> CommandSpec:
    return CommandSpec(
        argv=argv, cwd="", budget_ms=30_000, environment={"PATH": "/usr/bin:/bin"}, signal=None
    )


def report(label: str, value: float, baseline: float | None = None, baseline_name: str = "") -> None:
    ratio = f"  ({value / baseline:5.1f}x {baseline_name})" if baseline else ""
    print(f"  {label:<52} {value:8.2f} ms{ratio}")


async def bench_commands(environment: DockerEnvironment, python_image: bool) -> None:
    container = environment.container
    bare_true = await median_ms(lambda: host("true"))
    raw_exec = await median_ms(lambda: host("docker", "exec", "--user", f"{UID}:{UID}", container, "true"))
    engine_true = await median_ms(lambda: environment.run(command("true")))
    leftover = await median_ms(
        lambda: environment.run(command("sh", "-c", "sleep 100 >/dev/null 2>&1 &")), repeat=10
    )
    top = await median_ms(lambda: host("docker", "top", container, "-o", "pid,stat"))
    kill = await median_ms(
        lambda: host(
            "docker", "exec", f"--user={UID}:{UID}", container, "/bin/sh", "-c", "kill -KILL -1; exit 0"
        )
    )
    print(f"commands ({'default Debian image' if python_image else 'busybox image'}):")
    report("host: true", bare_true)
    report("raw docker exec true", raw_exec, bare_true, "host")
    report("engine run(true)", engine_true, bare_true, "host")
    report("engine run(true) vs raw docker exec", engine_true, raw_exec, "raw exec")
    report("engine run, background process left (kill round)", leftover, bare_true, "host")
    report("docker top (the check after every command)", top)
    report("docker exec kill -KILL -1 (the kill round)", kill)
    if python_image:
        bare_python = await median_ms(lambda: host(sys.executable, "-S", "-c", "pass"), repeat=10)
        engine_python = await median_ms(
            lambda: environment.run(command("python3", "-S", "-c", "pass")), repeat=10
        )
        report("host: python3 -S -c pass", bare_python)
        report("engine run(python3 -S -c pass)", engine_python, bare_python, "host")


async def bench_lifecycle(engine: DockerEngine, image: str, base: str) -> None:
    starts: list[float] = []
    stops: list[float] = []
    for _ in range(LIFECYCLE_REPEAT):
        spec = new_spec(base)
        started = time.perf_counter()
        environment = await engine.start(spec)
        starts.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await environment.stop()
        stops.append((time.perf_counter() - started) * 1000)
    run_rm = await median_ms(
        lambda: host("docker", "run", "--rm", "--pull=never", "--network=none", image, "true"), repeat=5
    )
    print("environments:")
    report("start (create, start, ready, reaper probe)", statistics.median(starts))
    report("stop (rm --force, verified)", statistics.median(stops))
    report("docker run --rm true (a container per command)", run_rm)


async def main() -> None:
    build = load_build_script()
    busybox: str = build.build_busybox_image()
    debian: str | None = build.cached_image(build.recipe_hash("debian"))
    with tempfile.TemporaryDirectory() as base:
        for image, python_image in ((busybox, False), *(((debian, True),) if debian else ())):
            engine = DockerEngine(image)
            environment = await engine.start(new_spec(base))
            try:
                await bench_commands(environment, python_image)
            finally:
                await environment.stop()
        await bench_lifecycle(DockerEngine(busybox), busybox, base)
    if debian is None:
        print(
            "(default image not built: python3 figures skipped; run packages/sandbox/scripts/build_image.py)"
        )


if __name__ == "__main__":
    trio.run(main)
