"""Running the test command (exit-gate.md §7): argv, new process group, bounded output."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from msgspec import UNSET

from harness_exit_gate._report import TestsRecord

__all__ = ["CommandResult", "run_test_command"]

_STREAM_CAP: Final = 16 * 1024 * 1024
_TAIL_LINES: Final = 30
_TAIL_BYTES: Final = 16 * 1024
_TERM_GRACE_S: Final = 1.0
_CLEANUP_WAIT_S: Final = 2.0
_SUMMARY: Final = re.compile(
    r"^=*\s*(?P<counts>\d+ \w+(?:, \d+ \w+)*) in [0-9.]+s(?: \([^)]*\))?\s*=*$", re.ASCII
)
_COUNT: Final = re.compile(r"(\d+) (\w+)", re.ASCII)
_COUNTED: Final = frozenset(("passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed"))


@dataclass(frozen=True, slots=True)
class CommandResult:
    """The ``tests`` record plus how the process ended."""

    record: TestsRecord
    spawned: bool
    timed_out: bool
    cleanup_confirmed: bool
    spawn_error: str | None


def _tail_bytes(handle: IO[bytes]) -> bytes:
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - _STREAM_CAP))
    return handle.read()


def output_tail(stdout: str, stderr: str) -> str:
    """The last 30 lines of stdout + newline + stderr, at most 16 KiB, prefixed ``…`` when cut."""
    lines = f"{stdout}\n{stderr}".splitlines()
    cut = len(lines) > _TAIL_LINES
    text = "\n".join(lines[-_TAIL_LINES:])
    encoded = text.encode("utf-8")
    if len(encoded) > _TAIL_BYTES - 3:
        text = encoded[-(_TAIL_BYTES - 3) :].decode("utf-8", "ignore")
        cut = True
    return f"…{text}" if cut else text


def pytest_counts(stdout: str) -> tuple[int, int, int] | None:
    """``(total, passed, failed)`` from pytest's last summary line, or ``None`` without one."""
    for line in reversed(stdout.splitlines()):
        match = _SUMMARY.match(line.strip())
        if match is None:
            continue
        counts = {kind: int(number) for number, kind in _COUNT.findall(match["counts"])}
        if not any(kind in _COUNTED for kind in counts):
            continue
        passed = counts.get("passed", 0)
        failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
        total = sum(number for kind, number in counts.items() if kind in _COUNTED)
        return total, passed, failed
    return None


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still answer signal 0; the group is gone when nothing in it is still running.
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def _kill_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def _confirm_cleanup(group: int) -> bool:
    _kill_group(group, signal.SIGKILL)
    deadline = time.monotonic() + _CLEANUP_WAIT_S
    while _group_alive(group):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def run_test_command(command: str, argv: tuple[str, ...], *, cwd: str, timeout_ms: int) -> CommandResult:
    """Run ``argv`` in ``cwd`` without a shell, in a new process group, bounded by ``timeout_ms``."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as stdout_file, tempfile.TemporaryFile() as stderr_file:
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=stdout_file,
                stderr=stderr_file,
                start_new_session=True,
            )
        except OSError as error:
            duration = round((time.monotonic() - started) * 1000)
            message = f"cannot start {argv[0]}: {error.strerror or error}"
            record = TestsRecord(
                command=command, exit_code=1, ok=False, duration_ms=duration, output_tail=message
            )
            return CommandResult(
                record=record, spawned=False, timed_out=False, cleanup_confirmed=True, spawn_error=message
            )
        timed_out = False
        try:
            process.wait(timeout=timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=_TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                _kill_group(process.pid, signal.SIGKILL)
                process.wait()
        cleanup_confirmed = _confirm_cleanup(process.pid)
        duration = round((time.monotonic() - started) * 1000)
        stdout = _tail_bytes(stdout_file).decode("utf-8", "replace")
        stderr = _tail_bytes(stderr_file).decode("utf-8", "replace")
    exit_code = process.returncode if not timed_out and process.returncode >= 0 else 1
    counts = pytest_counts(stdout)
    total, passed, failed = counts if counts is not None else (UNSET, UNSET, UNSET)
    record = TestsRecord(
        command=command,
        exit_code=exit_code,
        ok=exit_code == 0,
        duration_ms=duration,
        total=total,
        passed=passed,
        failed=failed,
        output_tail=output_tail(stdout, stderr),
    )
    return CommandResult(
        record=record,
        spawned=True,
        timed_out=timed_out,
        cleanup_confirmed=cleanup_confirmed,
        spawn_error=None,
    )
