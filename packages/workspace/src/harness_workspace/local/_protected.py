"""Protected paths of a host workspace: refused to ``write_file``, put back after ``execute``.

On the host, some files are policy or code that runs later: the task manifests under
``tasks/``, and ``.git``, whose configuration and hooks git runs at the user's next
``git status`` (``core.fsmonitor``, ``core.hooksPath``, hooks). A model must not change them.

- ``write_file`` refuses a protected path before touching anything
  (``WORKSPACE_PATH_PROTECTED``).
- ``execute`` cannot be stopped from writing, so the guarded files are captured before the
  command and compared after it: whatever changed is put back (new entries removed, changed
  or removed ones rewritten) and the call fails with ``WORKSPACE_PROTECTED_PATH_CHANGED``
  naming the paths. Inside a ``.git`` folder the repository's working state is left alone
  (:data:`GIT_WORKING_STATE`), so ``git commit`` and its kind still work; everything else
  there is guarded, so a file git would read as configuration cannot be added unnoticed.

Every file operation here works through directory descriptors below the root and never
follows a symlink; a symlink is captured and put back as a symlink.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

import trio

from harness_workspace.local._errors import (
    WORKSPACE_IO_FAILED,
    WORKSPACE_PATH_PROTECTED,
    WORKSPACE_PROTECTED_PATH_CHANGED,
    WORKSPACE_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace.local._paths import Components

__all__ = [
    "GIT_WORKING_STATE",
    "PROTECTED_HOST_PATHS",
    "GuardedState",
    "ProtectedPaths",
    "guarded_execution",
]

PROTECTED_HOST_PATHS: Final = ("tasks", "**/.git")
"""The protected paths of agent-server's host workspaces: the task manifests and every ``.git``."""

GIT_WORKING_STATE: Final = frozenset(
    {
        "objects",
        "refs",
        "logs",
        "index",
        "packed-refs",
        "head",
        "orig_head",
        "fetch_head",
        "merge_head",
        "merge_msg",
        "merge_mode",
        "merge_rr",
        "auto_merge",
        "cherry_pick_head",
        "revert_head",
        "rebase_head",
        "bisect_log",
        "bisect_start",
        "bisect_terms",
        "bisect_names",
        "bisect_expected_rev",
        "bisect_ancestors_ok",
        "commit_editmsg",
        "tag_editmsg",
        "squash_msg",
        "rebase-merge",
        "rebase-apply",
        "sequencer",
        "rr-cache",
        "gc.pid",
        "gc.log",
        "shallow",
        "lfs",
    }
)
"""Names (case-folded) below a ``.git`` folder that ``execute`` may change: objects, refs, reflogs,
the index and the state of an operation in progress. None of them names a program. Below
``hooks/`` nothing is working state, below ``info/`` only ``refs``; ``*.lock`` files are."""

_MAX_ENTRIES: Final = 20_000
_MAX_BYTES: Final = 64 * 1024 * 1024
_MAX_DEPTH: Final = 64
_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
_TEMPORARY_PREFIX: Final = ".harness-restore-"
_SHOWN_PATHS: Final = 20

_T = TypeVar("_T")

Kind = Literal["file", "link", "directory", "other"]


@dataclass(frozen=True, slots=True)
class _Entry:
    kind: Kind
    mode: int
    content: bytes = b""


class ProtectedPaths:
    """A set of protected paths below a workspace root.

    Each entry is one path component: ``"tasks"`` protects ``tasks`` at the root and everything
    below it; ``"**/.git"`` protects every ``.git`` at any depth and everything below it.
    Names are compared case-folded, so a case-insensitive file system cannot be used to
    spell around them.

    Raises:
        ValueError: an entry that is not a plain name or ``**/`` and a plain name.
    """

    __slots__ = ("_anchored", "_anywhere")

    def __init__(self, entries: Iterable[str]) -> None:
        anchored: list[str] = []
        anywhere: list[str] = []
        for entry in entries:
            if type(entry) is not str:
                raise ValueError(f"protected paths must be str, got {entry!r}")
            name = entry.removeprefix("**/")
            if not name or "/" in name or name in (".", "..") or "\x00" in name:
                raise ValueError(f'a protected path is a name or "**/" and a name, got {entry!r}')
            (anywhere if entry.startswith("**/") else anchored).append(name.casefold())
        self._anchored = frozenset(anchored)
        self._anywhere = frozenset(anywhere)

    def __bool__(self) -> bool:
        return bool(self._anchored or self._anywhere)

    def covers(self, components: Components) -> bool:
        """Whether the parsed path ``components`` is protected (or lies below a protected path)."""
        if components and components[0].casefold() in self._anchored:
            return True
        return any(part.casefold() in self._anywhere for part in components)

    def refuse_write(self, path: str, components: Components) -> None:
        """Raise ``WORKSPACE_PATH_PROTECTED`` when ``write_file`` names a protected path."""
        if self.covers(components):
            message = f"write_file {path!r}: the path is protected (task manifests and .git are not writable)"
            raise LocalWorkspaceError(WORKSPACE_PATH_PROTECTED, message, "write_file")

    @property
    def guarded_names(self) -> tuple[str, ...]:
        """The root-level names ``execute`` guards, case-folded, sorted."""
        return tuple(sorted(self._anchored | self._anywhere))


def _in_git_working_state(parts: Components) -> bool:
    """Whether ``parts`` (below the root) is working state of a ``.git`` folder it lies in."""
    inside_git = False
    for index, part in enumerate(parts):
        folded = part.casefold()
        if folded == ".git":
            inside_git = True
        elif inside_git:
            if folded == "info":
                # info/refs is the list ``git gc`` writes for dumb transports; the rest of
                # info/ (attributes, exclude, grafts, sparse-checkout) is guarded.
                return parts[index + 1 : index + 2] == ("refs",)
            if folded == "hooks":
                return False
            if folded in GIT_WORKING_STATE or folded.endswith(".lock"):
                return True
    return False


class GuardedState:
    """The guarded files of one root as they were before a command; :meth:`restore` puts them back."""

    __slots__ = ("_entries", "_names")

    def __init__(self, names: tuple[str, ...], entries: dict[Components, _Entry]) -> None:
        self._names = names
        self._entries = entries

    @classmethod
    def capture(cls, root_fd: int, protected: ProtectedPaths) -> GuardedState:
        """Read every guarded entry below ``root_fd`` (blocking).

        Raises:
            LocalWorkspaceError: ``WORKSPACE_TOO_LARGE`` past 20 000 entries, 64 MiB or 64
                levels: the command is refused rather than run unguarded.
        """
        entries: dict[Components, _Entry] = {}
        total = 0
        for parts, entry in _walk(root_fd, protected.guarded_names, with_content=True):
            entries[parts] = entry
            total += len(entry.content)
            if len(entries) > _MAX_ENTRIES or total > _MAX_BYTES:
                message = (
                    f"execute: the protected paths hold more than {_MAX_ENTRIES} entries or "
                    f"{_MAX_BYTES} bytes, so a command cannot be guarded"
                )
                raise LocalWorkspaceError(WORKSPACE_TOO_LARGE, message, "execute")
        return cls(protected.guarded_names, entries)

    def restore(self, root_fd: int) -> list[str]:
        """Put every guarded entry back as captured (blocking); return the paths that had changed.

        New entries are removed (a new folder with all it holds), changed and removed ones
        are written again (a file atomically, through a temporary name), mode bits included.
        """
        changed: set[Components] = set()
        current = dict(_walk(root_fd, self._names, with_content=False))
        # Deepest first, so a folder's new contents go before the folder.
        for parts in sorted(current, key=len, reverse=True):
            before = self._entries.get(parts)
            now = current[parts]
            if before is None or before.kind != now.kind:
                if _remove(root_fd, parts):
                    changed.add(parts)
            elif before.kind == "directory" and before.mode != now.mode:
                _make_directory(root_fd, parts, before.mode, create=False)
                changed.add(parts)
            elif before.kind in ("file", "link") and not _same(root_fd, parts, before):
                _write_back(root_fd, parts, before)
                changed.add(parts)
        for parts in sorted(self._entries, key=len):
            before = self._entries[parts]
            if parts in current and current[parts].kind == before.kind:
                continue
            changed.add(parts)
            if before.kind == "directory":
                _make_directory(root_fd, parts, before.mode, create=True)
            elif before.kind != "other":  # a FIFO, socket or device cannot be written back
                _write_back(root_fd, parts, before)
        return sorted("/".join(parts) for parts in changed)


def _walk(root_fd: int, names: tuple[str, ...], *, with_content: bool) -> Iterator[tuple[Components, _Entry]]:
    """Every guarded entry below ``root_fd``: the root-level ``names`` and what they hold."""
    wanted = set(names)
    with os.scandir(root_fd) as entries:
        found = sorted(entry.name for entry in entries if entry.name.casefold() in wanted)
    for name in found:
        yield from _visit(root_fd, (name,), 0, with_content=with_content)


def _visit(
    dir_fd: int, parts: Components, depth: int, *, with_content: bool
) -> Iterator[tuple[Components, _Entry]]:
    if _in_git_working_state(parts):
        return
    name = parts[-1]
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        yield parts, _Entry("link", 0, os.fsencode(os.readlink(name, dir_fd=dir_fd)))
    elif stat.S_ISREG(info.st_mode):
        yield parts, _Entry("file", mode, _read(dir_fd, name) if with_content else b"")
    elif not stat.S_ISDIR(info.st_mode):
        yield parts, _Entry("other", mode)
    else:
        if depth >= _MAX_DEPTH and not with_content:
            # Only a command makes a tree this deep (the capture refused one): it is new.
            yield parts, _Entry("other", mode)
            return
        if depth >= _MAX_DEPTH:
            message = f"execute: the protected path {'/'.join(parts)!r} is deeper than {_MAX_DEPTH} levels"
            raise LocalWorkspaceError(WORKSPACE_TOO_LARGE, message, "execute")
        yield parts, _Entry("directory", mode)
        child = os.open(name, _DIRECTORY, dir_fd=dir_fd)
        try:
            with os.scandir(child) as entries:
                names = sorted(entry.name for entry in entries)
            for entry_name in names:
                yield from _visit(child, (*parts, entry_name), depth + 1, with_content=with_content)
        finally:
            os.close(child)


def _read(dir_fd: int, name: str, limit: int = _MAX_BYTES + 1) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=dir_fd)
    try:
        chunks: list[bytes] = []
        total = 0
        while total < limit and (chunk := os.read(fd, min(1024 * 1024, limit - total))):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _open_parent(root_fd: int, parts: Components) -> int:
    """The folder holding ``parts``, opened without following a symlink; the caller closes it."""
    current = os.dup(root_fd)
    try:
        for name in parts[:-1]:
            following = os.open(name, _DIRECTORY, dir_fd=current)
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def _make_directory(root_fd: int, parts: Components, mode: int, *, create: bool) -> None:
    parent = _open_parent(root_fd, parts)
    try:
        if create:
            os.mkdir(parts[-1], mode, dir_fd=parent)
        # chmod through an opened descriptor: a name swapped for a symlink is refused.
        fd = os.open(parts[-1], _DIRECTORY, dir_fd=parent)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def _same(root_fd: int, parts: Components, before: _Entry) -> bool:
    parent = _open_parent(root_fd, parts)
    try:
        name = parts[-1]
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if before.kind == "link":
            return os.fsencode(os.readlink(name, dir_fd=parent)) == before.content
        if stat.S_IMODE(info.st_mode) != before.mode or info.st_size != len(before.content):
            return False
        return _read(parent, name, len(before.content) + 1) == before.content
    finally:
        os.close(parent)


def _write_back(root_fd: int, parts: Components, before: _Entry) -> None:
    parent = _open_parent(root_fd, parts)
    try:
        name = parts[-1]
        temporary = f"{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        if before.kind == "link":
            os.symlink(os.fsdecode(before.content), temporary, dir_fd=parent)
        else:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=parent)
            try:
                view = memoryview(before.content)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, before.mode)
                os.fsync(fd)
            finally:
                os.close(fd)
        try:
            # A folder where the file was: rename cannot replace it, so it goes first.
            if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                _remove_tree(parent, name)
        except FileNotFoundError:
            pass
        try:
            os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent)
            raise
    finally:
        os.close(parent)


def _remove(root_fd: int, parts: Components) -> bool:
    """Remove the entry at ``parts`` (a folder with everything in it); whether anything was there."""
    parent = _open_parent(root_fd, parts)
    try:
        return _remove_tree(parent, parts[-1])
    finally:
        os.close(parent)


def _remove_tree(dir_fd: int, name: str) -> bool:
    """Remove ``name`` in ``dir_fd`` and all it holds, without recursion and with two descriptors.

    A command may leave a tree deeper than any recursion limit: each pass removes the files
    of every subfolder and lifts the subfolder's own folders up into the top one.
    """
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return True
    top = os.open(name, _DIRECTORY, dir_fd=dir_fd)
    try:
        while entries := _entries(top):
            for entry_name, is_directory in entries:
                if not is_directory:
                    os.unlink(entry_name, dir_fd=top)
                    continue
                sub = os.open(entry_name, _DIRECTORY, dir_fd=top)
                try:
                    inner = _entries(sub)
                    for inner_name, inner_is_directory in inner:
                        if inner_is_directory:
                            lifted = f"{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
                            os.rename(inner_name, lifted, src_dir_fd=sub, dst_dir_fd=top)
                        else:
                            os.unlink(inner_name, dir_fd=sub)
                finally:
                    os.close(sub)
                if not inner:
                    os.rmdir(entry_name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=dir_fd)
    return True


def _entries(dir_fd: int) -> list[tuple[str, bool]]:
    with os.scandir(dir_fd) as entries:
        return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]


def _capture(root_fd: int, protected: ProtectedPaths) -> GuardedState:
    try:
        return GuardedState.capture(root_fd, protected)
    except OSError as error:
        message = (
            f"execute: the protected paths cannot be read, so a command cannot be guarded: {error.strerror}"
        )
        raise LocalWorkspaceError(WORKSPACE_IO_FAILED, message, "execute") from error


def _restore(before: GuardedState, root_fd: int) -> list[str]:
    try:
        return before.restore(root_fd)
    except OSError as error:
        # Typed, and never hidden: a concurrent change (a folder swapped for a link) can stop it.
        message = f"execute: the command changed protected paths that could not all be put back: {error}"
        raise LocalWorkspaceError(WORKSPACE_PROTECTED_PATH_CHANGED, message, "execute") from error


async def guarded_execution(
    root_fd: int, protected: ProtectedPaths, run: Callable[[int], Awaitable[_T]]
) -> _T:
    """Run ``run(root_fd)`` with the guarded files captured before and put back after.

    They are put back however the command ended (shielded from cancellation, so a disposed
    workspace is restored too); an error of the command itself wins over the report.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_PROTECTED_PATH_CHANGED`` naming what was put back;
            ``WORKSPACE_TOO_LARGE`` before anything ran when the guarded files are too many.
    """
    before = await trio.to_thread.run_sync(_capture, root_fd, protected)
    try:
        result = await run(root_fd)
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_restore, before, root_fd)
        raise
    with trio.CancelScope(shield=True):
        changed = await trio.to_thread.run_sync(_restore, before, root_fd)
        if changed:
            shown = ", ".join(changed[:_SHOWN_PATHS]) + (", …" if len(changed) > _SHOWN_PATHS else "")
            count = len(changed)
            message = (
                f"execute: the command changed {count} protected path(s), put back as they were: {shown}"
            )
            raise LocalWorkspaceError(WORKSPACE_PROTECTED_PATH_CHANGED, message, "execute")
    return result
