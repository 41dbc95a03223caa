"""``HEAD``: a detached commit id or a symbolic ref, resolved through loose refs and ``packed-refs``.

Symbolic refs are followed at most five levels deep (git's own bound), every ref name is
checked before it is used as a path below ``.git`` (no empty, ``.`` or ``..`` component, no
control or glob characters), and a ref that is a symlink is refused by the file layer. A
``HEAD`` that names a branch that does not exist yet is an unborn branch: no commit.
"""

from __future__ import annotations

import os
from typing import Final

from harness_workspace.local._git.bounds import Budget
from harness_workspace.local._git.files import GitDirectory

__all__ = ["head_commit_id", "ref_object_id"]

_MAX_SYMREF_DEPTH: Final = 5
_FORBIDDEN: Final = frozenset(b" ~^:?*[\\\x7f") | frozenset(range(32))


def head_commit_id(git: GitDirectory, hash_size: int, budget: Budget) -> bytes | None:
    """Return the object id ``HEAD`` resolves to, or ``None`` on an unborn branch.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_NOT_A_REPOSITORY`` for a missing or malformed
            ``HEAD``, ``WORKSPACE_GIT_FAILED`` for a malformed ref or a symref loop.
    """
    cap = budget.limits.max_metadata_bytes
    content = git.read(("HEAD",), cap)
    if content is None:
        budget.not_a_repository(".git has no HEAD")
    target = _symbolic_target(content)
    if target is None:
        object_id = _object_id(content, hash_size)
        if object_id is None:
            budget.not_a_repository(".git/HEAD is neither a ref nor an object id")
        return object_id
    return ref_object_id(git, target, hash_size, budget)


def ref_object_id(git: GitDirectory, name: bytes, hash_size: int, budget: Budget) -> bytes | None:
    """Return the object id the ref ``name`` (``refs/…``) resolves to, or ``None`` when it does not exist.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_GIT_FAILED`` for an invalid or malformed ref or a symref loop.
    """
    cap = budget.limits.max_metadata_bytes
    target = name
    packed: dict[bytes, bytes] | None = None
    for _ in range(_MAX_SYMREF_DEPTH):
        if not _valid_ref_name(target):
            budget.fail(f"a symbolic ref names an invalid ref {target!r}")
        content = git.read(tuple(os.fsdecode(part) for part in target.split(b"/")), cap)
        if content is None:
            if packed is None:
                packed = _packed_refs(git, hash_size, budget)
            return packed.get(target)
        next_target = _symbolic_target(content)
        if next_target is None:
            object_id = _object_id(content, hash_size)
            if object_id is None:
                budget.fail(f"ref {target.decode('utf-8', 'replace')} is malformed")
            return object_id
        target = next_target
    raise budget.failure(
        f"{name.decode('utf-8', 'replace')} is a chain of symbolic refs that is too long (or a loop)"
    )


def _symbolic_target(content: bytes) -> bytes | None:
    if not content.startswith(b"ref:"):
        return None
    return content[4:].strip(b" \t\r\n")


def _object_id(content: bytes, hash_size: int) -> bytes | None:
    text = content.rstrip(b"\r\n")
    if len(text) != 2 * hash_size:
        return None
    try:
        return bytes.fromhex(text.decode("ascii"))
    except ValueError:
        return None


def _valid_ref_name(name: bytes) -> bool:
    if not name.startswith(b"refs/") or name.endswith(b"/") or b"@{" in name:
        return False
    if any(byte in _FORBIDDEN for byte in name):
        return False
    return all(
        part and not part.startswith(b".") and not part.endswith(b".lock") and b".." not in part
        for part in name.split(b"/")
    )


def _packed_refs(git: GitDirectory, hash_size: int, budget: Budget) -> dict[bytes, bytes]:
    content = git.read(("packed-refs",), budget.limits.max_packed_refs_bytes)
    refs: dict[bytes, bytes] = {}
    if content is None:
        return refs
    for line in content.split(b"\n"):
        if not line or line.startswith((b"#", b"^")):
            continue
        hexadecimal, _, name = line.partition(b" ")
        object_id = _object_id(hexadecimal, hash_size)
        if object_id is None or not name:
            budget.fail("packed-refs is malformed")
        refs[name.rstrip(b"\r")] = object_id
    budget.entries(len(refs) // 64)
    return refs
