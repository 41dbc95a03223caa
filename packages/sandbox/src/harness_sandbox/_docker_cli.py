"""The Docker CLI as the engine sees it: bounded calls, typed failures, and the leftover sweep.

Every call runs the CLI with the caller's own environment (``DOCKER_HOST``, contexts and TLS
settings apply); nothing of that environment reaches a container, which sees only the
variables a command names. A call that does not answer within its bound is killed.
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass
from typing import Final

import trio

from harness_sandbox._engine import LABEL
from harness_sandbox._errors import SANDBOX_DISPOSE_FAILED, SANDBOX_ENGINE_UNAVAILABLE, SandboxError
from harness_sandbox._supervise import process_alive

__all__ = ["Completed", "DockerCli", "connect", "sweep_leftovers"]

CALL_SECONDS: Final = 60.0
"""The bound on one CLI call (container creation on a loaded machine takes seconds)."""
OWNER_LABEL: Final = f"{LABEL}.owner"
_MESSAGE_CHARS: Final = 600


@dataclass(frozen=True, slots=True)
class Completed:
    """One CLI call's outcome; ``status`` is ``None`` when the call did not finish."""

    status: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """Whether the call exited with status 0."""
        return self.status == 0

    @property
    def reason(self) -> str:
        """Docker's own words for a failure, on one bounded line."""
        text = " ".join(self.stderr.split()) or f"exit status {self.status}"
        return text[:_MESSAGE_CHARS]


class DockerCli:
    """One resolved Docker CLI executable.

    Args:
        path: The absolute path of the ``docker`` executable.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    async def call(self, *args: str, seconds: float = CALL_SECONDS) -> Completed:
        """Run ``docker <args>`` with no stdin and return its outcome (never raises for a failure)."""
        with trio.move_on_after(seconds):
            try:
                completed = await trio.run_process(
                    [self.path, *args],
                    stdin=b"",
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    env=dict(os.environ),
                )
            except OSError as error:
                return Completed(None, "", f"cannot run {self.path}: {error}")
            return Completed(
                completed.returncode,
                completed.stdout.decode("utf-8", "replace"),
                completed.stderr.decode("utf-8", "replace"),
            )
        return Completed(None, "", f"docker {args[0]} did not answer within {seconds:g} s")


async def connect(docker: str, operation: str) -> DockerCli:
    """Find the CLI and check that its daemon answers.

    Raises:
        SandboxError: ``SANDBOX_ENGINE_UNAVAILABLE`` naming what is missing.
    """
    path = _resolve(docker)
    if path is None:
        raise SandboxError(
            SANDBOX_ENGINE_UNAVAILABLE,
            f"the Docker CLI {docker!r} was not found on PATH: install Docker (apt-get install "
            "docker.io) or name the CLI's path",
            operation,
        )
    cli = DockerCli(path)
    version = await cli.call("version", "--format", "{{.Server.Version}}")
    if not version.ok:
        raise SandboxError(
            SANDBOX_ENGINE_UNAVAILABLE,
            f"the Docker daemon is not reachable through {cli.path} ({version.reason}): start it "
            "(`dockerd &` or `systemctl start docker`) or set DOCKER_HOST",
            operation,
        )
    return cli


def _resolve(docker: str) -> str | None:
    path = shutil.which(docker)
    return None if path is None else os.path.abspath(path)


def this_host() -> str:
    """The host part of an environment's owner (``<host>:<pid>``)."""
    return socket.gethostname()


async def sweep_leftovers(docker: str = "docker", *, owner_prefix: str | None = None) -> list[str]:
    """Remove the sandbox containers whose owning process is gone; return their names, sorted.

    A container is the sandbox's when it carries the label ``io.harness.sandbox=1``; its owner
    label is ``<host>:<pid>``. Only owners on this host can be checked: a container whose
    owner process is alive (or whose pid is alive as someone else's process), one owned from
    another host and one with no readable owner are kept. A pid reused by an unrelated
    process therefore keeps a leftover until that process ends; never the other way round.

    Args:
        docker: The Docker CLI to use.
        owner_prefix: Consider only owners starting with this (default: this host's
            ``<host>:``).

    Raises:
        SandboxError: ``SANDBOX_ENGINE_UNAVAILABLE`` (no CLI or daemon),
            ``SANDBOX_DISPOSE_FAILED`` (a container could not be removed, or listing failed).
    """
    cli = await connect(docker, "sweep")
    return await sweep_with(cli, owner_prefix=owner_prefix)


async def sweep_with(cli: DockerCli, *, owner_prefix: str | None = None) -> list[str]:
    """:func:`sweep_leftovers` with a connected CLI."""
    listing = await _labelled(cli)
    host = this_host()
    prefix = f"{host}:" if owner_prefix is None else owner_prefix
    doomed: dict[str, str] = {}
    for container_id, name, owner in listing:
        owner_host, _, pid_text = owner.rpartition(":")
        if not owner.startswith(prefix) or owner_host != host or not pid_text.isdigit():
            continue
        if not process_alive(int(pid_text)):
            doomed[container_id] = name
    if not doomed:
        return []
    removal = await cli.call("rm", "--force", "--volumes", *doomed)
    remaining = {container_id for container_id, _, _ in await _labelled(cli)} & doomed.keys()
    if remaining:
        names = ", ".join(sorted(doomed[container_id] for container_id in remaining))
        raise SandboxError(
            SANDBOX_DISPOSE_FAILED,
            f"leftover sandbox containers could not be removed: {names} ({removal.reason})",
            "sweep",
        )
    return sorted(doomed.values())


async def _labelled(cli: DockerCli) -> list[tuple[str, str, str]]:
    """``(id, name, owner)`` of every container, running or not, that carries the label."""
    listed = await cli.call(
        "ps",
        "--all",
        "--no-trunc",
        "--filter",
        f"label={LABEL}=1",
        "--format",
        f'{{{{.ID}}}}\t{{{{.Names}}}}\t{{{{.Label "{OWNER_LABEL}"}}}}',
    )
    if not listed.ok:
        raise SandboxError(
            SANDBOX_DISPOSE_FAILED, f"cannot list sandbox containers: {listed.reason}", "sweep"
        )
    rows: list[tuple[str, str, str]] = []
    for line in listed.stdout.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0]:
            rows.append((fields[0], fields[1], fields[2]))
    return rows
