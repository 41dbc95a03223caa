"""Reading one file as a commit holds it, without running git and without the work tree.

Trusted outer code reads policy (a task manifest) from a commit rather than from files a model
or a hostile checkout can edit. The same reader as ``diff`` and ``snapshot`` does the work, so
nothing the repository configures runs and nothing is written.
"""

from __future__ import annotations

import os
import threading
from typing import Final, NoReturn

from harness_workspace.local._diff import Repository
from harness_workspace.local._errors import (
    WORKSPACE_GIT_FAILED,
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_PATH_INVALID,
    WORKSPACE_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace.local._git.bounds import Budget, ReaderLimits
from harness_workspace.local._git.objects import BLOB, EXECUTABLE, REGULAR, TREE_MODE
from harness_workspace.local._git.refs import head_commit_id, ref_object_id
from harness_workspace.local._paths import open_root, parse_path

__all__ = ["read_committed_file"]

_OPERATION: Final = "read_committed_file"
_REGULAR_MODES: Final = (REGULAR, EXECUTABLE)
_TIMEOUT_MS: Final = 30_000
_HEX: Final = frozenset("0123456789abcdef")


def read_committed_file(
    root: str | os.PathLike[str], path: str, *, revision: str = "HEAD", max_bytes: int = 4 * 1024 * 1024
) -> bytes:
    """The bytes of the regular file ``path`` in the tree of commit ``revision`` (blocking).

    The repository is the one whose ``.git`` folder is at ``root``, read as ``diff`` reads it:
    no git program, no configuration, attribute, filter, hook or replace ref applies, and the
    work tree is never looked at. ``revision`` is ``HEAD``, a full ref name (``refs/…``), a
    branch name (``refs/heads/<name>``) or a full object id; annotated tags are peeled.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_NOT_FOUND`` when the commit's tree has no ``path``;
            ``WORKSPACE_GIT_FAILED`` when ``revision`` names no commit (or an unborn branch);
            ``WORKSPACE_NOT_A_FILE`` when ``path`` is a folder, symlink or submodule there;
            ``WORKSPACE_TOO_LARGE`` past ``max_bytes``;
            ``WORKSPACE_PATH_INVALID`` for a malformed ``revision``; the path codes; and the
            reader's ``WORKSPACE_NOT_A_REPOSITORY``, ``WORKSPACE_GIT_*`` codes.
        ValueError: ``max_bytes`` is not a positive int.
    """
    if type(max_bytes) is not int or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
    components = parse_path(path, _OPERATION, allow_root=False)
    budget = Budget(_OPERATION, ReaderLimits(), timeout_ms=_TIMEOUT_MS, stop=threading.Event())
    root_fd = open_root(root, _OPERATION)
    try:
        with Repository(root_fd, budget) as repository:
            store = repository.store
            commit = _resolve(repository, revision, budget)
            tree = store.commit_tree(store.peel_commit(commit))
            mode, object_id = TREE_MODE, tree
            for depth, name in enumerate(components):
                if mode != TREE_MODE:
                    _missing(path, revision)
                wanted = os.fsencode(name)
                found = next((entry for entry in store.tree_entries(object_id) if entry.name == wanted), None)
                if found is None:
                    _missing(path, revision)
                mode, object_id = found.mode, found.object_id
                if depth == len(components) - 1 and mode not in _REGULAR_MODES:
                    message = f"{_OPERATION} {path!r}: not a regular file in {revision}"
                    raise LocalWorkspaceError(WORKSPACE_NOT_A_FILE, message, _OPERATION)
            data = store.read(object_id, BLOB)
    finally:
        os.close(root_fd)
    if len(data) > max_bytes:
        message = f"{_OPERATION} {path!r}: exceeds {max_bytes} bytes in {revision}"
        raise LocalWorkspaceError(WORKSPACE_TOO_LARGE, message, _OPERATION)
    return data


def _missing(path: str, revision: str) -> NoReturn:
    raise LocalWorkspaceError(WORKSPACE_NOT_FOUND, f"{_OPERATION} {path!r}: not in {revision}", _OPERATION)


def _resolve(repository: Repository, revision: str, budget: Budget) -> bytes:
    hash_size = repository.store.hash_size
    if type(revision) is not str or not revision or revision.startswith("-") or "\x00" in revision:
        raise LocalWorkspaceError(WORKSPACE_PATH_INVALID, f"invalid revision {revision!r}", _OPERATION)
    if revision == "HEAD":
        found = head_commit_id(repository.git, hash_size, budget)
    elif len(revision) == 2 * hash_size and set(revision) <= _HEX:
        found = bytes.fromhex(revision)
    else:
        name = revision if revision.startswith("refs/") else f"refs/heads/{revision}"
        found = ref_object_id(repository.git, os.fsencode(name), hash_size, budget)
    if found is None:
        raise LocalWorkspaceError(WORKSPACE_GIT_FAILED, f"revision {revision!r} names no commit", _OPERATION)
    return found
