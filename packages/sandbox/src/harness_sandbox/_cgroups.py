"""cgroup v1 limits for the bubblewrap engine, where this process may create cgroups (as root).

rlimits are the floor; where the ``memory``, ``pids`` and ``cpu`` hierarchies of cgroup v1
are writable, each command also gets a cgroup of its own in each, below this process's own
cgroup (so the host's limits on this process still hold), entered by the sandbox's pid 1
before anything of the command runs:

- ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is accounted) =
  ``memory_bytes``: everything the command's processes use together, tmpfs and shared
  memory included; past it the kernel's OOM killer kills a process (exit 137);
- ``pids.max`` = ``pids``, the same bound as ``RLIMIT_NPROC``;
- ``cpu.cfs_quota_us`` = ``cpus`` x ``cpu.cfs_period_us``: a rate, as Docker's ``--cpus``.

A cgroup is removed once the sandbox's pid 1 has exited. One a killed process left behind
is removed by the next engine's :func:`cgroup_parents`, wherever it is in the hierarchy (the
next process may sit in another cgroup than the dead one did): its name carries its owner's
pid and start time, and when that process is gone whatever still runs in the cgroup (a
sandbox waiting for its backstop) is killed and the cgroup removed.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import signal
import time
from collections.abc import Mapping
from typing import Final

from harness_sandbox._limits import SandboxLimits
from harness_sandbox._supervise import owner_alive, process_start_time

__all__ = ["CommandCgroup", "cgroup_parents"]

_MOUNT: Final = "/sys/fs/cgroup"
_CONTROLLERS: Final = ("memory", "pids", "cpu")
_PREFIX: Final = "harness-sbx-"
# harness-sbx-<owner pid>-<owner start time>-<n> (names without the start time are older).
_LEFTOVER: Final = re.compile(rf"{_PREFIX}(\d+)-(?:(\d+)-)?\d+")
_EMPTY_SECONDS: Final = 2.0
_CPU_PERIOD_US: Final = 100_000
_names = itertools.count()


def cgroup_parents() -> dict[str, str]:
    """The directories, per controller, where this process may create cgroups; empty if none.

    Only for root, and only for hierarchies mounted as cgroup v1 under ``/sys/fs/cgroup``.
    Removes the cgroups that dead owners left anywhere in those hierarchies.
    """
    if os.geteuid() != 0:
        return {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            own = _own_cgroups(handle.read())
    except OSError:
        return {}
    parents: dict[str, str] = {}
    for controller in _CONTROLLERS:
        if controller not in own:
            continue
        directory = os.path.join(_MOUNT, controller, own[controller].lstrip("/"))
        if os.path.isfile(os.path.join(directory, "cgroup.procs")) and os.access(directory, os.W_OK):
            parents[controller] = directory
            _remove_leftovers(os.path.join(_MOUNT, controller))
    return parents


def _own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as ``{controller: path}`` (``4:memory:/a`` or ``1:cpu,cpuacct:/b``)."""
    cgroups: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1]:
            for controller in parts[1].split(","):
                cgroups[controller] = parts[2]
    return cgroups


def _remove_leftovers(hierarchy: str) -> None:
    """Remove every command cgroup in ``hierarchy`` whose owner is gone, killing what runs in it."""
    for directory, children, _ in os.walk(hierarchy):
        for name in list(children):
            match = _LEFTOVER.fullmatch(name)
            if match is None:
                continue
            children.remove(name)  # a command cgroup has no cgroups below it
            start = match.group(2)
            if not owner_alive(int(match.group(1)), None if start is None else int(start)):
                _remove_dead(os.path.join(directory, name))


def _remove_dead(cgroup: str) -> None:
    """Kill the processes of a dead owner's cgroup (only a sandbox enters one) and remove it."""
    deadline = time.monotonic() + _EMPTY_SECONDS
    while True:
        try:
            os.rmdir(cgroup)
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() > deadline:
                return  # still busy: the next sweep tries again
        with contextlib.suppress(OSError):
            with open(os.path.join(cgroup, "cgroup.procs"), encoding="ascii") as handle:
                pids = [int(line) for line in handle.read().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


class CommandCgroup:
    """One command's cgroups, one per controller; create, :meth:`enter`, :meth:`remove`.

    Args:
        parents: From :func:`cgroup_parents`; not empty.
        limits: The workspace's limits.

    Raises:
        OSError: A cgroup could not be created or configured (what was created is removed).
    """

    def __init__(self, parents: Mapping[str, str], limits: SandboxLimits) -> None:
        owner = os.getpid()
        name = f"{_PREFIX}{owner}-{process_start_time(owner)}-{next(_names)}"
        self._directories: list[str] = []
        quota = max(1000, round(limits.cpus * _CPU_PERIOD_US))
        settings = {
            "memory": [
                ("memory.limit_in_bytes", limits.memory_bytes),
                ("memory.memsw.limit_in_bytes", limits.memory_bytes),
            ],
            "pids": [("pids.max", limits.pids)],
            "cpu": [("cpu.cfs_period_us", _CPU_PERIOD_US), ("cpu.cfs_quota_us", quota)],
        }
        try:
            for controller, parent in parents.items():
                directory = os.path.join(parent, name)
                os.mkdir(directory)
                self._directories.append(directory)
                for setting, value in settings[controller]:
                    path = os.path.join(directory, setting)
                    if setting == "memory.memsw.limit_in_bytes" and not os.path.exists(path):
                        continue  # swap is not accounted here: memory.limit_in_bytes is the bound
                    _write(path, value)
        except OSError:
            self.remove()
            raise

    def enter(self, pid: int) -> None:
        """Move ``pid`` (and so everything it will start) into every cgroup.

        Raises:
            OSError: The move was refused.
        """
        for directory in self._directories:
            _write(os.path.join(directory, "cgroup.procs"), pid)

    def remove(self) -> bool:
        """Remove the cgroups (their processes have exited); return whether all are gone."""
        removed = True
        for directory in reversed(self._directories):
            try:
                os.rmdir(directory)
            except FileNotFoundError:
                pass
            except OSError as error:
                removed = False
                if error.errno != errno.EBUSY:
                    raise
        self._directories.clear()
        return removed


def _write(path: str, value: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(descriptor, str(value).encode())
    finally:
        os.close(descriptor)
