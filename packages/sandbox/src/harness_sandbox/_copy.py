"""The disposable copy of a source tree, made without following a link or copying a credential.

The walk holds directory descriptors and opens every name with ``O_NOFOLLOW`` relative to its
parent, so a source that changes under it cannot redirect the copy elsewhere. Regular files
are copied by content, symbolic links as links (never followed; inside the sandbox they
resolve in the sandbox's own filesystem, and host-side reads refuse them), directories
recursively; FIFOs, sockets and devices are skipped. Names that match the deny list are
skipped (or refuse the copy); ``.git/config`` is copied without credentials.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Final, Literal

from harness_sandbox._errors import (
    SANDBOX_COPY_FAILED,
    SANDBOX_DISK_LIMIT,
    SANDBOX_SOURCE_INVALID,
    SandboxError,
)

__all__ = [
    "DEFAULT_DENY",
    "CopyReport",
    "DeniedPolicy",
    "copy_tree",
    "remove_tree",
    "sanitize_git_config",
    "tree_bytes",
]

DEFAULT_DENY: Final[tuple[str, ...]] = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_*",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
)
"""Base-name patterns (``fnmatch``, case-sensitive) of files never copied into a sandbox."""

DeniedPolicy = Literal["skip", "refuse"]
"""What a denied name does: it is left out (and reported), or the copy is refused."""

_CHUNK: Final = 1024 * 1024
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# In .git/config: whole [credential] sections, http.*.extraHeader lines, and the user and
# password part of a remote URL.
_SECTION: Final = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"[^"]*")?\s*\]')
_EXTRA_HEADER: Final = re.compile(r"^\s*extraheader\s*=", re.IGNORECASE)
_URL_USERINFO: Final = re.compile(r"(?i)(\burl\s*=\s*[a-z][a-z0-9+.-]*://)[^/@\s]*@")


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
        deny: Base-name patterns to leave out.
        denied: ``"skip"`` or ``"refuse"`` for a denied name.
        max_bytes: The copy's byte budget (its regular files).
        owner: ``(uid, gid)`` to give every copied entry (needs root), or ``None``.

    Raises:
        SandboxError: ``SANDBOX_SOURCE_INVALID``, ``SANDBOX_COPY_FAILED`` (also for a denied
            name under ``"refuse"``) or ``SANDBOX_DISK_LIMIT``; whatever was copied is
            removed again.
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
            _Copier(deny, denied, max_bytes, owner, report).directory(source_fd, target_fd, "")
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

    def directory(self, source_fd: int, target_fd: int, prefix: str) -> None:
        with os.scandir(source_fd) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            relative = f"{prefix}{name}"
            info = os.stat(name, dir_fd=source_fd, follow_symlinks=False)
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in self._deny):
                if self._denied == "refuse":
                    raise SandboxError(
                        SANDBOX_COPY_FAILED, f"the source holds a denied file: {relative!r}", "create"
                    )
                self._report.skipped.append(relative)
            elif stat.S_ISDIR(info.st_mode):
                self._subdirectory(source_fd, target_fd, name, relative, info.st_mode)
            elif stat.S_ISREG(info.st_mode):
                self._file(source_fd, target_fd, name, relative, info.st_mode)
            elif stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(name, dir_fd=source_fd), name, dir_fd=target_fd)
                self._chown(name, target_fd)
            else:
                self._report.skipped.append(relative)

    def _subdirectory(self, source_fd: int, target_fd: int, name: str, relative: str, mode: int) -> None:
        child_source = os.open(name, _DIR_FLAGS, dir_fd=source_fd)
        try:
            os.mkdir(name, stat.S_IMODE(mode) | 0o700, dir_fd=target_fd)
            child_target = os.open(name, _DIR_FLAGS, dir_fd=target_fd)
            try:
                self.directory(child_source, child_target, f"{relative}/")
                if self._owner is not None:
                    os.fchown(child_target, *self._owner)
            finally:
                os.close(child_target)
        finally:
            os.close(child_source)

    def _file(self, source_fd: int, target_fd: int, name: str, relative: str, mode: int) -> None:
        if relative == ".git/config":
            self._git_config(source_fd, target_fd, name, mode)
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

    def _git_config(self, source_fd: int, target_fd: int, name: str, mode: int) -> None:
        reader = os.open(name, _FILE_FLAGS, dir_fd=source_fd)
        try:
            data = b""
            while chunk := os.read(reader, _CHUNK):
                self._count(len(chunk))
                data += chunk
        finally:
            os.close(reader)
        cleaned = sanitize_git_config(data.decode("utf-8", errors="replace"))
        writer = os.open(name, _CREATE_FLAGS, stat.S_IMODE(mode) | 0o600, dir_fd=target_fd)
        try:
            os.write(writer, cleaned.encode())
            if self._owner is not None:
                os.fchown(writer, *self._owner)
        finally:
            os.close(writer)
        self._report.files += 1
        self._report.sanitized.append(".git/config")

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


def sanitize_git_config(text: str) -> str:
    """``text`` without ``[credential…]`` sections, ``extraHeader`` lines and URL user info."""
    lines: list[str] = []
    in_credential = False
    for line in text.splitlines(keepends=True):
        section = _SECTION.match(line)
        if section is not None:
            in_credential = section.group(1).lower().startswith("credential")
        if in_credential or _EXTRA_HEADER.match(line):
            continue
        lines.append(_URL_USERINFO.sub(r"\1", line))
    return "".join(lines)


def tree_bytes(path: str) -> int:
    """Bytes held by the regular files below ``path`` (links not followed); 0 if it is gone."""
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                raise
    return total


def remove_tree(path: str) -> None:
    """Remove ``path`` and everything below it, never following a link; a missing path is fine."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return
    # Directories the sandbox made read-only still have to go.
    os.chmod(path, 0o700)
    with os.scandir(path) as entries:
        children = list(entries)
    for child in children:
        if child.is_dir(follow_symlinks=False):
            remove_tree(child.path)
        else:
            os.unlink(child.path)
    os.rmdir(path)
