"""Running one command for the local workspace: no shell, bounded time and output, whole-group kill.

Semantics (the contract :class:`~harness_workspace.local.LocalWorkspace` exposes):

- **Program lookup.** ``argv`` is executed directly, never through a shell. A program name
  without a slash is looked up in the ``PATH`` of the *given* environment (the caller's own
  ``PATH`` plays no part); a name with a slash is taken relative to the command's working
  directory, that is relative to ``cwd_fd``. A program that cannot be found (or a script
  whose interpreter is missing, which the kernel reports the same way) raises
  ``WORKSPACE_COMMAND_NOT_FOUND`` rather than returning exit code 127: nothing ran, so there
  is no result to report. A program that exists but cannot be executed, an argument with a
  NUL character or any other spawn failure raises ``WORKSPACE_COMMAND_FAILED_TO_START``.
- **Working directory.** The child changes into the directory *behind the descriptor*
  ``cwd_fd`` (through ``/proc/self/fd/<n>``, the descriptor being passed to the child), so
  renaming or replacing the directory's path after the caller opened it changes nothing.
  The descriptor is not closed. Linux only (``/proc`` and ``pidfd_open``).
- **Environment.** Exactly the given mapping; :func:`scrubbed_environment` builds the
  minimal one the workspace uses.
- **Checks before starting**, in this order: a budget over the maximum, then an already
  aborted signal, then a zero budget; each starts nothing.
- **Time.** ``timeout_ms=None`` means ``limits.default_timeout_ms``; more than
  ``limits.max_timeout_ms`` raises ``WORKSPACE_TIMEOUT_TOO_LARGE`` before anything starts.
  ``0`` is a budget of no time at all: the deadline has already passed, so no process is
  started and the result is a timeout (``exit_code=None``, empty output, ``timed_out=True``).
- **Stopping.** On timeout, abort or cancellation the whole process group (the child leads
  its own session) gets ``SIGTERM`` (and ``SIGCONT``, so a stopped process can act on it);
  after ``limits.kill_grace_ms``, or as soon as the direct child has exited, the group gets
  ``SIGKILL``. The direct child is always reaped. When the direct child exits by itself,
  whatever it left running in its group is killed with ``SIGKILL`` at once: nothing waits
  for it, and it must not outlive the call or keep the output pipes open.
- **Outcome.** A normal exit returns its status as ``exit_code`` (a death by signal *N*
  that the adapter did not cause is ``-N``, Python's convention) with ``timed_out=False``.
  A timeout returns ``exit_code=None``, ``timed_out=True`` and the output captured so far.
  An aborted :class:`~harness_workspace.AbortSignal` raises ``WORKSPACE_COMMAND_ABORTED``
  once the group is stopped and reaped (a signal already aborted before the call starts
  nothing), as an aborted web ``fetch`` rejects instead of resolving. Cancellation of the
  calling trio task stops the group inside a shielded scope and then lets ``Cancelled``
  propagate.
- **Output.** stdout and stderr are read concurrently into a
  :class:`~harness_workspace.local.HeadTailOutput` each: of a stream longer than
  ``limits.max_output_bytes`` the first ``cap - cap // 2`` and the last ``cap // 2`` bytes
  are kept, the middle is read and discarded (the child never blocks on a full pipe, and
  memory stays bounded), and a one-line notice in its place states how many bytes the text
  does not show. Bytes are decoded as UTF-8 with ``errors="replace"``; a multi-byte
  character cut at either end of the gap is dropped, and counted in the notice.

Not defended: a process that leaves its process group or session (``setsid``, a
double-forking daemon) escapes the group kill; only a cgroup or PID namespace could hold
it. Its copy of an output pipe is abandoned after a short drain, so it cannot hang the call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal as signals
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, Protocol

import msgspec
import trio

from harness_workspace._errors import WorkspaceOperationMalformedError
from harness_workspace._signals import AbortSignal, move_on_abort
from harness_workspace._types import CommandResult
from harness_workspace.local._errors import (
    WORKSPACE_COMMAND_ABORTED,
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    WORKSPACE_TIMEOUT_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace.local._output import HeadTailOutput

__all__ = [
    "OutputSink",
    "ProcessLimits",
    "SupervisedExit",
    "run_command",
    "scrubbed_environment",
    "supervise_process",
]

SAFE_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
"""The ``PATH`` of a scrubbed environment: system directories only, nothing relative."""

_SAFE_HOME: Final = "/nonexistent"
# After the direct child has exited and its group was killed, the pipes reach end of file at
# once unless a process that escaped the group still holds them; stop reading after this.
_DRAIN_SECONDS: Final = 0.5


class ProcessLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The bounds on every process the local workspace starts, and on ``diff`` and ``snapshot``.

    ``diff`` and ``snapshot`` start no process; they take ``default_timeout_ms`` as their
    deadline and ``diff`` takes ``max_output_bytes`` as the largest patch it returns.

    Attributes:
        default_timeout_ms: The time budget of a command that names none.
        max_timeout_ms: The largest budget a command may ask for.
        max_output_bytes: The bytes kept per stream (stdout and stderr separately), half
            from its head and half from its tail.
        kill_grace_ms: How long a stopped process group has between ``SIGTERM`` and ``SIGKILL``.

    Raises:
        ValueError: A limit is negative, or the default budget exceeds the maximum.
    """

    default_timeout_ms: int = 30_000
    max_timeout_ms: int = 600_000
    max_output_bytes: int = 1_048_576
    kill_grace_ms: int = 2_000

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if getattr(self, name) < 0:
                raise ValueError(f"ProcessLimits.{name} must not be negative")
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError("ProcessLimits.default_timeout_ms must not exceed max_timeout_ms")


def scrubbed_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the minimal environment commands run with, nothing inherited from this process.

    ``PATH`` is :data:`SAFE_PATH`, ``LANG`` is ``C.UTF-8`` and ``HOME`` is ``/nonexistent``:
    tools that look for per-user configuration or credentials (``~/.gitconfig``,
    ``~/.netrc``) find none, and none writes dotfiles into the workspace. No other variable
    of the running process (tokens, keys, proxies) reaches the child.

    Args:
        extra: Variables added on top, replacing the defaults of the same name.
    """
    environment = {"PATH": SAFE_PATH, "HOME": _SAFE_HOME, "LANG": "C.UTF-8"}
    if extra is not None:
        environment.update(extra)
    return environment


async def run_command(
    cwd_fd: int,
    argv: tuple[str, ...],
    *,
    timeout_ms: int | None,
    signal: AbortSignal | None,
    environment: Mapping[str, str],
    limits: ProcessLimits,
) -> CommandResult:
    """Run ``argv`` in the directory behind ``cwd_fd`` and return its bounded outcome.

    The module docstring states the full semantics (lookup, timeout ``0``, stopping, caps).

    Args:
        cwd_fd: An open directory descriptor, already resolved inside the workspace; not closed.
        argv: The program and its arguments; never interpreted by a shell.
        timeout_ms: The time budget, ``None`` for the default, ``0`` for none at all.
        signal: Stops the command when aborted.
        environment: The child's complete environment.
        limits: Time, output and grace bounds.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_TIMEOUT_TOO_LARGE``, ``WORKSPACE_COMMAND_NOT_FOUND``,
            ``WORKSPACE_COMMAND_FAILED_TO_START`` or ``WORKSPACE_COMMAND_ABORTED``.
        WorkspaceOperationMalformedError: ``timeout_ms`` is negative (the dispatcher
            already rejects it; this guards direct callers).
    """
    budget_ms = command_budget_ms(timeout_ms, limits)
    if signal is not None and signal.aborted:
        raise _aborted(signal)
    if budget_ms == 0:
        await trio.lowlevel.checkpoint()
        return CommandResult(exit_code=None, stdout="", stderr="", timed_out=True)
    finished = await run_process(
        cwd_fd, argv, budget_ms=budget_ms, signal=signal, environment=environment, limits=limits
    )
    if finished.aborted and signal is not None:
        raise _aborted(signal)
    return CommandResult(
        exit_code=finished.exit_code,
        stdout=finished.stdout.text("stdout"),
        stderr=finished.stderr.text("stderr"),
        timed_out=finished.timed_out,
    )


def command_budget_ms(timeout_ms: int | None, limits: ProcessLimits) -> int:
    """Return the effective time budget of a command, checked against ``limits``.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_TIMEOUT_TOO_LARGE``.
        WorkspaceOperationMalformedError: ``timeout_ms`` is negative.
    """
    if timeout_ms is None:
        return limits.default_timeout_ms
    if timeout_ms < 0:
        raise WorkspaceOperationMalformedError(
            "execute.command.timeout_ms must be a nonnegative safe integer when provided", "execute"
        )
    if timeout_ms > limits.max_timeout_ms:
        raise LocalWorkspaceError(
            WORKSPACE_TIMEOUT_TOO_LARGE,
            f"timeout_ms {timeout_ms} exceeds the maximum of {limits.max_timeout_ms}",
            "execute",
        )
    return timeout_ms


def _aborted(signal: AbortSignal) -> LocalWorkspaceError:
    return LocalWorkspaceError(
        WORKSPACE_COMMAND_ABORTED, f"command aborted (reason: {signal.reason!r})", "execute"
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FinishedProcess:
    """What :func:`run_process` observed; ``exit_code`` is ``None`` when the adapter stopped it."""

    exit_code: int | None
    stdout: HeadTailOutput
    stderr: HeadTailOutput
    timed_out: bool
    aborted: bool


async def run_process(
    cwd_fd: int,
    argv: Sequence[str],
    *,
    budget_ms: int,
    signal: AbortSignal | None,
    environment: Mapping[str, str],
    limits: ProcessLimits,
    operation: str = "execute",
) -> FinishedProcess:
    """Start ``argv`` and supervise it to the end; the machinery under :func:`run_command`.

    Unlike :func:`run_command` it reports an abort in the result instead of raising, and
    leaves truncation for the caller to judge.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_COMMAND_NOT_FOUND`` or ``WORKSPACE_COMMAND_FAILED_TO_START``,
            with ``operation``.
    """
    process = await _spawn(cwd_fd, argv, environment, operation)
    stdout = HeadTailOutput(limits.max_output_bytes)
    stderr = HeadTailOutput(limits.max_output_bytes)
    ended = await supervise_process(
        process,
        budget_ms=budget_ms,
        signal=signal,
        kill_grace_ms=limits.kill_grace_ms,
        stdout=stdout,
        stderr=stderr,
    )
    return FinishedProcess(
        exit_code=None if ended.stopped else ended.status,
        stdout=stdout,
        stderr=stderr,
        timed_out=ended.stopped and not ended.aborted,
        aborted=ended.aborted,
    )


class OutputSink(Protocol):
    """Where :func:`supervise_process` drains one output pipe."""

    @property
    def closed(self) -> trio.Event:
        """Set once the pipe reached end of file."""
        ...

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` to end of file, keeping what it keeps; then set :attr:`closed`."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class SupervisedExit:
    """How a supervised process ended: its reaped status, and whether the supervisor stopped it."""

    status: int
    stopped: bool
    """The budget ran out or the signal was aborted, and the group was stopped."""
    aborted: bool
    """The signal was aborted (``stopped`` is then true too)."""


async def supervise_process(
    process: trio.Process,
    *,
    budget_ms: int,
    signal: AbortSignal | None,
    kill_grace_ms: int,
    stdout: OutputSink,
    stderr: OutputSink,
    on_stop: Callable[[], Awaitable[None]] | None = None,
) -> SupervisedExit:
    """Supervise a started process that leads its own session, to the end; close its pipes.

    Both pipes are drained concurrently. The budget or an aborted ``signal`` stops the
    group: ``SIGTERM`` and ``SIGCONT``, up to ``kill_grace_ms`` for the direct child, then
    ``SIGKILL``. Whatever the direct child left in its group is killed with ``SIGKILL`` when
    it exits. ``on_stop`` (shielded) runs after a stop, for what lives beyond the group (a
    container's processes behind ``docker exec``). Cancellation of the caller stops the group
    the same way, shielded, and then propagates.
    """
    grace = kill_grace_ms / 1000
    reaped = False
    pidfd: int | None = None
    try:
        # A pidfd of our own becomes readable when the child exits, *without* reaping it:
        # while it is an unreaped zombie its pid (the group id) cannot be reused, so the
        # group signals below can never reach an unrelated process.
        pidfd = os.pidfd_open(process.pid)
        assert process.stdout is not None
        assert process.stderr is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stdout.drain, process.stdout)
            nursery.start_soon(stderr.drain, process.stderr)
            abort_scope = move_on_abort(signal) if signal is not None else contextlib.nullcontext(None)
            with trio.move_on_after(budget_ms / 1000) as deadline, abort_scope as aborted:
                await trio.lowlevel.wait_readable(pidfd)
            was_aborted = aborted is not None and aborted.cancelled_caught
            stopped = deadline.cancelled_caught or was_aborted
            if stopped:
                await _request_stop(process.pid, pidfd, grace)
            # Whatever is left in the group (everything, after a timeout or an abort; what
            # the direct child left behind, after a normal exit) must not outlive the call.
            _signal_group(process.pid, signals.SIGKILL)
            status = await process.wait()
            reaped = True
            if stopped and on_stop is not None:
                with trio.CancelScope(shield=True):
                    await on_stop()
            with trio.move_on_after(_DRAIN_SECONDS):
                await stdout.closed.wait()
                await stderr.closed.wait()
            nursery.cancel_scope.cancel()
        return SupervisedExit(status=status, stopped=stopped, aborted=was_aborted)
    finally:
        with trio.CancelScope(shield=True):
            if not reaped:
                if pidfd is not None:
                    await _request_stop(process.pid, pidfd, grace)
                _signal_group(process.pid, signals.SIGKILL)
                await process.wait()
                if on_stop is not None:
                    await on_stop()
            if pidfd is not None:
                trio.lowlevel.notify_closing(pidfd)
                os.close(pidfd)
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    await stream.aclose()


async def _spawn(
    cwd_fd: int, argv: Sequence[str], environment: Mapping[str, str], operation: str
) -> trio.Process:
    program = argv[0]
    if any("\x00" in argument for argument in argv):
        raise LocalWorkspaceError(
            WORKSPACE_COMMAND_FAILED_TO_START, "command arguments must not contain NUL characters", operation
        )
    cwd = f"/proc/self/fd/{cwd_fd}"
    try:
        return await trio.lowlevel.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # The child inherits the descriptor under the same number, so the link names
            # the very directory the caller opened, whatever its path has become.
            cwd=cwd,
            pass_fds=(cwd_fd,),
            env=dict(environment),
            start_new_session=True,
        )
    except FileNotFoundError as error:
        if error.filename == program and error.filename != cwd:
            raise LocalWorkspaceError(
                WORKSPACE_COMMAND_NOT_FOUND, f"command not found: {program!r}", operation
            ) from error
        raise _failed_to_start(program, error, operation) from error
    except (OSError, ValueError, UnicodeError) as error:
        # ValueError: an environment entry the OS cannot represent; UnicodeError: an
        # argument that is not encodable as a file name.
        raise _failed_to_start(program, error, operation) from error


def _failed_to_start(program: str, error: Exception, operation: str) -> LocalWorkspaceError:
    return LocalWorkspaceError(
        WORKSPACE_COMMAND_FAILED_TO_START, f"command {program!r} could not be started: {error}", operation
    )


async def _request_stop(pgid: int, pidfd: int, grace: float) -> None:
    """Ask the group to stop and give the direct child up to ``grace`` seconds to exit.

    ``SIGCONT`` follows ``SIGTERM`` so that a stopped process can act on it. The caller
    sends ``SIGKILL`` to the group afterwards in every case.
    """
    _signal_group(pgid, signals.SIGTERM)
    _signal_group(pgid, signals.SIGCONT)
    with trio.move_on_after(grace):
        await trio.lowlevel.wait_readable(pidfd)


def _signal_group(pgid: int, signum: int) -> None:
    # An empty group is already what we want; a member we may not signal cannot be helped.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
