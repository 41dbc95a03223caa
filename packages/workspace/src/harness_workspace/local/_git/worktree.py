"""The work tree as git would stage it, computed without writing anything anywhere.

The walk starts at the root descriptor and opens every folder relative to its parent with
``O_NOFOLLOW``, so it never follows a symlink: a symlink is an entry of its own (mode
``120000``, its target's bytes as the blob), a regular file is ``100755`` when its owner may
execute it and ``100644`` otherwise, and FIFOs, sockets and devices are skipped, as ``git
add`` skips them. Every entry named ``.git`` is skipped.

Ignore rules apply to untracked paths only: a path present in ``HEAD``'s tree is always
taken. An ignored folder is entered only when ``HEAD`` tracks something below it, and then
only its tracked paths are taken (an excluded folder cannot have files re-included). A
folder holding a ``.git`` of its own that ``HEAD`` knows nothing below (a nested repository)
is left out; a gitlink (submodule) in ``HEAD`` is kept as ``HEAD`` records it while its
folder exists, and its folder is never entered.

Tree objects are built in memory in git's entry order, so the tree id is what
``git add --all && git write-tree`` gives for the same files.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from typing import Final

from harness_workspace.local._errors import WORKSPACE_IO_FAILED, LocalWorkspaceError
from harness_workspace.local._git.bounds import Budget
from harness_workspace.local._git.config import ObjectFormat
from harness_workspace.local._git.files import read_capped
from harness_workspace.local._git.ignore import IgnorePattern, IgnoreRules, parse_ignore_file
from harness_workspace.local._git.objects import (
    BLOB,
    EXECUTABLE,
    GITLINK,
    REGULAR,
    SYMLINK,
    TREE,
    TREE_MODE,
    ObjectStore,
    hash_object,
)
from harness_workspace.local._paths import PathResolver, fail_os

__all__ = ["Entries", "HeadTree", "read_head_tree", "read_work_entry", "tree_id", "walk_work_tree"]

Entries = dict[bytes, tuple[int, bytes]]
"""Root-relative path → (mode, object id), for every non-tree entry."""

_CHUNK: Final = 1024 * 1024
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_ATTEMPTS: Final = 3
_NO_SYMLINKS: Final = PathResolver("walk")


class HeadTree:
    """``HEAD``'s tree flattened: its entries, and every folder that holds one."""

    __slots__ = ("directories", "entries")

    def __init__(self) -> None:
        self.entries: Entries = {}
        self.directories: set[bytes] = set()


def read_head_tree(store: ObjectStore, root_tree: bytes | None, budget: Budget) -> HeadTree:
    """Flatten the tree ``root_tree`` (``None``: the empty tree) without recursion."""
    head = HeadTree()
    if root_tree is None:
        return head
    pending: list[tuple[bytes, bytes, int]] = [(b"", root_tree, 0)]
    while pending:
        prefix, tree, depth = pending.pop()
        if depth > budget.limits.max_depth:
            budget.too_large(f"HEAD's tree is nested deeper than {budget.limits.max_depth} levels")
        for entry in store.tree_entries(tree):
            path = prefix + entry.name
            if entry.mode == TREE_MODE:
                head.directories.add(path)
                pending.append((path + b"/", entry.object_id, depth + 1))
            else:
                head.entries[path] = (entry.mode, entry.object_id)
    return head


def walk_work_tree(
    root_fd: int, head: HeadTree, exclude: list[IgnorePattern], algorithm: ObjectFormat, budget: Budget
) -> Entries:
    """Return every entry ``git add --all`` would stage from the work tree below ``root_fd``."""
    walk = _Walk(head, IgnoreRules(exclude), algorithm, budget)
    walk.visit(root_fd, b"", 0, excluded=False)
    return walk.found


class _Walk:
    __slots__ = ("algorithm", "budget", "found", "head", "rules")

    def __init__(self, head: HeadTree, rules: IgnoreRules, algorithm: ObjectFormat, budget: Budget) -> None:
        self.head = head
        self.rules = rules
        self.algorithm: ObjectFormat = algorithm
        self.budget = budget
        self.found: Entries = {}

    def visit(self, dir_fd: int, prefix: bytes, depth: int, *, excluded: bool) -> None:
        budget = self.budget
        budget.check()
        try:
            names = sorted(os.fsencode(name) for name in os.listdir(dir_fd))
        except OSError as error:
            fail_os(error, os.fsdecode(prefix) or ".", budget.operation)
        budget.entries(len(names))
        pushed = False
        if not excluded and b".gitignore" in names:
            patterns = self._ignore_file(dir_fd, prefix)
            if patterns:
                self.rules.push(prefix, patterns)
                pushed = True
        try:
            for name in names:
                if name != b".git":
                    budget.check()  # ignore rules written by the workspace cost time per entry
                    self._entry(dir_fd, prefix, name, depth, excluded)
        finally:
            if pushed:
                self.rules.pop()

    def _ignore_file(self, dir_fd: int, prefix: bytes) -> list[IgnorePattern]:
        # Like git (2.32 and later), a .gitignore that is a symlink is not read.
        try:
            fd = os.open(b".gitignore", _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                return []
            fail_os(error, os.fsdecode(prefix + b".gitignore"), self.budget.operation)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return []
            data = read_capped(fd, self.budget.limits.max_metadata_bytes, self.budget, ".gitignore")
        except OSError as error:
            fail_os(error, os.fsdecode(prefix + b".gitignore"), self.budget.operation)
        finally:
            os.close(fd)
        return parse_ignore_file(data)

    def _entry(self, dir_fd: int, prefix: bytes, name: bytes, depth: int, excluded: bool) -> None:
        path = prefix + name
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return  # removed while walking
        except OSError as error:
            fail_os(error, os.fsdecode(path), self.budget.operation)
        tracked = self.head.entries.get(path)
        if stat.S_ISDIR(info.st_mode):
            if tracked is not None and tracked[0] == GITLINK:
                self.found[path] = tracked  # a submodule: recorded as HEAD has it, never entered
                return
            self._directory(dir_fd, path, name, depth, excluded)
            return
        if tracked is None and (excluded or self.rules.excluded(path, directory=False)):
            return
        entry = _read_entry(dir_fd, name, os.fsdecode(path), self.budget, self.algorithm, keep=False)
        if entry is not None:
            self.found[path] = entry[:2]

    def _directory(self, dir_fd: int, path: bytes, name: bytes, depth: int, excluded: bool) -> None:
        tracked_below = path in self.head.directories
        excluded = excluded or self.rules.excluded(path, directory=True)
        if excluded and not tracked_below:
            return
        if depth + 1 > self.budget.limits.max_depth:
            self.budget.too_large(f"folders are nested deeper than {self.budget.limits.max_depth} levels")
        try:
            child = os.open(name, _DIRECTORY_FLAGS, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return  # replaced while walking; the next call sees what it became
            fail_os(error, os.fsdecode(path), self.budget.operation)
        try:
            if not tracked_below and _has_git(child):
                return  # a nested repository git would stage as a gitlink: not read
            self.visit(child, path + b"/", depth + 1, excluded=excluded)
        finally:
            os.close(child)


def _has_git(dir_fd: int) -> bool:
    try:
        os.stat(".git", dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def read_work_entry(
    root_fd: int, path: bytes, algorithm: ObjectFormat, budget: Budget
) -> tuple[int, bytes, bytes] | None:
    """Return ``(mode, object id, content)`` of the file or symlink at ``path`` now, or ``None``.

    The folders on the way are opened without following symlinks; the content is bounded
    by ``max_object_bytes``.
    """
    parent_path, _, name = path.rpartition(b"/")
    components = tuple(os.fsdecode(part) for part in parent_path.split(b"/")) if parent_path else ()
    try:
        dir_fd = _NO_SYMLINKS.open(root_fd, components, os.O_PATH | os.O_DIRECTORY)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EXDEV):
            return None
        fail_os(error, os.fsdecode(path), budget.operation)
    try:
        return _read_entry(dir_fd, name, os.fsdecode(path), budget, algorithm, keep=True)
    finally:
        os.close(dir_fd)


def _read_entry(
    dir_fd: int, name: bytes, shown: str, budget: Budget, algorithm: ObjectFormat, *, keep: bool
) -> tuple[int, bytes, bytes] | None:
    """Hash the symlink or regular file ``name`` (keeping its bytes if asked); skip anything else."""
    for _ in range(_READ_ATTEMPTS):
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as error:
            if error.errno == errno.ENOENT:
                return None
            if error.errno != errno.ELOOP:
                fail_os(error, shown, budget.operation)
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError as link_error:
                if link_error.errno in (errno.ENOENT, errno.EINVAL):
                    continue  # replaced again meanwhile
                fail_os(link_error, shown, budget.operation)
            budget.hashed(len(target))
            return SYMLINK, hash_object(algorithm, BLOB, target), target
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None  # a FIFO, socket or device (or a folder by now): git skips it
            result = _hash_file(fd, info, shown, budget, algorithm, keep=keep)
        except OSError as error:
            fail_os(error, shown, budget.operation)
        finally:
            os.close(fd)
        if result is not None:
            return result
    raise LocalWorkspaceError(
        WORKSPACE_IO_FAILED, f"{budget.operation}: {shown!r} kept changing while being read", budget.operation
    )


def _hash_file(
    fd: int, info: os.stat_result, shown: str, budget: Budget, algorithm: ObjectFormat, *, keep: bool
) -> tuple[int, bytes, bytes] | None:
    """Hash an open regular file; ``None`` if it changed size while being read."""
    size = info.st_size
    if keep:
        budget.object_size(size, shown)
    budget.hashed(size)
    digest = hashlib.new(algorithm, b"blob %d\0" % size)
    kept: list[bytes] = []
    total = 0
    while chunk := os.read(fd, min(_CHUNK, size - total + 1)):
        budget.check()
        total += len(chunk)
        if total > size:
            return None  # grew while being read: read it again
        digest.update(chunk)
        if keep:
            kept.append(chunk)
    if total != size:
        return None
    mode = EXECUTABLE if info.st_mode & stat.S_IXUSR else REGULAR
    return mode, digest.digest(), b"".join(kept)


class _Folder:
    __slots__ = ("children",)

    def __init__(self) -> None:
        self.children: dict[bytes, _Folder | tuple[int, bytes]] = {}


def tree_id(entries: Entries, algorithm: ObjectFormat, budget: Budget) -> bytes:
    """Return the id of the tree holding ``entries``, built in memory as ``git write-tree`` would."""
    root = _Folder()
    for path, entry in entries.items():
        folder = root
        *names, name = path.split(b"/")
        for part in names:
            child = folder.children.get(part)
            if not isinstance(child, _Folder):
                child = folder.children[part] = _Folder()
            folder = child
        folder.children[name] = entry
    return _write_tree(root, algorithm, budget)


def _write_tree(folder: _Folder, algorithm: ObjectFormat, budget: Budget) -> bytes:
    budget.check()
    # Git orders entries by name, a folder's name read as if it ended with "/".
    keyed: list[tuple[bytes, bytes, int, bytes]] = []
    for name, value in folder.children.items():
        if isinstance(value, _Folder):
            keyed.append((name + b"/", name, TREE_MODE, _write_tree(value, algorithm, budget)))
        else:
            keyed.append((name, name, value[0], value[1]))
    keyed.sort()
    body = b"".join(b"%o %s\0%s" % (mode, name, object_id) for _, name, mode, object_id in keyed)
    return hash_object(algorithm, TREE, body)
