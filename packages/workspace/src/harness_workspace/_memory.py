"""``MemoryWorkspace``: the public in-memory fake adapter for tests and examples.

It touches no host resource: files live in a dict, commands are answered by handlers the
test supplies, the diff is computed against the files it started with. Every call is
recorded in :attr:`MemoryWorkspace.calls`, so a test can assert that an adapter was (or
was never) reached.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Final

import trio

from harness_workspace._errors import WorkspaceOperationUnsupportedError
from harness_workspace._isolation import declare_isolation
from harness_workspace._types import CommandRequest, CommandResult, WorkspaceSnapshot

__all__ = ["CommandHandler", "MemoryWorkspace"]

CommandHandler = Callable[[CommandRequest], "CommandResult | Awaitable[CommandResult]"]
"""Answers one command for a :class:`MemoryWorkspace`; keyed by program name (``argv[0]``)."""

_ROOT_NAMES: Final = frozenset({"", ".", "/"})


def utc_timestamp() -> str:
    """The current UTC time as ISO 8601 with microseconds and a `Z`, as snapshots carry it."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class MemoryWorkspace:
    """An in-memory :class:`~harness_workspace.Workspace` (a test double, not a host adapter).

    Paths are plain keys: ``"src/app.py"`` is a file, and ``list_files("src")`` returns
    every key below the directory ``src`` (``""``, ``"."`` or ``"/"`` list everything).

    Args:
        files: The initial files; the mapping is copied.
        commands: Handlers for ``execute``, keyed by program name. A handler may be
            synchronous or ``async``. An unknown program exits with 127, as a shell would.
            A handler can do anything, the host included, so a workspace built with
            handlers is not declared isolated: its creator, if it is a host, declares it
            (``declare_isolation(workspace, "in-memory")``) when it vouches for them.
        clock: Returns the ``created_at`` timestamp of snapshots (UTC ISO 8601 by default).

    After :meth:`dispose` every operation but ``dispose`` raises
    ``WorkspaceOperationUnsupportedError``; ``dispose`` itself is idempotent.
    """

    def __init__(
        self,
        files: Mapping[str, str] | None = None,
        *,
        commands: Mapping[str, CommandHandler] | None = None,
        clock: Callable[[], str] = utc_timestamp,
    ) -> None:
        self._files: dict[str, str] = dict(files or {})
        self._baseline: dict[str, str] = dict(self._files)
        self._commands: dict[str, CommandHandler] = dict(commands or {})
        self._clock = clock
        self._disposed = False
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        """Every call received, in order, as ``(operation, arguments)``."""
        if type(self) is MemoryWorkspace and not self._commands:
            # Only what cannot delegate vouches for itself: a subclass may add host effects
            # of its own, and a command handler may run anything anywhere.
            declare_isolation(self, "in-memory")

    @property
    def files(self) -> dict[str, str]:
        """A copy of the current files."""
        return dict(self._files)

    @property
    def disposed(self) -> bool:
        """Whether :meth:`dispose` has been called."""
        return self._disposed

    def _enter(self, operation: str, *arguments: object) -> None:
        self.calls.append((operation, arguments))
        if self._disposed:
            raise WorkspaceOperationUnsupportedError(operation, "workspace has been disposed")

    async def read_file(self, path: str) -> str:
        """Return the file's text; a missing file raises ``FileNotFoundError``."""
        self._enter("read_file", path)
        await trio.lowlevel.checkpoint()
        try:
            return self._files[path]
        except KeyError:
            raise FileNotFoundError(f"no such file in memory workspace: {path!r}") from None

    async def write_file(self, path: str, contents: str) -> None:
        """Create or replace the file."""
        self._enter("write_file", path, contents)
        await trio.lowlevel.checkpoint()
        self._files[path] = contents

    async def list_files(self, path: str) -> list[str]:
        """Return the sorted keys at or below the directory ``path``."""
        self._enter("list_files", path)
        await trio.lowlevel.checkpoint()
        if path in _ROOT_NAMES:
            return sorted(self._files)
        prefix = path.rstrip("/") + "/"
        return sorted(name for name in self._files if name == path or name.startswith(prefix))

    async def execute(self, command: CommandRequest) -> CommandResult:
        """Answer with the handler registered for ``argv[0]``, or exit 127."""
        self._enter("execute", command)
        await trio.lowlevel.checkpoint()
        handler = self._commands.get(command.argv[0])
        if handler is None:
            return CommandResult(exit_code=127, stdout="", stderr=f"{command.argv[0]}: not available\n")
        outcome = handler(command)
        if inspect.isawaitable(outcome):
            return await outcome
        return outcome

    async def diff(self) -> str:
        """Return a unified diff of every file added or changed since construction, in path order."""
        self._enter("diff")
        await trio.lowlevel.checkpoint()
        # The contract has no delete, so files are only ever added or changed.
        chunks: list[str] = []
        for name in sorted(self._files):
            before = self._baseline.get(name)
            after = self._files[name]
            if before == after:
                continue
            chunks.extend(
                difflib.unified_diff(
                    (before or "").splitlines(keepends=True),
                    after.splitlines(keepends=True),
                    fromfile="/dev/null" if before is None else f"a/{name}",
                    tofile=f"b/{name}",
                )
            )
        return "".join(chunks)

    async def snapshot(self) -> WorkspaceSnapshot:
        """Return a content-addressed id of the current files, with file and byte counts."""
        self._enter("snapshot")
        await trio.lowlevel.checkpoint()
        digest = hashlib.sha256()
        size = 0
        for name in sorted(self._files):
            encoded = self._files[name].encode("utf-8", "surrogatepass")
            size += len(encoded)
            for part in (name.encode("utf-8", "surrogatepass"), encoded):
                digest.update(len(part).to_bytes(8, "big"))
                digest.update(part)
        return WorkspaceSnapshot(
            id=f"mem-{digest.hexdigest()[:16]}",
            created_at=self._clock(),
            metadata={"files": len(self._files), "bytes": size},
        )

    async def dispose(self) -> None:
        """Drop every file; idempotent."""
        self.calls.append(("dispose", ()))
        await trio.lowlevel.checkpoint()
        self._disposed = True
        self._files.clear()
