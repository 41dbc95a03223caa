"""Test doubles for SandboxWorkspace's own logic: an engine that runs commands on the host.

``HostTestEngine`` isolates nothing; it exists so that the copy, the path checks, the limits
and disposal can be tested without Docker or bubblewrap. It is never shipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness_sandbox import CommandOutcome, CommandSpec, EnvironmentSpec, SandboxError
from harness_sandbox._supervise import run_host_process


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
        return CommandOutcome(
            exit_code=ran.status,
            stdout=ran.stdout.text("stdout"),
            stderr=ran.stderr.text("stderr"),
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


def git_repository(path: Path, files: dict[str, str]) -> Path:
    """A real git repository at ``path`` holding ``files`` in one commit."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
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
