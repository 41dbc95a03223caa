"""Measurements of a process (this one or the server subprocess) read from ``/proc`` and trio."""

from __future__ import annotations

import os
import resource
import sqlite3
from collections.abc import Callable
from pathlib import Path

import trio


def _status_kib(pid: int | str, field: str) -> int:
    """One ``KiB`` field of ``/proc/<pid>/status`` (0 where the process does not exist)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kib(pid: int | str = "self") -> int:
    """The resident set size from ``/proc/<pid>/status`` (0 where it does not exist)."""
    return _status_kib(pid, "VmRSS")


def vm_hwm_kib(pid: int | str = "self") -> int:
    """The peak resident set size (``VmHWM``) of process ``pid`` (0 where it does not exist)."""
    return _status_kib(pid, "VmHWM")


def reset_peak_rss(pid: int | str = "self") -> None:
    """Start ``VmHWM`` of process ``pid`` again from its current RSS (Linux ``clear_refs`` 5).

    So each level's peak is its own, not the highest of every level before it.
    """
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def cpu_seconds(pid: int | str = "self") -> float:
    """User plus system CPU time of process ``pid``, every thread included (``/proc/<pid>/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid: int | str = "self") -> int:
    """How many file descriptors process ``pid`` holds open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def peak_rss_mib() -> float:
    """This process's peak resident set size, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` of the sorted ``values`` (NaN when there are none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def trio_task_count() -> int:
    """Every live task of this trio run, found by walking the task tree from the root."""
    count = 0
    root = trio.lowlevel.current_root_task()
    assert root is not None
    pending = [root]
    while pending:
        task = pending.pop()
        count += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count


def active_rows(db: Path) -> int:
    """Sessions the store at ``db`` still holds as active."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as database:
        return int(database.execute("SELECT count(*) FROM sessions WHERE status = 'active'").fetchone()[0])


async def settle(measure: Callable[[], int], baseline: int, seconds: float) -> int:
    """``measure()`` once it is back to ``baseline``, or its value after ``seconds``."""
    value = measure()
    with trio.move_on_after(seconds):
        while value > baseline:
            await trio.sleep(0.05)
            value = measure()
    return value
