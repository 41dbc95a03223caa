"""Supervision of one host process that carries a sandboxed command (``docker exec``, ``bwrap``).

The process runs in a session (and process group) of its own with no stdin and a complete
environment given by the engine. Both outputs are drained into
``harness_workspace.local.HeadTailOutput`` (head and tail kept, the middle counted) and the
supervision itself (budget, abort, ``SIGTERM`` then ``SIGKILL`` to the group, reaping) is
``harness_workspace.local.supervise_process``: both are what ``LocalWorkspace`` uses. An engine
whose command lives beyond that process (``docker exec``) passes ``on_stop``, run after the
host process is gone, to kill what is left inside.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import trio

from harness_workspace import AbortSignal
from harness_workspace.local import HeadTailOutput, supervise_process

__all__ = ["HostRun", "owner_alive", "process_alive", "process_start_time", "run_host_process"]


@dataclass(frozen=True, slots=True)
class HostRun:
    """What :func:`run_host_process` observed; ``status`` is ``None`` when it was stopped."""

    status: int | None
    stdout: HeadTailOutput
    stderr: HeadTailOutput
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
    stdout = HeadTailOutput(max_output_bytes)
    stderr = HeadTailOutput(max_output_bytes)
    ended = await supervise_process(
        process,
        budget_ms=budget_ms,
        signal=signal,
        kill_grace_ms=kill_grace_ms,
        stdout=stdout,
        stderr=stderr,
        on_stop=on_stop,
    )
    return HostRun(
        status=None if ended.stopped else ended.status,
        stdout=stdout,
        stderr=stderr,
        timed_out=ended.stopped and not ended.aborted,
        aborted=ended.aborted,
    )


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal counts as alive).

    A non-positive ``pid`` names no process: nothing says its owner is gone, so it counts as
    alive too.
    """
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``), or ``None`` if gone.

    With the pid it names one process for the life of the system: a pid is reused, a
    ``(pid, start time)`` pair is not.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The name (field 2) may hold spaces and parentheses: the fields after its last ")" are plain.
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[19])


def owner_alive(pid: int, start_time: int | None) -> bool:
    """Whether the process ``pid`` that started at ``start_time`` still runs.

    ``None`` for the start time (an owner recorded by pid alone) falls back to
    :func:`process_alive`, which keeps a leftover while its pid is reused.
    """
    if start_time is None:
        return process_alive(pid)
    if pid <= 0:
        return True
    return process_start_time(pid) == start_time
