"""``ReadOnlyWorkspace``: serves files from a mapping and refuses to change anything."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import trio
from harness_workspace import (
    CommandRequest,
    CommandResult,
    WorkspaceOperationUnsupportedError,
    WorkspaceSnapshot,
)

__all__ = ["ReadOnlyWorkspace"]


class ReadOnlyWorkspace:
    """A read-only :class:`harness_workspace.Workspace` over a fixed set of files.

    ``read_file``, ``list_files``, ``diff`` (always empty: nothing can change) and
    ``snapshot`` answer; ``write_file`` and ``execute`` raise
    ``WorkspaceOperationUnsupportedError``, as does every operation after ``dispose``.

    Args:
        files: Path to text; the mapping is copied.
        created_at: The timestamp carried by snapshots.
    """

    def __init__(self, files: Mapping[str, str], *, created_at: str = "1970-01-01T00:00:00Z") -> None:
        self._files: dict[str, str] = dict(files)
        self._created_at = created_at
        self._disposed = False

    def _check(self, operation: str) -> None:
        if self._disposed:
            raise WorkspaceOperationUnsupportedError(operation, "read-only workspace has been disposed")

    async def read_file(self, path: str) -> str:
        self._check("read_file")
        await trio.lowlevel.checkpoint()
        try:
            return self._files[path]
        except KeyError:
            raise FileNotFoundError(f"no such file in read-only workspace: {path!r}") from None

    async def write_file(self, path: str, contents: str) -> None:
        self._check("write_file")
        await trio.lowlevel.checkpoint()
        raise WorkspaceOperationUnsupportedError("write_file", f"read-only workspace: cannot write {path!r}")

    async def list_files(self, path: str) -> list[str]:
        self._check("list_files")
        await trio.lowlevel.checkpoint()
        if path in ("", ".", "/"):
            return sorted(self._files)
        prefix = path.rstrip("/") + "/"
        return sorted(name for name in self._files if name == path or name.startswith(prefix))

    async def execute(self, command: CommandRequest) -> CommandResult:
        self._check("execute")
        await trio.lowlevel.checkpoint()
        raise WorkspaceOperationUnsupportedError("execute", "read-only workspace runs no commands")

    async def diff(self) -> str:
        self._check("diff")
        await trio.lowlevel.checkpoint()
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        self._check("snapshot")
        await trio.lowlevel.checkpoint()
        digest = hashlib.sha256()
        for name in sorted(self._files):
            for part in (name.encode(), self._files[name].encode()):
                digest.update(len(part).to_bytes(8, "big"))
                digest.update(part)
        return WorkspaceSnapshot(
            id=f"ro-{digest.hexdigest()[:16]}",
            created_at=self._created_at,
            metadata={"files": len(self._files), "read_only": True},
        )

    async def dispose(self) -> None:
        await trio.lowlevel.checkpoint()
        self._disposed = True
