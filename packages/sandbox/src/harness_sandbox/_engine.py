"""The engine port: what ``SandboxWorkspace`` asks of Docker, of bubblewrap, or of any engine.

An engine starts one isolated environment per workspace, with the workspace's disposable
copy mounted read-write at :data:`WORKSPACE_MOUNT` and nothing else of the host writable;
the environment runs commands and is stopped once. ``SandboxWorkspace`` does everything
else (the copy, path checks, file operations on the host, limits on the copy's size).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from harness_sandbox._limits import SandboxLimits
from harness_workspace import AbortSignal

__all__ = [
    "LABEL",
    "WORKSPACE_MOUNT",
    "CommandOutcome",
    "CommandSpec",
    "EnvironmentSpec",
    "SandboxEngine",
    "SandboxEnvironment",
]

WORKSPACE_MOUNT: Final = "/workspace"
"""Where the copy appears inside the environment."""
LABEL: Final = "io.harness.sandbox"
"""The label (Docker) or name prefix every environment carries, for the start-up sweep."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentSpec:
    """One environment to start.

    Attributes:
        name: Unique among live environments (``harness-sbx-<hex>``); the Docker container's name.
        copy_path: The absolute host path of the copy, mounted at :data:`WORKSPACE_MOUNT`.
        uid: The user commands run as inside (it owns the copy).
        gid: Its group.
        limits: The workspace's limits.
        owner: Who started it (``<host>:<pid>``), stored on the environment so a later
            sweep can tell its own leftovers.
    """

    name: str
    copy_path: str
    uid: int
    gid: int
    limits: SandboxLimits
    owner: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """One command to run inside an environment.

    Attributes:
        argv: The program and its arguments (never a shell line), each free of NUL.
        cwd: ``""`` or a normalized relative POSIX path below the mount, already checked on
            the host to be a directory of the copy.
        budget_ms: The wall-clock budget, > 0.
        environment: The complete environment of the command (scrubbed by the caller).
        signal: Stops the command when aborted.
    """

    argv: tuple[str, ...]
    cwd: str
    budget_ms: int
    environment: Mapping[str, str]
    signal: AbortSignal | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandOutcome:
    """What a command did.

    Attributes:
        exit_code: Its exit status (``128 + n`` for a signal ``n`` inside, so an OOM kill is
            137); ``None`` when the engine stopped it (timeout or abort).
        stdout: Bounded text (head and tail kept, a notice where the middle was cut).
        stderr: Bounded text, likewise.
        timed_out: The budget ran out and the command was stopped.
        aborted: The signal was aborted and the command was stopped.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    aborted: bool


class SandboxEnvironment(Protocol):
    """One started environment: it runs commands until it is stopped."""

    async def run(self, command: CommandSpec) -> CommandOutcome:
        """Run ``command`` inside; every process it started is gone when this returns.

        Raises:
            LocalWorkspaceError: ``WORKSPACE_COMMAND_NOT_FOUND`` or
                ``WORKSPACE_COMMAND_FAILED_TO_START``.
            SandboxError: ``SANDBOX_START_FAILED`` when the environment itself is gone.
        """
        ...

    async def stop(self) -> None:
        """Stop and remove the environment and verify it is gone; idempotent.

        Raises:
            SandboxError: ``SANDBOX_DISPOSE_FAILED`` when removal could not be verified.
        """
        ...


class SandboxEngine(Protocol):
    """An isolation engine (``docker``, ``bubblewrap``)."""

    @property
    def name(self) -> str:
        """The engine's name."""
        ...

    async def start(self, spec: EnvironmentSpec) -> SandboxEnvironment:
        """Start one environment for ``spec``; never falls back to anything else.

        Raises:
            SandboxError: ``SANDBOX_ENGINE_UNAVAILABLE`` (what is missing),
                ``SANDBOX_IMAGE_NOT_PINNED``, ``SANDBOX_START_FAILED``.
        """
        ...
