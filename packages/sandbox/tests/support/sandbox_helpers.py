"""Test doubles for SandboxWorkspace's own logic: an engine that runs commands on the host.

``HostTestEngine`` isolates nothing; it exists so that the copy, the path checks, the limits
and disposal can be tested without Docker or bubblewrap. It is never shipped.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import tempfile
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType

from harness_sandbox import (
    SANDBOX_ENGINE_UNAVAILABLE,
    CommandOutcome,
    CommandSpec,
    EnvironmentSpec,
    SandboxEngine,
    SandboxError,
    SandboxLimits,
    SandboxWorkspace,
)
from harness_sandbox._supervise import run_host_process
from harness_workspace import Workspace
from harness_workspace.conformance import WorkspaceFactory
from harness_workspace.local import WORKSPACE_COMMAND_NOT_FOUND, LocalWorkspaceError


class HostTestEnvironment:
    def __init__(self, spec: EnvironmentSpec) -> None:
        self.spec = spec
        self.commands: list[CommandSpec] = []
        self.stopped = 0

    async def run(self, command: CommandSpec) -> CommandOutcome:
        self.commands.append(command)
        directory = os.path.join(self.spec.copy_path, command.cwd)
        variables = [f"{key}={value}" for key, value in command.environment.items()]
        ran = await run_host_process(
            ["/usr/bin/env", "-i", "-C", directory, *variables, *command.argv],
            budget_ms=command.budget_ms,
            signal=command.signal,
            environment={},
            max_output_bytes=self.spec.limits.max_output_bytes,
            kill_grace_ms=self.spec.limits.kill_grace_ms,
        )
        stderr = ran.stderr.text("stderr")
        if ran.status == 127 and stderr.startswith("/usr/bin/env: "):
            raise LocalWorkspaceError(
                WORKSPACE_COMMAND_NOT_FOUND, f"command not found: {command.argv[0]!r}", "execute"
            )
        return CommandOutcome(
            exit_code=ran.status,
            stdout=ran.stdout.text("stdout"),
            stderr=stderr,
            timed_out=ran.timed_out,
            aborted=ran.aborted,
        )

    async def stop(self) -> None:
        self.stopped += 1


class HostTestEngine:
    """Starts :class:`HostTestEnvironment`s; ``fail_with`` makes ``start`` raise it."""

    def __init__(self, fail_with: SandboxError | None = None) -> None:
        self.fail_with = fail_with
        self.environments: list[HostTestEnvironment] = []

    @property
    def name(self) -> str:
        return "host-test"

    async def start(self, spec: EnvironmentSpec) -> HostTestEnvironment:
        if self.fail_with is not None:
            raise self.fail_with
        environment = HostTestEnvironment(spec)
        self.environments.append(environment)
        return environment


def git_repository(path: Path, files: Mapping[str, str | bytes]) -> Path:
    """A real git repository at ``path`` holding ``files`` in one commit."""
    path.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    environment = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "HOME": str(path),
        "PATH": "/usr/bin:/bin",
    }
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "-m", "one"],
    ):
        subprocess.run(argv, cwd=path, env=environment, check=True)
    return path


def sandbox_factory(sources: Path, engine: SandboxEngine, parent: Path | None = None) -> WorkspaceFactory:
    """Sandbox workspaces on ``engine`` over git sources (under ``sources``) holding the given files.

    The copies go under ``parent`` (one directory each under ``sources`` when ``None``); an
    engine that runs commands as another uid needs a parent that uid can reach.
    """
    names = itertools.count()

    @asynccontextmanager
    async def open_workspace(files: Mapping[str, bytes]) -> AsyncGenerator[Workspace]:
        number = next(names)
        source = git_repository(sources / f"source{number}", files)
        copies = parent
        if copies is None:
            copies = sources / f"copies{number}"
            copies.mkdir()
        workspace = await SandboxWorkspace.create(
            source,
            engine=engine,
            parent=copies,
            limits=SandboxLimits(kill_grace_ms=200, max_timeout_ms=60_000),
        )
        try:
            yield workspace
        finally:
            await workspace.dispose()

    return open_workspace


async def engine_unavailable_reason(engine: SandboxEngine) -> str | None:
    """Why ``engine`` cannot make a SandboxWorkspace here (one line), or ``None`` when it can."""
    with tempfile.TemporaryDirectory() as source:
        try:
            workspace = await SandboxWorkspace.create(source, engine=engine)
        except SandboxError as error:
            if error.code != SANDBOX_ENGINE_UNAVAILABLE:
                raise
            return " ".join(error.message.split())
        await workspace.dispose()
    return None


_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load_build_script() -> ModuleType:
    """``packages/sandbox/scripts/build_image.py`` as a module."""
    spec = importlib.util.spec_from_file_location("harness_sandbox_build_image", _SCRIPTS / "build_image.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cached_default_image() -> str | None:
    """The default image built by ``build_image.py`` for its current recipe, or ``None``."""
    build = load_build_script()
    image: str | None = build.cached_image(build.recipe_hash("debian"))
    return image


def live_processes(*, uid: int | None = None, marker: str | None = None) -> list[int]:
    """Host pids of processes that have not exited (zombies excluded), by real uid or cmdline."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("State", "").startswith(("Z", "X")):
            continue
        if uid is not None and fields.get("Uid", "").split()[:1] != [str(uid)]:
            continue
        if marker is not None and marker.encode() not in cmdline:
            continue
        found.append(int(entry))
    return found


def sleep_processes(marker: str, *, uid: int | None = None) -> list[int]:
    """Live processes (of real uid ``uid``, if given) running ``sleep`` with ``marker`` as an argument."""
    found: list[int] = []
    for pid in live_processes(uid=uid, marker=marker):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"sleep") and marker.encode() in argv:
            found.append(pid)
    return found
