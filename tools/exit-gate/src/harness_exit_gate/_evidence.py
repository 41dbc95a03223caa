"""Evidence on disk (exit-gate.md §9): the run directory, the SQLite companion, atomic report writes."""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import trio

from harness_kernel.events import Event
from harness_kernel.store import SessionStoreError, SqliteSessionStore

__all__ = [
    "EvidenceError",
    "fallback_directory",
    "persist_companion",
    "prepare_run_directory",
    "write_atomically",
]

_SQLITE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")


class EvidenceError(Exception):
    """Evidence could not be written; the message says where and why."""


def _real_directory(path: Path, *, create: bool) -> None:
    if create:
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise EvidenceError(f"cannot create {path}: {error.strerror}") from None
    try:
        info = path.lstat()
    except OSError as error:
        raise EvidenceError(f"cannot inspect {path}: {error.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise EvidenceError(f"{path} must be a real directory, not a symlink or file")


def prepare_run_directory(root: str, run_id: str) -> Path:
    """Create ``tasks/runs/<runId>/`` (mode 0700), refusing symlinked or non-directory parts.

    Raises:
        EvidenceError: a part is not a real directory or cannot be created.
    """
    tasks = Path(root) / "tasks"
    _real_directory(tasks, create=False)
    _real_directory(tasks / "runs", create=True)
    run_directory = tasks / "runs" / run_id
    _real_directory(run_directory, create=True)
    return run_directory


def fallback_directory() -> Path:
    """A fresh private temp directory for a report that could not go to its canonical place.

    Raises:
        EvidenceError: the directory cannot be created.
    """
    try:
        return Path(tempfile.mkdtemp(prefix="harness-exit-gate-runs-"))
    except OSError as error:
        raise EvidenceError(f"cannot create a fallback directory: {error.strerror}") from None


def _check_sqlite_files(database: Path) -> None:
    for suffix in _SQLITE_SUFFIXES:
        candidate = database.with_name(database.name + suffix)
        try:
            info = candidate.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise EvidenceError(f"{candidate} must be a single-link regular file")


async def _persist(
    database: Path, session_id: str, task_id: str | None, created_at: str, events: Sequence[Event]
) -> None:
    async with SqliteSessionStore(database) as store:
        await store.create(session_id, task_id=task_id, created_at=created_at)
        for event in events:
            await store.append(session_id, event)
        await store.close(session_id)


def persist_companion(
    database: Path, *, session_id: str, task_id: str | None, created_at: str, events: Sequence[Event]
) -> None:
    """Store ``events`` in a new, then closed, SQLite session through the kernel's store.

    Raises:
        EvidenceError: the store or a file check failed.
    """
    try:
        _check_sqlite_files(database)
        trio.run(_persist, database, session_id, task_id, created_at, events)
        _check_sqlite_files(database)
    except (SessionStoreError, sqlite3.Error, OSError) as error:
        raise EvidenceError(f"cannot persist the session companion: {error}") from None


def write_atomically(directory: Path, name: str, data: bytes) -> Path:
    """Write ``directory/name`` via an exclusive temp file, fsync and rename, then read it back.

    Raises:
        EvidenceError: any step failed or the file reads back differently.
    """
    target = directory / name
    temporary = directory / f".{name}.{os.getpid()}.tmp"
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(descriptor, view)
                view = view[written:]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        temporary.replace(target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise EvidenceError(f"cannot write {target}: {error.strerror}") from None
    try:
        directory_descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_descriptor)
        finally:
            os.close(directory_descriptor)
    except OSError:
        pass  # a directory fsync is best-effort (exit-gate.md §9.3)
    try:
        if target.read_bytes() != data:
            raise EvidenceError(f"{target} reads back differently")
    except OSError as error:
        raise EvidenceError(f"cannot read back {target}: {error.strerror}") from None
    return target
