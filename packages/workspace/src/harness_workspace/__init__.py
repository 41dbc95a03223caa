"""harness-workspace: the canonical Workspace capability contract.

Model-facing code never receives host authority directly. Outer, trusted code binds an
adapter (:func:`bind_workspace`), narrows it to the one operation a reviewed tool declared
(:func:`restrict_workspace`), and every call crosses :func:`invoke_workspace_operation`,
which treats both the request and the adapter's result as untrusted data.

The host-filesystem adapter lives in :mod:`harness_workspace.local` (``LocalWorkspace``);
its error class, :class:`LocalWorkspaceError`, is also exported here so that callers can
catch it without importing the adapter.
"""

from harness_workspace._dispatch import bind_workspace, invoke_workspace_operation, restrict_workspace
from harness_workspace._errors import (
    WORKSPACE_OPERATION_MALFORMED,
    WORKSPACE_OPERATION_REQUIRED,
    WORKSPACE_OPERATION_UNKNOWN,
    WORKSPACE_OPERATION_UNSUPPORTED,
    WorkspaceEscapesRootError,
    WorkspaceOperationError,
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnknownError,
    WorkspaceOperationUnsupportedError,
)
from harness_workspace._isolation import (
    WORKSPACE_ISOLATION_REQUIRED,
    WorkspaceIsolation,
    declare_isolation,
    isolation_of,
)
from harness_workspace._memory import CommandHandler, MemoryWorkspace
from harness_workspace._scope import WorkspacePathScope, open_workspace
from harness_workspace._signals import AbortController, AbortSignal, move_on_abort
from harness_workspace._types import (
    WORKSPACE_CAPABILITIES,
    CommandRequest,
    CommandResult,
    DiffRequest,
    DisposeRequest,
    ExecuteCommand,
    ExecuteRequest,
    JsonValue,
    ListFilesRequest,
    ReadFileRequest,
    SnapshotRequest,
    Workspace,
    WorkspaceCapability,
    WorkspaceRequest,
    WorkspaceSnapshot,
    WriteFileRequest,
)
from harness_workspace._version import WORKSPACE_CONTRACT_VERSION, __version__
from harness_workspace.local._errors import LocalWorkspaceError

__all__ = [
    "WORKSPACE_CAPABILITIES",
    "WORKSPACE_CONTRACT_VERSION",
    "WORKSPACE_ISOLATION_REQUIRED",
    "WORKSPACE_OPERATION_MALFORMED",
    "WORKSPACE_OPERATION_REQUIRED",
    "WORKSPACE_OPERATION_UNKNOWN",
    "WORKSPACE_OPERATION_UNSUPPORTED",
    "AbortController",
    "AbortSignal",
    "CommandHandler",
    "CommandRequest",
    "CommandResult",
    "DiffRequest",
    "DisposeRequest",
    "ExecuteCommand",
    "ExecuteRequest",
    "JsonValue",
    "ListFilesRequest",
    "LocalWorkspaceError",
    "MemoryWorkspace",
    "ReadFileRequest",
    "SnapshotRequest",
    "Workspace",
    "WorkspaceCapability",
    "WorkspaceEscapesRootError",
    "WorkspaceIsolation",
    "WorkspaceOperationError",
    "WorkspaceOperationMalformedError",
    "WorkspaceOperationRequiredError",
    "WorkspaceOperationUnknownError",
    "WorkspaceOperationUnsupportedError",
    "WorkspacePathScope",
    "WorkspaceRequest",
    "WorkspaceSnapshot",
    "WriteFileRequest",
    "__version__",
    "bind_workspace",
    "declare_isolation",
    "invoke_workspace_operation",
    "isolation_of",
    "move_on_abort",
    "open_workspace",
    "restrict_workspace",
]
