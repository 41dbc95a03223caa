"""Limits of the git reader, and the budget one ``diff`` or ``snapshot`` spends as it works.

The reader runs in a worker thread that is never abandoned, so it must stop on its own: every
loop that can grow with the repository (objects read, directory entries, bytes hashed, diff
work) charges a :class:`Budget`, which raises a typed error past a limit, after the deadline,
or once the caller has asked it to stop (the workspace was disposed, or the call cancelled).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Final, NoReturn

from harness_workspace.local._errors import (
    WORKSPACE_DISPOSED,
    WORKSPACE_GIT_FAILED,
    WORKSPACE_GIT_TOO_LARGE,
    WORKSPACE_GIT_UNSUPPORTED,
    WORKSPACE_NOT_A_REPOSITORY,
    LocalWorkspaceError,
)

__all__ = ["Budget", "ReaderLimits"]

_MIB: Final = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class ReaderLimits:
    """Bounds on what one ``diff`` or ``snapshot`` may read, hash and compute.

    Attributes:
        max_object_bytes: The largest object (or work-tree file) held in memory whole.
        max_entries: Directory entries walked plus tree entries read, together.
        max_hashed_bytes: Bytes of work-tree files hashed in one call.
        max_metadata_bytes: The largest ``.git/config``, ``HEAD``, ref or ``.gitignore``.
        max_packed_refs_bytes: The largest ``packed-refs`` file.
        max_index_bytes: The largest pack index (``.idx``) file.
        max_packs: Pack files considered.
        max_delta_depth: Deltas followed to reach one object.
        max_depth: Nested directories below the root (and nested trees in ``HEAD``).
        max_diff_cost: Steps of the line diff of one file before it gives up on a
            minimal patch and shows the changed middle as removed and added.
        cache_bytes: Bytes of pack objects kept for delta bases.
    """

    max_object_bytes: int = 64 * _MIB
    max_entries: int = 500_000
    max_hashed_bytes: int = 4096 * _MIB
    max_metadata_bytes: int = 8 * _MIB
    max_packed_refs_bytes: int = 256 * _MIB
    max_index_bytes: int = 512 * _MIB
    max_packs: int = 4096
    max_delta_depth: int = 10_000
    max_depth: int = 256
    max_diff_cost: int = 4_000_000
    cache_bytes: int = 32 * _MIB


class Budget:
    """What one reader call may still spend, and its typed failures.

    Args:
        operation: ``"diff"`` or ``"snapshot"``, carried by every error.
        limits: The bounds.
        timeout_ms: The time the whole call may take.
        stop: Set by another thread to make the call give up at its next check.
    """

    __slots__ = ("_deadline", "_entries", "_hashed", "_stop", "_timeout_ms", "limits", "operation")

    def __init__(
        self, operation: str, limits: ReaderLimits, *, timeout_ms: int, stop: threading.Event | None = None
    ) -> None:
        self.operation = operation
        self.limits = limits
        self._timeout_ms = timeout_ms
        self._deadline = time.monotonic() + timeout_ms / 1000
        self._stop = stop
        self._entries = 0
        self._hashed = 0

    def check(self) -> None:
        """Raise if the call was asked to stop or its time is up."""
        if self._stop is not None and self._stop.is_set():
            raise LocalWorkspaceError(
                WORKSPACE_DISPOSED, "workspace was disposed while running", self.operation
            )
        if time.monotonic() > self._deadline:
            self.fail(f"took longer than {self._timeout_ms} ms")

    def entries(self, count: int = 1) -> None:
        """Charge ``count`` walked or read entries."""
        self._entries += count
        if self._entries > self.limits.max_entries:
            self.too_large(f"more than {self.limits.max_entries} files, folders and tree entries")

    def hashed(self, size: int) -> None:
        """Charge ``size`` bytes of work-tree content about to be hashed."""
        self._hashed += size
        if self._hashed > self.limits.max_hashed_bytes:
            self.too_large(f"more than {self.limits.max_hashed_bytes} bytes of files to hash")

    def object_size(self, size: int, what: str) -> None:
        """Refuse an object (or file) larger than the in-memory bound."""
        if size > self.limits.max_object_bytes:
            self.too_large(f"{what} has {size} bytes, more than {self.limits.max_object_bytes}")

    def failure(self, message: str) -> LocalWorkspaceError:
        """Return the ``WORKSPACE_GIT_FAILED`` error: corrupt or missing data, or the deadline."""
        return LocalWorkspaceError(WORKSPACE_GIT_FAILED, f"{self.operation}: {message}", self.operation)

    def fail(self, message: str) -> NoReturn:
        """Raise :meth:`failure`."""
        raise self.failure(message)

    def too_large(self, message: str) -> NoReturn:
        """Raise ``WORKSPACE_GIT_TOO_LARGE``: a bound of the reader was reached."""
        raise LocalWorkspaceError(WORKSPACE_GIT_TOO_LARGE, f"{self.operation}: {message}", self.operation)

    def unsupported(self, message: str) -> NoReturn:
        """Raise ``WORKSPACE_GIT_UNSUPPORTED``: a layout or format the reader refuses."""
        raise LocalWorkspaceError(WORKSPACE_GIT_UNSUPPORTED, f"{self.operation}: {message}", self.operation)

    def not_a_repository(self, message: str) -> NoReturn:
        """Raise ``WORKSPACE_NOT_A_REPOSITORY``."""
        raise LocalWorkspaceError(
            WORKSPACE_NOT_A_REPOSITORY, f"{self.operation}: not a git repository: {message}", self.operation
        )
