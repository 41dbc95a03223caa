"""The disposable copy of a source tree, made without following a link or copying a credential.

The walk holds directory descriptors and opens every name with ``O_NOFOLLOW`` relative to its
parent, so a source that changes under it cannot redirect the copy elsewhere. Regular files
are copied by content, symbolic links as links (never followed; inside the sandbox they
resolve in the sandbox's own filesystem, and host-side reads refuse them), directories
recursively, at most :data:`MAX_COPY_DEPTH` levels deep; FIFOs, sockets and devices are
skipped. Paths that match the credential deny list (``harness_workspace.credentials``, the
list host reads withhold too) are skipped (or refuse the copy); ``.git/config`` is copied
scrubbed of credentials.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from harness_sandbox._errors import (
    SANDBOX_COPY_FAILED,
    SANDBOX_DISK_LIMIT,
    SANDBOX_SOURCE_INVALID,
    SandboxError,
)
from harness_workspace.credentials import (
    CREDENTIAL_PATTERNS,
    is_credential_path,
    is_git_config_path,
    scrub_git_config,
)

__all__ = [
    "DEFAULT_DENY",
    "MAX_COPY_DEPTH",
    "CopyReport",
    "DeniedPolicy",
    "copy_tree",
    "remove_tree",
    "tree_bytes",
]

DEFAULT_DENY: Final[tuple[str, ...]] = CREDENTIAL_PATTERNS
"""Paths never copied into a sandbox: ``harness_workspace.credentials.CREDENTIAL_PATTERNS``."""
MAX_COPY_DEPTH: Final = 128
"""The most directories nested in a source tree copied; a deeper tree refuses the copy."""

DeniedPolicy = Literal["skip", "refuse"]
"""What a denied name does: it is left out (and reported), or the copy is refused."""

_CHUNK: Final = 1024 * 1024
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class CopyReport:
    """What :func:`copy_tree` did."""

    bytes: int = 0
    """Bytes of regular files copied."""
    files: int = 0
    skipped: list[str] = field(default_factory=list[str])
    """Relative paths left out: denied names and special files."""
    sanitized: list[str] = field(default_factory=list[str])
    """Relative paths copied with credentials removed (``.git/config``)."""


def copy_tree(
    source: str,
    destination: str,
    *,
    deny: tuple[str, ...] = DEFAULT_DENY,
    denied: DeniedPolicy = "skip",
    max_bytes: int,
    owner: tuple[int, int] | None,
    existing: bool = False,
) -> CopyReport:
    """Copy the tree at ``source`` into the new directory ``destination``.

    Args:
        source: The source tree (a folder or a git checkout); a link here is followed (the
            operator named it), nothing below it is.
        destination: Must not exist (created with mode 0700), unless ``existing``: then an
            empty directory (a mount point) the caller removes on failure.
        deny: Path patterns to leave out (``harness_workspace.credentials`` syntax:
            ``/``-separated components, case-insensitive).
        denied: ``"skip"`` or ``"refuse"`` for a denied name.
        max_bytes: The copy's byte budget (its regular files).
        owner: ``(uid, gid)`` to give every copied entry (needs root), or ``None``.

    Raises:
        SandboxError: ``SANDBOX_SOURCE_INVALID`` (also for a tree deeper than
            :data:`MAX_COPY_DEPTH`), ``SANDBOX_COPY_FAILED`` (also for a denied name under
            ``"refuse"``) or ``SANDBOX_DISK_LIMIT``; whatever was copied is removed again.
    """
    try:
        source_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise SandboxError(
            SANDBOX_SOURCE_INVALID, f"source tree {source!r} is not a readable directory: {error}", "create"
        ) from error
    report = CopyReport()
    try:
        if not existing:
            os.mkdir(destination, 0o700)
        target_fd = os.open(destination, _DIR_FLAGS)
        try:
            _Copier(deny, denied, max_bytes, owner, report).directory(source_fd, target_fd, "", 0)
            if owner is not None:
                os.fchown(target_fd, *owner)
        finally:
            os.close(target_fd)
    except BaseException as error:
        if not existing:
            remove_tree(destination)
        if isinstance(error, OSError):
            raise SandboxError(
                SANDBOX_COPY_FAILED, f"copying {source!r} failed: {error}", "create"
            ) from error
        raise
    finally:
        os.close(source_fd)
    return report


class _Copier:
    def __init__(
        self,
        deny: tuple[str, ...],
        denied: DeniedPolicy,
        max_bytes: int,
        owner: tuple[int, int] | None,
        report: CopyReport,
    ) -> None:
        self._deny = deny
        self._denied = denied
        self._max_bytes = max_bytes
        self._owner = owner
        self._report = report

    def directory(self, source_fd: int, target_fd: int, prefix: str, depth: int) -> None:
        if depth > MAX_COPY_DEPTH:
            raise SandboxError(
                SANDBOX_SOURCE_INVALID,
                f"the source tree is nested deeper than {MAX_COPY_DEPTH} directories (at {prefix[:200]!r}…)",
                "create",
            )
        with os.scandir(source_fd) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            relative = f"{prefix}{name}"
            info = os.stat(name, dir_fd=source_fd, follow_symlinks=False)
            if is_credential_path(relative, self._deny):
                if self._denied == "refuse":
                    raise SandboxError(
                        SANDBOX_COPY_FAILED, f"the source holds a denied file: {relative!r}", "create"
                    )
                self._report.skipped.append(relative)
            elif stat.S_ISDIR(info.st_mode):
                self._subdirectory(source_fd, target_fd, name, relative, info.st_mode, depth=depth)
            elif stat.S_ISREG(info.st_mode):
                self._file(source_fd, target_fd, name, relative, info.st_mode)
            elif stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(name, dir_fd=source_fd), name, dir_fd=target_fd)
                self._chown(name, target_fd)
            else:
                self._report.skipped.append(relative)

    def _subdirectory(
        self, source_fd: int, target_fd: int, name: str, relative: str, mode: int, *, depth: int
    ) -> None:
        child_source = os.open(name, _DIR_FLAGS, dir_fd=source_fd)
        try:
            os.mkdir(name, stat.S_IMODE(mode) | 0o700, dir_fd=target_fd)
            child_target = os.open(name, _DIR_FLAGS, dir_fd=target_fd)
            try:
                self.directory(child_source, child_target, f"{relative}/", depth + 1)
                if self._owner is not None:
                    os.fchown(child_target, *self._owner)
            finally:
                os.close(child_target)
        finally:
            os.close(child_source)

    def _file(self, source_fd: int, target_fd: int, name: str, relative: str, mode: int) -> None:
        if is_git_config_path(relative):
            self._git_config(source_fd, target_fd, name, relative, mode)
            return
        reader = os.open(name, _FILE_FLAGS, dir_fd=source_fd)
        try:
            if not stat.S_ISREG(os.fstat(reader).st_mode):
                self._report.skipped.append(relative)
                return
            writer = os.open(name, _CREATE_FLAGS, stat.S_IMODE(mode) | 0o600, dir_fd=target_fd)
            try:
                while chunk := os.read(reader, _CHUNK):
                    self._count(len(chunk))
                    os.write(writer, chunk)
                if self._owner is not None:
                    os.fchown(writer, *self._owner)
            finally:
                os.close(writer)
        finally:
            os.close(reader)
        self._report.files += 1

    def _git_config(self, source_fd: int, target_fd: int, name: str, relative: str, mode: int) -> None:
        reader = os.open(name, _FILE_FLAGS, dir_fd=source_fd)
        try:
            data = b""
            while chunk := os.read(reader, _CHUNK):
                self._count(len(chunk))
                data += chunk
        finally:
            os.close(reader)
        cleaned = scrub_git_config(data.decode("utf-8", errors="replace"))
        writer = os.open(name, _CREATE_FLAGS, stat.S_IMODE(mode) | 0o600, dir_fd=target_fd)
        try:
            os.write(writer, cleaned.encode())
            if self._owner is not None:
                os.fchown(writer, *self._owner)
        finally:
            os.close(writer)
        self._report.files += 1
        self._report.sanitized.append(relative)

    def _count(self, size: int) -> None:
        self._report.bytes += size
        if self._report.bytes > self._max_bytes:
            raise SandboxError(
                SANDBOX_DISK_LIMIT,
                f"the source tree holds more than the disk limit of {self._max_bytes} bytes",
                "create",
            )

    def _chown(self, name: str, dir_fd: int) -> None:
        if self._owner is not None:
            os.chown(name, *self._owner, dir_fd=dir_fd, follow_symlinks=False)


def tree_bytes(path: str) -> int:
    """Bytes held by the regular files below ``path`` (links not followed); 0 if it is gone.

    Walked like :func:`remove_tree` (one descriptor, no recursion), so any depth is counted.
    """
    total = 0

    def count(dir_fd: int) -> list[str]:
        nonlocal total
        directories: list[str] = []
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    directories.append(entry.name)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
        return directories

    tolerated = (errno.ENOENT, errno.ENOTDIR, errno.EACCES)
    try:
        _walk_down(path, count, None, skip=tolerated)
    except OSError as error:
        if error.errno not in tolerated:
            raise
    return total


def remove_tree(path: str) -> None:
    """Remove ``path`` and everything below it, never following a link; a missing path is fine.

    Raises:
        OSError: An entry could not be removed, or a directory moved while it was removed.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return
    # Directories the sandbox made read-only still have to go.
    os.chmod(path, 0o700)
    _walk_down(path, _remove_files, lambda parent_fd, name: os.rmdir(name, dir_fd=parent_fd))
    os.rmdir(path)


def _walk_down(
    path: str,
    enter: Callable[[int], list[str]],
    leave: Callable[[int, str], None] | None,
    *,
    skip: tuple[int, ...] = (),
) -> None:
    """Walk the directories below ``path`` depth first, holding one descriptor.

    ``enter(fd)`` names the subdirectories of ``fd`` to visit; ``leave(parent_fd, name)`` runs
    once a subdirectory is done. A subdirectory that cannot be opened with an errno in
    ``skip`` is passed over. The walk climbs back through ``..`` and checks it is the
    directory it came from, so neither the recursion limit, the descriptor limit nor
    ``PATH_MAX`` bounds the depth (a sandbox may nest thousands deep). No link is followed.

    Raises:
        OSError: A directory could not be opened, or one moved during the walk (``ESTALE``).
    """
    fd = os.open(path, _DIR_FLAGS)
    try:
        # Per directory on the way down: its identity, its name in its parent, the
        # subdirectories still to visit.
        frames = [(_identity(fd), "", enter(fd))]
        while frames:
            _, name, pending = frames[-1]
            if pending:
                child = pending.pop()
                try:
                    child_fd = os.open(child, _DIR_FLAGS, dir_fd=fd)
                except OSError as error:
                    if error.errno not in skip:
                        raise
                    continue
                os.close(fd)
                fd = child_fd
                frames.append((_identity(fd), child, enter(fd)))
                continue
            frames.pop()
            if not frames:
                break
            parent_fd = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent_fd
            if _identity(fd) != frames[-1][0]:
                raise OSError(errno.ESTALE, f"a directory moved while {path!r} was walked")
            if leave is not None:
                leave(fd, name)
    finally:
        os.close(fd)


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _remove_files(dir_fd: int) -> list[str]:
    """Unlink every entry of ``dir_fd`` but its subdirectories; return their names."""
    with os.scandir(dir_fd) as entries:
        found = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_directory in found:
        if is_directory:
            # Directories the sandbox made read-only still have to go.
            os.chmod(name, 0o700, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)
    return [name for name, is_directory in found if is_directory]
