"""Benchmark: SandboxWorkspace on each engine against LocalWorkspace and a bare host process.

Run by hand (not a test): ``uv run python benchmarks/sandbox_workspace.py [repeat]``. In one
run it measures, median milliseconds (and the ratio to the baseline of the same run):

- ``execute``: ``true`` and ``python3 -c pass`` through ``LocalWorkspace.execute`` (the bare
  host process, the baseline) and through ``SandboxWorkspace.execute`` on Docker (the default
  image, which has python3) and on bubblewrap;
- creation (copy + environment start) and disposal of a ``SandboxWorkspace`` over a small
  git source (50 files);
- ``read_file`` and ``write_file`` of a 4 KiB file, ``LocalWorkspace`` against
  ``SandboxWorkspace`` (both run on the host, through the same containment).

An engine that is not available here is reported as such and left out.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
from _sandbox_bench import load_build_script, samples_ms

from harness_sandbox import (
    BubblewrapEngine,
    DockerEngine,
    SandboxEngine,
    SandboxError,
    SandboxLimits,
    SandboxWorkspace,
)
from harness_workspace import CommandRequest
from harness_workspace.local import LocalWorkspace

_GIT = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
}
_COMMANDS = (("true", ("true",)), ("python3 -c pass", ("python3", "-c", "pass")))


async def timed(function: Callable[[], Awaitable[object]], repeat: int) -> float:
    """The median milliseconds of ``repeat`` calls, after three warm-up calls."""
    return statistics.median(await samples_ms(function, repeat))


def source_tree(directory: Path) -> Path:
    """A git repository with 50 small files."""
    source = directory / "source"
    for index in range(50):
        path = source / f"pkg{index % 5}" / f"mod{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"value = {index}\n" * 20)
    environment = {**os.environ, **_GIT}
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "b"]):
        subprocess.run(argv, cwd=source, env=environment, check=True)
    return source


def engines() -> list[tuple[str, SandboxEngine]]:
    """The engines available here (Docker needs the default image built)."""
    found: list[tuple[str, SandboxEngine]] = []
    build = load_build_script()
    try:
        image = build.cached_image(build.recipe_hash("debian"))
    except (OSError, subprocess.SubprocessError):
        image = None
    if image is None:
        print("docker: left out (no daemon, or the default image is not built: scripts/build_image.py)")
    else:
        found.append(("docker", DockerEngine(image)))
    found.append(("bubblewrap", BubblewrapEngine()))
    return found


async def main(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        source = source_tree(directory)
        local = LocalWorkspace(source)
        baseline = {
            label: await timed(lambda a=argv: local.execute(CommandRequest(argv=a)), repeat)
            for label, argv in _COMMANDS
        }
        body = "x" * 4096
        read_local = await timed(lambda: local.read_file("pkg0/mod0.py"), repeat)
        write_local = await timed(lambda: local.write_file("bench.txt", body), repeat)
        print(f"{'':28} {'median ms':>10} {'ratio':>7}")
        for label, value in baseline.items():
            print(f"{'host (LocalWorkspace) ' + label:28} {value:10.2f} {1.0:7.2f}")
        print(f"{'LocalWorkspace read_file':28} {read_local:10.3f} {1.0:7.2f}")
        print(f"{'LocalWorkspace write_file':28} {write_local:10.3f} {1.0:7.2f}")
        for engine_name, engine in engines():
            limits = SandboxLimits(kill_grace_ms=200)
            try:
                started = time.perf_counter()
                workspace = await SandboxWorkspace.create(source, engine=engine, limits=limits)
                created = (time.perf_counter() - started) * 1000
            except SandboxError as error:
                print(f"{engine_name}: left out ({error.code}: {error.message})")
                continue
            for label, argv in _COMMANDS:
                value = await timed(lambda a=argv, w=workspace: w.execute(CommandRequest(argv=a)), repeat)
                print(f"{engine_name + ' ' + label:28} {value:10.2f} {value / baseline[label]:7.1f}")
            read = await timed(lambda w=workspace: w.read_file("pkg0/mod0.py"), repeat)
            write = await timed(lambda w=workspace: w.write_file("bench.txt", body), repeat)
            print(f"{engine_name + ' read_file':28} {read:10.3f} {read / read_local:7.2f}")
            print(f"{engine_name + ' write_file':28} {write:10.3f} {write / write_local:7.2f}")
            started = time.perf_counter()
            await workspace.dispose()
            disposed = (time.perf_counter() - started) * 1000
            print(f"{engine_name + ' create / dispose':28} {created:10.1f} / {disposed:.1f} ms")
        await local.dispose()


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 30)
