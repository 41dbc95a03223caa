"""harness-tools: reviewed tools whose effects go only through an injected workspace.

A tool declares what it may reach with an execution boundary (:func:`create_bounded_tool`),
bound to the tool object's identity. The runtime hands a workspace tool a one-operation view
of the workspace and nothing wider; this package itself never touches the host.
"""

from harness_tools._admission import (
    WORKSPACE_ADAPTER_REQUIRED,
    CallRule,
    ToolKind,
    admission_refusal,
    call_rule,
    is_advertised,
    is_effect_tool,
    tool_kind,
)
from harness_tools._arguments import ArgumentLimits, parse_tool_arguments
from harness_tools._boundaries import (
    REVIEWED_WORKSPACE_CAPABILITIES,
    WORKSPACE_CAPABILITY_ACCESS,
    PureBoundary,
    SandboxBoundary,
    ToolExecutionBoundary,
    WorkspaceBoundary,
    create_bounded_tool,
    get_tool_execution_boundary,
)
from harness_tools._dev_parameters import (
    EXEC_ARGUMENT_MAX_CHARS,
    EXEC_ARGV_MAX_ITEMS,
    EXEC_TIMEOUT_MAX_MS,
    READ_MAX_LINES,
    WRITE_MAX_BYTES,
    FsListParameters,
    FsReadParameters,
    FsWriteParameters,
    GitDiffParameters,
    ProcessExecParameters,
)
from harness_tools._dev_tools import (
    DEVELOPMENT_RESULT_MAX_BYTES,
    DEVELOPMENT_TOOL_NAMES,
    create_development_tools,
)
from harness_tools._echo import create_echo_tool
from harness_tools._errors import (
    TOOL_ARGUMENTS_INVALID,
    TOOL_EXECUTION_BOUNDARY_INVALID,
    TOOL_WORKSPACE_INVALID_ROOT,
    TOOL_WORKSPACE_PATH_INVALID,
    TOOL_WORKSPACE_READ_FAILED,
    TOOL_WORKSPACE_TOO_LARGE,
    InvalidToolArgumentsError,
    InvalidToolExecutionBoundaryError,
    InvalidWorkspacePathError,
    ToolError,
    WorkspaceFileAccessError,
)
from harness_tools._model import (
    Tool,
    ToolExecute,
    ToolExecutionContext,
    ToolPermissionIntent,
    create_tool,
    schema_for_parameters,
)
from harness_tools._paths import (
    WORKSPACE_PATH_MAX_CHARS,
    WORKSPACE_ROOT_PATH,
    WORKSPACE_SEGMENT_MAX_BYTES,
    check_workspace_path,
)
from harness_tools._read_file import READ_FILE_MAX_BYTES, ReadFileParameters, create_read_file_tool
from harness_tools._registry import ToolRegistry
from harness_tools._version import __version__

__all__ = [
    "DEVELOPMENT_RESULT_MAX_BYTES",
    "DEVELOPMENT_TOOL_NAMES",
    "EXEC_ARGUMENT_MAX_CHARS",
    "EXEC_ARGV_MAX_ITEMS",
    "EXEC_TIMEOUT_MAX_MS",
    "READ_FILE_MAX_BYTES",
    "READ_MAX_LINES",
    "REVIEWED_WORKSPACE_CAPABILITIES",
    "TOOL_ARGUMENTS_INVALID",
    "TOOL_EXECUTION_BOUNDARY_INVALID",
    "TOOL_WORKSPACE_INVALID_ROOT",
    "TOOL_WORKSPACE_PATH_INVALID",
    "TOOL_WORKSPACE_READ_FAILED",
    "TOOL_WORKSPACE_TOO_LARGE",
    "WORKSPACE_ADAPTER_REQUIRED",
    "WORKSPACE_CAPABILITY_ACCESS",
    "WORKSPACE_PATH_MAX_CHARS",
    "WORKSPACE_ROOT_PATH",
    "WORKSPACE_SEGMENT_MAX_BYTES",
    "WRITE_MAX_BYTES",
    "ArgumentLimits",
    "CallRule",
    "FsListParameters",
    "FsReadParameters",
    "FsWriteParameters",
    "GitDiffParameters",
    "InvalidToolArgumentsError",
    "InvalidToolExecutionBoundaryError",
    "InvalidWorkspacePathError",
    "ProcessExecParameters",
    "PureBoundary",
    "ReadFileParameters",
    "SandboxBoundary",
    "Tool",
    "ToolError",
    "ToolExecute",
    "ToolExecutionBoundary",
    "ToolExecutionContext",
    "ToolKind",
    "ToolPermissionIntent",
    "ToolRegistry",
    "WorkspaceBoundary",
    "WorkspaceFileAccessError",
    "__version__",
    "admission_refusal",
    "call_rule",
    "check_workspace_path",
    "create_bounded_tool",
    "create_development_tools",
    "create_echo_tool",
    "create_read_file_tool",
    "create_tool",
    "get_tool_execution_boundary",
    "is_advertised",
    "is_effect_tool",
    "parse_tool_arguments",
    "schema_for_parameters",
    "tool_kind",
]
