"""``diff`` and ``snapshot`` of the local workspace, read from the repository without running git.

Both operations look at the *work tree* as it is now, as ``git add --all`` would stage it
into a fresh index started from ``HEAD``:

- :func:`git_diff` returns the patch of that staged tree against ``HEAD``'s tree (the empty
  tree before the first commit): every modified, deleted and *untracked* file; ignored
  untracked files are left out, tracked files never are. The form is ``git diff``'s (see
  :mod:`harness_workspace.local._git.patch`), and ``git apply`` reproduces the work tree from it.
  Bytes that are not UTF-8 are replaced (U+FFFD); a patch over ``max_output_bytes`` raises
  ``WORKSPACE_OUTPUT_TOO_LARGE`` and is never cut.
- :func:`git_snapshot` returns ``git-tree-<id>``, the id ``git write-tree`` would give that
  staged tree, so the same files give the same id and any change gives another.

**Why no git program.** The repository is untrusted: whoever can write into the workspace
(a hostile tarball, a model with ``write_file``) controls ``.git/config`` and
``.gitattributes``, and git obeys them: filter, diff and textconv drivers, fsmonitor, hooks
and ``core.*`` commands are programs git runs. No list of overrides is complete, so the
reader runs no program at all and reads nothing from ``.git/config`` but the repository
format. Nothing is written anywhere: no index, no object, no temporary file.

**What is refused rather than followed** (typed errors, nothing read elsewhere): a ``.git``
that is not a real directory (``WORKSPACE_NOT_A_REPOSITORY``); any symlink inside ``.git``
(``WORKSPACE_SYMLINK_REFUSED`` or ``WORKSPACE_PATH_ESCAPES_ROOT``); ``.git/commondir``,
``objects/info/alternates``, ``objects/info/http-alternates``, a format version above 1 and
unknown ``extensions.*`` such as ``refStorage = reftable`` (``WORKSPACE_GIT_UNSUPPORTED``);
missing or corrupt objects, packs and refs, and the time limit (``WORKSPACE_GIT_FAILED``);
anything past the reader's bounds (``WORKSPACE_GIT_TOO_LARGE``).

**What differs from git.** No configuration applies: not ``core.fileMode``,
``core.ignoreCase``, ``core.autocrlf``, ``core.excludesFile``, attributes or replace refs;
the hunks are minimal but may be placed differently from git's (no indent heuristic);
submodules are recorded as ``HEAD`` has them and a nested repository that ``HEAD`` does not
track is left out (git would stage its checked-out commit); a changed file larger than the
object bound fails ``diff`` (``snapshot`` streams it).
"""

from __future__ import annotations

import os
from typing import Final

# The same created_at form as MemoryWorkspace's snapshots: ISO 8601, microseconds, "Z".
from harness_workspace._memory import utc_timestamp
from harness_workspace._types import JsonValue, WorkspaceSnapshot
from harness_workspace.credentials import is_credential_path
from harness_workspace.local._errors import WORKSPACE_OUTPUT_TOO_LARGE, LocalWorkspaceError
from harness_workspace.local._git.bounds import Budget
from harness_workspace.local._git.config import ConfigSyntaxError, ObjectFormat, parse_repository_format
from harness_workspace.local._git.files import GitDirectory
from harness_workspace.local._git.ignore import IgnorePattern, parse_ignore_file
from harness_workspace.local._git.objects import BLOB, GITLINK, TREE, ObjectStore, hash_object
from harness_workspace.local._git.patch import Side, file_patch, withheld_patch
from harness_workspace.local._git.refs import head_commit_id
from harness_workspace.local._git.worktree import (
    HeadTree,
    read_head_tree,
    read_work_entry,
    tree_id,
    walk_work_tree,
)

__all__ = ["Repository", "git_diff", "git_snapshot"]

_REFUSED_LAYOUTS: Final = (
    (("objects", "info", "alternates"), "objects/info/alternates would read objects elsewhere"),
    (("objects", "info", "http-alternates"), "objects/info/http-alternates would fetch objects"),
)


def git_diff(root_fd: int, budget: Budget, *, max_output_bytes: int, withhold: bool = True) -> str:
    """Return the work tree's changes against ``HEAD`` as a patch, untracked files included.

    Args:
        root_fd: The workspace root, an open directory descriptor; not closed.
        budget: Limits, deadline and stop flag of this call.
        max_output_bytes: The longest patch returned; a longer one is an error, never cut.
        withhold: Show a changed credential path (``harness_workspace.credentials``) by name
            and modes only: neither side's content nor object id is read into the patch.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_NOT_A_REPOSITORY``, ``WORKSPACE_GIT_UNSUPPORTED``,
            ``WORKSPACE_GIT_FAILED``, ``WORKSPACE_GIT_TOO_LARGE``, ``WORKSPACE_OUTPUT_TOO_LARGE``,
            ``WORKSPACE_SYMLINK_REFUSED``, ``WORKSPACE_PATH_ESCAPES_ROOT``, ``WORKSPACE_IO_FAILED``
            or ``WORKSPACE_DISPOSED``.
    """
    with Repository(root_fd, budget) as repository:
        _, _, head = repository.head()
        work = walk_work_tree(root_fd, head, repository.exclude(), repository.object_format, budget)
        patch = _Patch(budget, max_output_bytes)
        for path in sorted(head.entries.keys() | work.keys()):
            old, new = head.entries.get(path), work.get(path)
            if old == new:
                continue
            if withhold and is_credential_path(path.decode("utf-8", "replace")):
                old_mode, new_mode = (None if side is None else side[0] for side in (old, new))
                patch.add(withheld_patch(path, old_mode, new_mode))
            else:
                repository.add_change(patch, root_fd, path, old, new is not None)
        return patch.text()


def git_snapshot(root_fd: int, budget: Budget) -> WorkspaceSnapshot:
    """Return an identifier of the work tree's content: the id of its git tree.

    The metadata holds ``adapter`` (``"local"``), ``head`` (the commit id, or ``None`` before
    the first commit), ``tree`` (the tree id) and ``dirty`` (whether the tree differs from
    ``HEAD``'s). ``created_at`` is UTC ISO 8601 with microseconds and a ``Z``.

    Raises:
        LocalWorkspaceError: as :func:`git_diff`, except ``WORKSPACE_OUTPUT_TOO_LARGE``.
    """
    with Repository(root_fd, budget) as repository:
        commit, base, head = repository.head()
        work = walk_work_tree(root_fd, head, repository.exclude(), repository.object_format, budget)
        tree = tree_id(work, repository.object_format, budget).hex()
    metadata: dict[str, JsonValue] = {
        "adapter": "local",
        "head": commit,
        "tree": tree,
        "dirty": tree != base,
    }
    return WorkspaceSnapshot(id=f"git-tree-{tree}", created_at=utc_timestamp(), metadata=metadata)


class _Patch:
    """The patch being assembled, refused as soon as it outgrows its cap."""

    __slots__ = ("_budget", "_cap", "_parts", "_size")

    def __init__(self, budget: Budget, cap: int) -> None:
        self._budget = budget
        self._cap = cap
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, part: bytes) -> None:
        self._size += len(part)
        if self._size > self._cap:
            operation = self._budget.operation
            raise LocalWorkspaceError(
                WORKSPACE_OUTPUT_TOO_LARGE, f"{operation}: the patch exceeds {self._cap} bytes", operation
            )
        self._parts.append(part)

    def text(self) -> str:
        return b"".join(self._parts).decode("utf-8", "replace")


class Repository:
    """The root's repository, opened and checked; a context manager closing its descriptors."""

    __slots__ = ("_budget", "_git", "_store", "object_format")

    def __init__(self, root_fd: int, budget: Budget) -> None:
        self._budget = budget
        self._git = GitDirectory(root_fd, budget)
        try:
            self.object_format: ObjectFormat = self._check_layout()
            self._store = ObjectStore(self._git, self.object_format, budget)
        except BaseException:
            self._git.close()
            raise

    def __enter__(self) -> Repository:
        return self

    @property
    def git(self) -> GitDirectory:
        """The ``.git`` folder, read through descriptors."""
        return self._git

    @property
    def store(self) -> ObjectStore:
        """The object store."""
        return self._store

    def __exit__(self, *_: object) -> None:
        self._store.close()
        self._git.close()

    def _check_layout(self) -> ObjectFormat:
        git, budget = self._git, self._budget
        if git.exists(("commondir",)):
            budget.unsupported("a .git/commondir (a linked work tree) would read another repository")
        for folder in ("objects", "refs"):
            fd = git.open_directory((folder,))
            if fd is None:
                budget.not_a_repository(f".git has no {folder} folder")
            os.close(fd)
        for parts, reason in _REFUSED_LAYOUTS:
            if git.exists(parts):
                budget.unsupported(reason)
        config = git.read(("config",), budget.limits.max_metadata_bytes)
        try:
            return parse_repository_format(config or b"").object_format
        except ConfigSyntaxError as error:
            budget.unsupported(f".git/config: {error}")

    def head(self) -> tuple[str | None, str, HeadTree]:
        """Return ``HEAD``'s commit (hex, or ``None`` if unborn), its tree (hex) and that tree flattened."""
        commit = head_commit_id(self._git, self._store.hash_size, self._budget)
        if commit is None:
            empty = hash_object(self.object_format, TREE, b"").hex()
            return None, empty, read_head_tree(self._store, None, self._budget)
        commit = self._store.peel_commit(commit)
        tree = self._store.commit_tree(commit)
        return commit.hex(), tree.hex(), read_head_tree(self._store, tree, self._budget)

    def exclude(self) -> list[IgnorePattern]:
        """The patterns of ``.git/info/exclude``."""
        data = self._git.read(("info", "exclude"), self._budget.limits.max_metadata_bytes)
        return parse_ignore_file(data) if data else []

    def add_change(
        self, patch: _Patch, root_fd: int, path: bytes, old: tuple[int, bytes] | None, present: bool
    ) -> None:
        """Add the patch of ``path``, whose ``HEAD`` entry is ``old``, reading its new side now."""
        new: Side | None = None
        if present:
            entry = read_work_entry(root_fd, path, self.object_format, self._budget)
            if entry is not None:
                mode, object_id, content = entry
                new = Side(mode, object_id, self._store.abbreviate(object_id), content)
        if old is not None and new is not None and (old[0], old[1]) == (new.mode, new.object_id):
            return  # changed back since the walk
        if old is None and new is None:
            return
        before = self._side(*old) if old is not None else None
        null = "0" * self._store.abbreviation_length()
        patch.add(file_patch(path, before, new, null, self._budget))

    def _side(self, mode: int, object_id: bytes) -> Side:
        abbreviation = self._store.abbreviate(object_id)
        if mode == GITLINK:
            content = b"Subproject commit %s\n" % object_id.hex().encode("ascii")
            return Side(mode, object_id, abbreviation, content)
        return Side(mode, object_id, abbreviation, self._store.read(object_id, BLOB))
