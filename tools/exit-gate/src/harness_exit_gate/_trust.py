"""What the gate trusts: the base's manifest, its own installation, paths no task may change.

The branch under judgement controls its work tree, its commits and whatever its scripts run;
it must control none of the gate's inputs (docs/decisions/003-exit-gate-trusts-the-base.md).
"""

from __future__ import annotations

import os
import posixpath
import sys
from collections.abc import Sequence
from typing import Final

import harness_kernel
from harness_exit_gate._errors import ExitGateError
from harness_exit_gate._git import Git, Link
from harness_exit_gate.manifest import MAX_MANIFEST_BYTES
from harness_kernel.policy import path_allowed

__all__ = [
    "PROTECTED_PATHS",
    "base_manifest_bytes",
    "gate_inside_checkout",
    "is_attributes_file",
    "is_protected",
    "link_escape",
]

PROTECTED_PATHS: Final = ("tasks/", "tools/exit-gate/", ".ci/", ".github/")
"""What the gate relies on, fixed in code: every manifest and golden scenario, the gate's own
source, the CI scripts and the hosted workflows. No task may change them, whatever its
``allowed_paths`` say; they change through reviewed branches that are not task branches."""

_REGULAR_FILE_MODES: Final = ("100644", "100755")


def is_protected(path: str) -> bool:
    """Whether ``path`` lies under (or replaces) one of the :data:`PROTECTED_PATHS`."""
    return any(path.startswith(prefix) or path == prefix.rstrip("/") for prefix in PROTECTED_PATHS)


def is_attributes_file(path: str) -> bool:
    """Whether ``path`` is a ``.gitattributes`` file, in any folder and any letter case.

    Attributes decide what git shows and exports — ``-diff`` hides a file's text,
    ``export-ignore`` drops it from an archive, ``filter=`` runs a driver on checkout — so no
    change may add, edit or remove one, whatever its ``allowed_paths``. Case is ignored
    because git on a case-insensitive file system reads ``.GitAttributes`` too.
    """
    return posixpath.basename(path).lower() == ".gitattributes"


def link_escape(root: str, link: Link, allowed: Sequence[str]) -> str | None:
    """Why ``link`` reaches beyond the change's scope, or ``None`` when every target stays inside.

    Each target as written is resolved from the link's folder without touching the file
    system: an absolute target, one that climbs out of the repository, one into ``.git`` or
    under the gate's protected paths, or one ``allowed_paths`` does not cover is refused (a
    folder is judged by its own path). The work tree link's real path — through links that
    were already there — must pass the same test.
    """
    for target in link.targets:
        if posixpath.isabs(target):
            return f"{link.path} points at the absolute path {target}"
        landed = posixpath.normpath(posixpath.join(posixpath.dirname(link.path), target))
        reason = _outside_scope(link.path, landed, allowed)
        if reason is not None:
            return reason
    if link.lands is not None:
        real_root = os.path.realpath(root)
        relative = os.path.relpath(link.lands, real_root).replace(os.sep, "/")
        return _outside_scope(link.path, relative, allowed)
    return None


def _outside_scope(path: str, landed: str, allowed: Sequence[str]) -> str | None:
    segments = landed.split("/")
    if landed in (".", "..") or segments[0] == "..":
        return f"{path} resolves to the repository's root or outside the repository"
    if ".git" in segments:
        return f"{path} resolves into .git ({landed})"
    if is_protected(landed):
        return f"{path} resolves under the gate's protected paths ({landed})"
    if not path_allowed(allowed, landed):
        return f"{path} resolves outside allowed_paths ({landed})"
    return None


def gate_inside_checkout(root: str) -> str | None:
    """The first part of the running gate that lies inside ``root``, or ``None``.

    The gate's verdict comes from its own package (its manifest model with it), the kernel's
    policy, and the interpreter environment that imports them. When any of them lives in the checkout the
    gate judges, the branch wrote the judge: an editable install of the head, or a ``.venv``
    the head's ``uv sync`` built (where a ``.pth`` file can run anything at start-up).
    """
    real_root = os.path.realpath(root)
    locations = (
        os.path.dirname(__file__),
        os.path.dirname(harness_kernel.__file__),
        sys.prefix,
    )
    for location in locations:
        real = os.path.realpath(location)
        if os.path.commonpath((real_root, real)) == real_root:
            return real
    return None


def base_manifest_bytes(git: Git, base_sha: str, task_id: str) -> bytes:
    """The bytes of ``tasks/<task_id>.yaml`` in the base commit's tree, read through git.

    Only a regular file counts: a symlink's blob is its target's name, and a tree is not a
    manifest. At most one byte past the size limit is returned, so the parser reports the size.

    Raises:
        ExitGateError: ``MANIFEST_NOT_ON_BASE`` when the base has no such file;
            ``MANIFEST_PATH_INVALID`` when it is not a regular file there.
        GitCheckError: a failing git command.
    """
    path = f"tasks/{task_id}.yaml"
    listing = git.run("ls-tree", "-z", "--full-tree", base_sha, "--", path).stdout.split(b"\0")
    entries = [entry for entry in listing if entry]
    if not entries:
        message = (
            f"{path} is not on the base {base_sha}: a new task's manifest must land on the base "
            "first, and the gate enforces the base's copy, never the branch's"
        )
        raise ExitGateError("MANIFEST_NOT_ON_BASE", message)
    header, _, _ = entries[0].partition(b"\t")
    mode, kind, blob = header.decode("ascii", "replace").split(" ")
    if kind != "blob" or mode not in _REGULAR_FILE_MODES:
        raise ExitGateError("MANIFEST_PATH_INVALID", f"{path} is not a regular file on the base {base_sha}")
    return git.run("cat-file", "blob", blob).stdout[: MAX_MANIFEST_BYTES + 1]
