"""Where a session's task manifest comes from (spec §5.1 step 4): a place the model cannot write.

A manifest is the session's permission policy, so it is never read from the working tree the
session's tools edit. It comes from the operator's ``tasks_dir`` (outside the workspace root)
when one is configured, and otherwise from the trusted base commit of the workspace's own
repository (``task_base``, ``HEAD`` by default), read as a git object without running git.
The working tree's copy must then be byte-for-byte the base's: one that exists only there
(untracked) or differs (modified, deleted) is refused, so a commit a command made behind the
working tree's back, whose ``tasks/`` is put back after every command, is refused as well.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from agent_server._errors import ManifestRefusedError
from harness_exit_gate.manifest import (
    MAX_MANIFEST_BYTES,
    ManifestParseError,
    TaskManifest,
    load_task_manifest,
)
from harness_workspace.local import (
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_TOO_LARGE,
    LocalWorkspaceError,
    read_committed_file,
)

__all__ = ["DEFAULT_TASK_BASE", "read_task_manifest"]

DEFAULT_TASK_BASE: Final = "HEAD"
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def read_task_manifest(
    workspace: str, task_id: str, *, tasks_dir: str | None = None, task_base: str = DEFAULT_TASK_BASE
) -> TaskManifest:
    """The trusted manifest of ``task_id`` for a session in ``workspace`` (blocking).

    With ``tasks_dir``: ``<tasks_dir>/<task_id>.yaml``, a regular file (no symlink) of at most
    256 KiB; the workspace's ``tasks/`` is not looked at. Without it: ``tasks/<task_id>.yaml``
    in the tree of commit ``task_base`` of the repository whose ``.git`` is at ``workspace``,
    and the working tree's copy must be the same bytes.

    Raises:
        ManifestRefusedError: ``-32602`` with a ``MANIFEST_*`` reason.
    """
    if tasks_dir is not None:
        data = _read_file(tasks_dir, f"{task_id}.yaml")
        if data is None:
            raise ManifestRefusedError(
                "MANIFEST_MISSING", f"{task_id}.yaml is not a regular file in the tasks folder"
            )
        return _parsed(data, task_id)
    path = f"tasks/{task_id}.yaml"
    working = _read_file(workspace, path)
    try:
        committed = read_committed_file(workspace, path, revision=task_base, max_bytes=MAX_MANIFEST_BYTES)
    except LocalWorkspaceError as error:
        if error.code == WORKSPACE_TOO_LARGE:
            raise ManifestRefusedError(
                "MANIFEST_INVALID", f"{path} exceeds {MAX_MANIFEST_BYTES} bytes"
            ) from None
        if error.code in (WORKSPACE_NOT_FOUND, WORKSPACE_NOT_A_FILE) and working is not None:
            message = (
                f"{path} exists only in the working tree, not in the trusted base {task_base}:"
                " commit it, or give the server a tasks folder (--tasks-dir)"
            )
            raise ManifestRefusedError("MANIFEST_NOT_COMMITTED", message) from None
        if error.code in (WORKSPACE_NOT_FOUND, WORKSPACE_NOT_A_FILE):
            raise ManifestRefusedError(
                "MANIFEST_MISSING", f"{path} is not a regular file in {task_base}"
            ) from None
        message = (
            f"the trusted base {task_base} of the workspace cannot be read ({error.code}: {error.message})"
        )
        raise ManifestRefusedError("MANIFEST_BASE_UNAVAILABLE", message) from None
    if working != committed:
        state = "is missing from" if working is None else "differs from its copy in"
        message = (
            f"{path} in the working tree {state} the trusted base {task_base}:"
            " commit the change or restore the file"
        )
        raise ManifestRefusedError("MANIFEST_MODIFIED", message)
    return _parsed(committed, task_id)


def _parsed(data: bytes, task_id: str) -> TaskManifest:
    try:
        manifest = load_task_manifest(data)
    except ManifestParseError:
        raise ManifestRefusedError("MANIFEST_INVALID", f'task manifest "{task_id}" is invalid') from None
    if manifest.id != task_id:
        raise ManifestRefusedError("MANIFEST_ID_MISMATCH", f'task manifest id does not match "{task_id}"')
    return manifest


def _read_file(directory: str, relative: str) -> bytes | None:
    """The bytes of the regular file ``relative`` below ``directory``, or ``None`` when it is not one.

    No symlink is followed below ``directory``; at most one byte past the size limit is read.
    """
    *folders, name = relative.split("/")
    try:
        current = os.open(directory, _DIRECTORY_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        for folder in folders:
            following = os.open(folder, _DIRECTORY_FLAGS, dir_fd=current)
            os.close(current)
            current = following
        fd = os.open(name, _FILE_FLAGS, dir_fd=current)
    except OSError:
        os.close(current)
        return None
    os.close(current)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_MANIFEST_BYTES and (chunk := os.read(fd, MAX_MANIFEST_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
