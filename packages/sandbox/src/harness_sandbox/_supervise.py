"""Supervision of one host process that carries a sandboxed command (``docker exec``, ``bwrap``).

The process runs in a session (and process group) of its own with no stdin and a complete
environment given by the engine. Both outputs are drained into :class:`BoundedOutput`; the
wall budget and an abort signal stop it: ``SIGTERM`` to its group, ``kill_grace`` seconds,
then ``SIGKILL``. An engine whose command lives beyond that process (``docker exec``) passes
``on_stop``, run after the host process is gone, to kill what is left inside.
"""

from __future__ import annotations

import contextlib
import os
import signal as signals
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import trio

from harness_sandbox._output import BoundedOutput
from harness_workspace import AbortSignal, move_on_abort

__all__ = ["HostRun", "run_host_process"]

# After the process has exited and its group was killed, the pipes reach end of file at once
# unless something that escaped the group holds them; stop reading after this.
_DRAIN_SECONDS: Final = 0.5


@dataclass(frozen=True, slots=True)
class HostRun:
    """What :func:`run_host_process` observed; ``status`` is ``None`` when it was stopped."""

    status: int | None
    stdout: BoundedOutput
    stderr: BoundedOutput
    timed_out: bool
    aborted: bool


async def run_host_process(
    argv: Sequence[str],
    *,
    budget_ms: int,
    signal: AbortSignal | None,
    environment: Mapping[str, str],
    max_output_bytes: int,
    kill_grace_ms: int,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    pass_fds: Sequence[int] = (),
) -> HostRun:
    """Start ``argv`` on the host and supervise it to the end.

    Raises:
        OSError: the process could not be started (the engine maps it to a typed error).
    """
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(environment),
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    stdout = BoundedOutput(max_output_bytes)
    stderr = BoundedOutput(max_output_bytes)
    grace = kill_grace_ms / 1000
    reaped = False
    pidfd: int | None = None
    try:
        # Readable when the child exits, without reaping it: while it is an unreaped zombie
        # its pid (the group id) cannot be reused, so the group signals reach no stranger.
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
        return HostRun(
            status=None if stopped else status,
            stdout=stdout,
            stderr=stderr,
            timed_out=stopped and not was_aborted,
            aborted=was_aborted,
        )
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


async def _request_stop(pgid: int, pidfd: int, grace: float) -> None:
    """``SIGTERM`` (and ``SIGCONT``, so a stopped process can act on it), then up to ``grace`` s."""
    _signal_group(pgid, signals.SIGTERM)
    _signal_group(pgid, signals.SIGCONT)
    with trio.move_on_after(grace):
        await trio.lowlevel.wait_readable(pidfd)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
