"""A pre-warmed zygote: imports the workloads once, then forks one grandchild per trial.

Run as ``python crash_zygote.py --path DIR --module NAME …``; the parent speaks JSON lines:

- parent → zygote (stdin): ``{"trial": N, "workload": NAME, "params": {…}, "kill_after": S | null}``
  starts a trial; ``{"kill": N}`` kills trial N's grandchild now (it is ignored once it exited).
- zygote → parent (stdout): ``{"ready": true}`` once; per trial ``{"trial": N, "pid": PID}``,
  whatever the grandchild reports (it writes to the same pipe, one ``os.write`` per line, so
  lines never interleave), and ``{"trial": N, "exit": CODE | null, "signal": SIG | null,
  "killed": "timer" | "parent" | null, "killed_at": T | null, "elapsed": S}`` after it is
  reaped (``T`` is ``time.monotonic()``, a clock every process on the machine shares).

The zygote never runs trio (a grandchild starts its own ``trio.run``), so forking is safe. It
waits on a pidfd, so a kill can never hit a recycled pid, and it reaps every grandchild
before it reads the next command. It exits when its stdin closes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

Report = Callable[..., None]
Workload = Callable[[dict[str, Any], Report], None]


def emit(document: dict[str, Any]) -> None:
    """One JSON line on stdout in a single ``write`` (atomic on a pipe below PIPE_BUF)."""
    os.write(1, (json.dumps(document, separators=(",", ":")) + "\n").encode())


class _Lines:
    """Unbuffered line reader over a file descriptor, safe to mix with ``select``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""
        self.eof = False

    def has_line(self) -> bool:
        return b"\n" in self._buffer

    def fill(self) -> None:
        chunk = os.read(self.fd, 65_536)
        if not chunk:
            self.eof = True
        self._buffer += chunk

    def pop(self) -> dict[str, Any] | None:
        if b"\n" not in self._buffer:
            return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def next_blocking(self) -> dict[str, Any] | None:
        while not self.has_line():
            if self.eof:
                return None
            self.fill()
        return self.pop()


def _grandchild(workload: Workload, trial: int, params: dict[str, Any]) -> None:
    def report(**fields: Any) -> None:
        emit({"trial": trial, **fields})

    code = 0
    try:
        workload(params, report)
    except BaseException:
        report(error=traceback.format_exc())
        code = 1
    os._exit(code)


def _run_trial(command: dict[str, Any], workloads: dict[str, Workload], commands: _Lines) -> bool:
    """Fork, kill on time or on request, reap; False when stdin closed meanwhile."""
    trial: int = command["trial"]
    kill_after: float | None = command.get("kill_after")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _grandchild(workloads[command["workload"]], trial, command["params"])
    emit({"trial": trial, "pid": pid})
    pidfd = os.pidfd_open(pid)
    killed: str | None = None
    killed_at: float | None = None
    open_input = True
    try:
        deadline = None if kill_after is None else start + kill_after
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            watched = [pidfd, commands.fd] if open_input else [pidfd]
            readable, _, _ = select.select(watched, [], [], timeout)
            if pidfd in readable:
                break
            if commands.fd in readable:
                commands.fill()
                while (request := commands.pop()) is not None:
                    if request.get("kill") == trial and killed is None:
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                        killed, killed_at = "parent", time.monotonic()
                if commands.eof:
                    open_input = False
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            if not readable and deadline is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                killed, killed_at, deadline = "timer", time.monotonic(), None
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(pidfd)
    emit(
        {
            "trial": trial,
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "killed": killed,
            "killed_at": killed_at,
            "elapsed": time.monotonic() - start,
        }
    )
    return open_input


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--path", action="append", default=[])
    parser.add_argument("--module", action="append", default=[])
    options = parser.parse_args()
    for path in options.path:
        sys.path.insert(0, path)
    workloads: dict[str, Workload] = {}
    for name in options.module:
        workloads.update(importlib.import_module(name).WORKLOADS)
    commands = _Lines(0)
    emit({"ready": True})
    while (command := commands.next_blocking()) is not None:
        if "kill" in command:
            continue  # a late kill for a trial that already ended
        if not _run_trial(command, workloads, commands):
            break


if __name__ == "__main__":
    main()
