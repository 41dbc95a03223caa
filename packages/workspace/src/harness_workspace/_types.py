"""The data types and the protocol of the workspace contract."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, Required, TypeAlias, TypedDict

import msgspec

from harness_workspace._signals import AbortSignal

__all__ = [
    "WORKSPACE_CAPABILITIES",
    "CommandRequest",
    "CommandResult",
    "DiffRequest",
    "DisposeRequest",
    "ExecuteCommand",
    "ExecuteRequest",
    "JsonValue",
    "ListFilesRequest",
    "ReadFileRequest",
    "SnapshotRequest",
    "Workspace",
    "WorkspaceCapability",
    "WorkspaceRequest",
    "WriteFileRequest",
]

if TYPE_CHECKING:
    JsonValue: TypeAlias = "bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue] | None"
else:
    # At run time the alias is one level deep, so that ``typing.get_type_hints`` resolves it
    # from any module and msgspec can decode and encode it (it supports no recursive
    # aliases); nested values are then arbitrary JSON.
    JsonValue = bool | int | float | str | Sequence[Any] | Mapping[str, Any] | None
"""Arbitrary JSON data: the only place the contract admits an open-ended value."""

WorkspaceCapability: TypeAlias = Literal[
    "read_file", "write_file", "list_files", "execute", "diff", "snapshot", "dispose"
]
"""The name of one of the seven workspace operations."""

WORKSPACE_CAPABILITIES: Final[tuple[WorkspaceCapability, ...]] = (
    "read_file",
    "write_file",
    "list_files",
    "execute",
    "diff",
    "snapshot",
    "dispose",
)
"""The seven operations in canonical order; binding walks this order."""


class CommandRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A command to run in a workspace: an argument vector, never a shell string.

    msgspec does not validate at construction; the dispatcher re-validates every field.
    """

    argv: tuple[str, ...]
    cwd: str | None = None
    timeout_ms: int | None = None
    signal: AbortSignal | None = None


class CommandResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The outcome of ``execute``. ``exit_code`` is ``None`` when the process had none."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool | None = None


class WorkspaceSnapshot(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An identifier for a workspace state, with JSON metadata.

    Snapshots returned by the dispatcher carry read-only metadata (a ``MappingProxyType``
    with tuples for arrays); serialise them with an ``enc_hook`` that returns ``dict(obj)``.
    """

    id: str
    created_at: str
    metadata: Mapping[str, JsonValue] | None = None


class Workspace(Protocol):
    """The canonical workspace capability: seven asynchronous operations, nothing else.

    It has no root, provider name or implementation selector, so model-facing code cannot
    branch on where the workspace lives. Used for static typing only; the runtime never
    checks it with ``isinstance``.
    """

    async def read_file(self, path: str) -> str:
        """Return the text of the file at ``path``."""
        ...

    async def write_file(self, path: str, contents: str) -> None:
        """Replace the file at ``path`` with ``contents``."""
        ...

    async def list_files(self, path: str) -> list[str]:
        """Return the file paths below ``path``."""
        ...

    async def execute(self, command: CommandRequest) -> CommandResult:
        """Run ``command`` and return its outcome."""
        ...

    async def diff(self) -> str:
        """Return the workspace's pending changes as a diff."""
        ...

    async def snapshot(self) -> WorkspaceSnapshot:
        """Return an identifier for the workspace's current state."""
        ...

    async def dispose(self) -> None:
        """Release the workspace; later operations fail."""
        ...


# Request shapes for ``invoke_workspace_operation``. They exist for static typing (the
# dispatcher's overloads narrow the return type); at run time every request is checked
# against the exact rules of the contract whatever its static type.


class ReadFileRequest(TypedDict):
    """``{"operation": "read_file", "path": …}``."""

    operation: Literal["read_file"]
    path: str


class WriteFileRequest(TypedDict):
    """``{"operation": "write_file", "path": …, "contents": …}``."""

    operation: Literal["write_file"]
    path: str
    contents: str


class ListFilesRequest(TypedDict):
    """``{"operation": "list_files", "path": …}``."""

    operation: Literal["list_files"]
    path: str


class ExecuteCommand(TypedDict, total=False):
    """The dict form of :class:`CommandRequest`."""

    argv: Required[Sequence[str]]
    cwd: str | None
    timeout_ms: int | None
    signal: AbortSignal | None


class ExecuteRequest(TypedDict):
    """``{"operation": "execute", "command": …}``."""

    operation: Literal["execute"]
    command: ExecuteCommand | CommandRequest


class DiffRequest(TypedDict):
    """``{"operation": "diff"}``."""

    operation: Literal["diff"]


class SnapshotRequest(TypedDict):
    """``{"operation": "snapshot"}``."""

    operation: Literal["snapshot"]


class DisposeRequest(TypedDict):
    """``{"operation": "dispose"}``."""

    operation: Literal["dispose"]


WorkspaceRequest: TypeAlias = (
    ReadFileRequest
    | WriteFileRequest
    | ListFilesRequest
    | ExecuteRequest
    | DiffRequest
    | SnapshotRequest
    | DisposeRequest
)
"""Any well-typed operation request."""
