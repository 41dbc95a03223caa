"""Pins the public surface of harness-tools (names and the signatures callers depend on)."""

from __future__ import annotations

import inspect

import harness_tools

EXPECTED_NAMES = {
    "EXEC_ARGUMENT_MAX_CHARS",
    "EXEC_ARGV_MAX_ITEMS",
    "EXEC_TIMEOUT_MAX_MS",
    "READ_MAX_LINES",
    "WRITE_MAX_BYTES",
    "FsListParameters",
    "FsReadParameters",
    "FsWriteParameters",
    "GitDiffParameters",
    "ProcessExecParameters",
    "DEVELOPMENT_RESULT_MAX_BYTES",
    "DEVELOPMENT_TOOL_NAMES",
    "create_development_tools",
    "ArgumentLimits",
    "CallRule",
    "ToolKind",
    "WORKSPACE_ADAPTER_REQUIRED",
    "admission_refusal",
    "call_rule",
    "is_advertised",
    "is_effect_tool",
    "tool_kind",
    "InvalidToolArgumentsError",
    "InvalidToolExecutionBoundaryError",
    "InvalidWorkspacePathError",
    "PureBoundary",
    "READ_FILE_MAX_BYTES",
    "REVIEWED_WORKSPACE_CAPABILITIES",
    "ReadFileParameters",
    "SandboxBoundary",
    "TOOL_ARGUMENTS_INVALID",
    "TOOL_EXECUTION_BOUNDARY_INVALID",
    "TOOL_WORKSPACE_INVALID_ROOT",
    "TOOL_WORKSPACE_PATH_INVALID",
    "TOOL_WORKSPACE_READ_FAILED",
    "TOOL_WORKSPACE_TOO_LARGE",
    "Tool",
    "ToolError",
    "ToolExecute",
    "ToolExecutionBoundary",
    "ToolExecutionContext",
    "ToolPermissionIntent",
    "ToolRegistry",
    "WorkspaceBoundary",
    "WorkspaceFileAccessError",
    "WORKSPACE_CAPABILITY_ACCESS",
    "WORKSPACE_PATH_MAX_CHARS",
    "WORKSPACE_ROOT_PATH",
    "WORKSPACE_SEGMENT_MAX_BYTES",
    "__version__",
    "check_workspace_path",
    "create_bounded_tool",
    "create_echo_tool",
    "create_read_file_tool",
    "create_tool",
    "get_tool_execution_boundary",
    "parse_tool_arguments",
    "schema_for_parameters",
}

EXPECTED_SIGNATURES = {
    "create_tool": (
        "(*, name: 'str', description: 'str', parameters: 'type[P]', "
        "execute: 'ToolExecute[P]', input_schema: 'dict[str, JsonValue] | None' = None, "
        "authorization: 'Callable[[P], ToolPermissionIntent] | None' = None) -> 'Tool[P]'"
    ),
    "create_bounded_tool": "(tool: 'Tool[P]', boundary: 'object') -> 'Tool[P]'",
    "get_tool_execution_boundary": "(tool: 'object') -> 'ToolExecutionBoundary | None'",
    "create_read_file_tool": "(workspace_root: 'str') -> 'Tool[ReadFileParameters]'",
    "create_echo_tool": "(name: 'str' = 'echo', fixed: 'str' = 'ok') -> 'Tool[dict[str, object]]'",
    "parse_tool_arguments": (
        "(tool: 'Tool[P]', arguments: 'object', *, "
        "limits: 'ArgumentLimits' = ArgumentLimits(max_depth=32, "
        "max_string_length=1048576, max_items=10000, max_nodes=100000)) -> 'P'"
    ),
    "schema_for_parameters": "(parameters: 'object') -> 'dict[str, JsonValue] | None'",
    "check_workspace_path": "(path: 'str', *, allow_root: 'bool' = False) -> 'str'",
}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(harness_tools.__all__) == EXPECTED_NAMES
    assert len(harness_tools.__all__) == len(EXPECTED_NAMES), "duplicate entries in __all__"
    for name in harness_tools.__all__:
        assert hasattr(harness_tools, name), name


def test_public_functions_keep_their_signatures() -> None:
    for name, expected in EXPECTED_SIGNATURES.items():
        assert str(inspect.signature(getattr(harness_tools, name))) == expected, name
