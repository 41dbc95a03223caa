"""Reading inside ``.git`` through descriptors, without ever following a symlink.

``.git`` must be a real directory at the root. Every file below it is opened with the
adapter's component walk (``O_NOFOLLOW`` at every step) relative to the ``.git`` descriptor,
so an ``objects``, ``refs``, ``HEAD``, ``packed-refs`` or pack that is a symlink is refused
with a typed error instead of being followed, wherever it points. Files are opened
non-blocking and must be regular (a FIFO never blocks the reader), and reads are capped.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Final

from harness_workspace.local._git.bounds import Budget
from harness_workspace.local._paths import Components, PathResolver, fail_os

__all__ = ["GitDirectory", "read_capped"]

_FILE_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY
_MISSING: Final = frozenset({errno.ENOENT, errno.ENOTDIR})
_NO_SYMLINKS: Final = PathResolver("walk")
_CHUNK: Final = 1024 * 1024


def read_capped(fd: int, cap: int, budget: Budget, what: str) -> bytes:
    """Read the regular file behind ``fd`` whole, refusing more than ``cap`` bytes."""
    size = os.fstat(fd).st_size
    if size > cap:
        budget.too_large(f"{what} has {size} bytes, more than {cap}")
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(cap + 1 - total, max(size - total + 1, _CHUNK)))
        if not chunk:
            break
        total += len(chunk)
        if total > cap:  # grew while being read
            budget.too_large(f"{what} has more than {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class GitDirectory:
    """The root's ``.git`` directory, opened once, with symlink-refusing access below it.

    Args:
        root_fd: The workspace root descriptor; not closed.
        budget: The call's budget, for its typed errors.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_NOT_A_REPOSITORY`` when the root has no ``.git``
            directory (a gitfile or a link is refused the same way), ``WORKSPACE_IO_FAILED``.
    """

    __slots__ = ("_budget", "fd")

    def __init__(self, root_fd: int, budget: Budget) -> None:
        self._budget = budget
        try:
            self.fd = os.open(".git", _DIRECTORY_FLAGS | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
        except OSError as error:
            if error.errno in _MISSING:
                budget.not_a_repository("the workspace root has no .git directory")
            if error.errno == errno.ELOOP:
                budget.not_a_repository("the root's .git is a link, not a directory")
            fail_os(error, ".git", budget.operation)

    def close(self) -> None:
        """Close the ``.git`` descriptor."""
        os.close(self.fd)

    def _open(self, parts: Components, flags: int) -> int | None:
        try:
            return _NO_SYMLINKS.open(self.fd, parts, flags, follow_final=False)
        except OSError as error:
            if error.errno in _MISSING:
                return None
            fail_os(error, _display(parts), self._budget.operation)

    def read(self, parts: Components, cap: int) -> bytes | None:
        """Return the bytes of the regular file ``.git/<parts>``, or ``None`` if it does not exist.

        A directory where a file is expected counts as missing (as git treats a ref path).

        Raises:
            LocalWorkspaceError: a symlink on the way (``WORKSPACE_SYMLINK_REFUSED`` or
                ``WORKSPACE_PATH_ESCAPES_ROOT``), a FIFO, device or socket
                (``WORKSPACE_NOT_A_FILE``), a file over ``cap`` (``WORKSPACE_GIT_TOO_LARGE``).
        """
        fd = self._open(parts, _FILE_FLAGS)
        if fd is None:
            return None
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                return None
            if not stat.S_ISREG(mode):
                fail_os(OSError(errno.ENXIO, "not a regular file"), _display(parts), self._budget.operation)
            return read_capped(fd, cap, self._budget, _display(parts))
        except OSError as error:
            fail_os(error, _display(parts), self._budget.operation)
        finally:
            os.close(fd)

    def open_file(self, parts: Components) -> int:
        """Open the regular file ``.git/<parts>`` for reading; the caller closes it.

        Raises:
            LocalWorkspaceError: as :meth:`read`, and ``WORKSPACE_GIT_FAILED`` if it is missing.
        """
        fd = self._open(parts, _FILE_FLAGS)
        if fd is None:
            self._budget.fail(f"{_display(parts)} disappeared")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                fail_os(OSError(errno.ENXIO, "not a regular file"), _display(parts), self._budget.operation)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_directory(self, parts: Components) -> int | None:
        """Open the directory ``.git/<parts>``; ``None`` if it does not exist. The caller closes it."""
        return self._open(parts, _DIRECTORY_FLAGS)

    def exists(self, parts: Components) -> bool:
        """Whether anything at all (file, folder, symlink, FIFO) is at ``.git/<parts>``."""
        parent = self._open(parts[:-1], os.O_PATH | os.O_DIRECTORY)
        if parent is None:
            return False
        try:
            os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except OSError as error:
            if error.errno in _MISSING:
                return False
            fail_os(error, _display(parts), self._budget.operation)
        finally:
            os.close(parent)
        return True


def _display(parts: Components) -> str:
    return "/".join((".git", *parts))
