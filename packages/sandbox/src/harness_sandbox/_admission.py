"""Admission of one bubblewrap sandbox: its pid 1 held by pidfd from creation to exit.

``bwrap --json-status-fd`` writes the host pid of the sandbox's pid 1 as soon as that
process exists, and ``--block-fd`` makes it wait before it forks anything. Meanwhile this
module opens pidfds for it and for its parent (bwrap's launcher), proves by ``/proc`` that
they are those processes, moves the pid 1 into the command's cgroups, and only then lets it
go on. At the end, the pid 1 is killed and seen to exit: the kernel removes every other
process of a pid namespace before its pid 1 has exited, so nothing of the command is left.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal as signals
from collections.abc import Callable
from typing import Final

import msgspec
import trio

__all__ = [
    "REAP_SECONDS",
    "SandboxAdmission",
]

# A SIGKILLed pid 1 has exited (and with it every process of its namespace) in
# milliseconds; longer means the kernel is stuck, which is reported, not waited out.
REAP_SECONDS: Final = 5.0


class _Status(msgspec.Struct, frozen=True):
    """One document of ``bwrap --json-status-fd`` (other keys are ignored)."""

    child_pid: int | None = msgspec.field(name="child-pid", default=None)
    exit_code: int | None = msgspec.field(name="exit-code", default=None)


_STATUS_DECODER: Final = msgspec.json.Decoder(_Status)


class SandboxAdmission:
    """Holds one sandbox from its creation to its end, and reads bwrap's report.

    ``bwrap`` writes the pid of the sandbox's pid 1 to the status pipe as soon as it exists;
    that process then waits on the block pipe before it forks anything, so the pidfds opened
    here (for it and for its parent, bwrap's launcher) name those very processes. At the end
    the pid 1 is killed; once it has exited, the kernel has removed every other process of
    its pid namespace.
    """

    def __init__(
        self,
        status: trio.lowlevel.FdStream,
        block_write: int,
        *,
        uid: int,
        refusal: trio.CancelScope,
        enter: Callable[[int], None] | None,
    ) -> None:
        self._status = status
        self._block_write = block_write
        self._uid = uid
        self._refusal = refusal
        self._enter = enter
        self._pidfds: list[int] = []  # the sandbox's pid 1, then bwrap's launcher
        self.exit_code: int | None = None
        self.failure: str | None = None
        self.reported = trio.Event()
        """Set when the status pipe reached end of file."""

    async def admit(self) -> None:
        """Read bwrap's status documents; admit the sandbox when its pid 1 is named."""
        pending = bytearray()
        while chunk := await self._status.receive_some(4096):
            pending += chunk
            while (end := pending.find(b"\n")) >= 0:
                line = bytes(pending[:end])
                del pending[: end + 1]
                try:
                    status = _STATUS_DECODER.decode(line)
                except msgspec.DecodeError:
                    continue
                if status.child_pid is not None and not self._pidfds and self.failure is None:
                    self._admit(status.child_pid)
                if status.exit_code is not None:
                    self.exit_code = status.exit_code
        self.reported.set()

    def _admit(self, pid: int) -> None:
        pidfd = _open_pidfd(pid)
        # Checked with the pidfd open: if the process is alive after /proc was read, /proc
        # showed this very process, and a pidfd never reaches a later owner of the pid.
        launcher = _sandbox_init_parent(pid, self._uid) if pidfd is not None else None
        if pidfd is None or _has_exited(pidfd):
            # Its setup failed; the launcher exits by itself and reports why on stderr.
            if pidfd is not None:
                os.close(pidfd)
            self.failure = f"its pid 1 ({pid}) exited before it was admitted"
            return
        if launcher is None:
            os.close(pidfd)  # not provably the sandbox: never signal it
            self._refuse(f"pid {pid} is not the sandbox's pid 1")
            return
        self._pidfds.append(pidfd)
        launcher_pidfd = _open_pidfd(launcher)
        if launcher_pidfd is not None:
            self._pidfds.append(launcher_pidfd)
        # The pid 1 still being the launcher's child proves that pidfd names the launcher.
        if launcher_pidfd is None or _sandbox_init_parent(pid, self._uid) != launcher:
            self._refuse(f"its launcher ({launcher}) exited before it was admitted")
            return
        try:
            if self._enter is not None:
                self._enter(pid)  # into the command's cgroups, before it can fork
            os.write(self._block_write, b"\x01")
        except OSError as error:
            if _has_exited(pidfd):  # its setup failed meanwhile: as above
                self.failure = f"its pid 1 ({pid}) exited before it was admitted"
            else:
                self._refuse(f"its pid 1 ({pid}) could not be placed and released: {error}")

    def _refuse(self, failure: str) -> None:
        """Stop the launch: the host process is stopped, and :meth:`close` kills what is held."""
        self.failure = failure
        self._refusal.cancel()

    async def close(self) -> bool:
        """Kill the sandbox, wait until its pid 1 and launcher have exited, release the descriptors.

        Returns whether both exited within 5 s (``True`` when there was no sandbox).
        """
        pidfds, self._pidfds = self._pidfds, []
        exited = True
        try:
            for pidfd in pidfds:
                with contextlib.suppress(ProcessLookupError):
                    signals.pidfd_send_signal(pidfd, signals.SIGKILL)
            with trio.move_on_after(REAP_SECONDS) as waiting:
                for pidfd in pidfds:
                    await trio.lowlevel.wait_readable(pidfd)
                    _reap_if_ours(pidfd)
            exited = not waiting.cancelled_caught
        finally:
            for pidfd in pidfds:
                trio.lowlevel.notify_closing(pidfd)
                os.close(pidfd)
            await self._status.aclose()
            os.close(self._block_write)
        return exited


def _sandbox_init_parent(pid: int, uid: int) -> int | None:
    """The parent of ``pid`` if ``pid`` is pid 1 of a pid namespace below ours, run as ``uid``."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
    except OSError:
        return None
    namespace_pids = fields.get("NSpid", "").split()
    uids = fields.get("Uid", "").split()
    parent = fields.get("PPid", "").strip()
    if (
        len(namespace_pids) >= 2
        and namespace_pids[0] == str(pid)
        and namespace_pids[-1] == "1"
        and uids[:1] == [str(uid)]
        and parent.isdigit()
    ):
        return int(parent)
    return None


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None


def _reap_if_ours(pidfd: int) -> None:
    """Reap an exited process if it is our child (it never blocks).

    Orphans go to the host's init; when that is this process (pid 1 of a container), nobody
    else would reap them.
    """
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)


def _has_exited(pidfd: int) -> bool:
    readable, _, _ = select.select([pidfd], [], [], 0)
    return bool(readable)
