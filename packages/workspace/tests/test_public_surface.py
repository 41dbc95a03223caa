"""Pins the public surface of harness_workspace: names, signatures and constants.

A change here is a change of the contract that downstream teams pin. If this test fails,
either the change was accidental, or it must come with a version bump and a changelog entry
(see CHANGELOG.md and the versioning policy in ARCHITECTURE.md).
"""

from __future__ import annotations

import inspect
import re

import harness_workspace

EXPECTED_NAMES = {
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
}

EXPECTED_SIGNATURES = {
    "bind_workspace": "(value: 'object') -> 'Workspace'",
    "declare_isolation": "(workspace: 'W', isolation: 'WorkspaceIsolation') -> 'W'",
    "isolation_of": "(workspace: 'object') -> 'WorkspaceIsolation | None'",
    "restrict_workspace": "(value: 'object', capability: 'str') -> 'Workspace'",
    "invoke_workspace_operation": "(workspace: 'object', request: 'object') -> 'object'",
    "open_workspace": "(root: 'str | os.PathLike[str]') -> 'WorkspacePathScope'",
    "AbortController.abort": "(self, reason: 'object' = None) -> 'None'",
    "AbortSignal.any": "(signals: 'Iterable[AbortSignal]') -> 'AbortSignal'",
    "AbortSignal.aborted_with": "(reason: 'object' = None) -> 'AbortSignal'",
    "AbortSignal.wait": "(self) -> 'None'",
    "WorkspacePathScope.resolve_path": "(self, requested: 'str') -> 'str'",
    "WorkspaceOperationError.__init__": (
        "(self, code: 'str', message: 'str', operation: 'str | None' = None) -> 'None'"
    ),
    "WorkspaceOperationRequiredError.__init__": (
        "(self, message: 'str' = 'workspace capability is required') -> 'None'"
    ),
    "WorkspaceOperationMalformedError.__init__": (
        "(self, message: 'str', operation: 'str | None' = None) -> 'None'"
    ),
    "WorkspaceOperationUnknownError.__init__": "(self, operation: 'str') -> 'None'",
    "WorkspaceOperationUnsupportedError.__init__": (
        "(self, operation: 'str', message: 'str | None' = None) -> 'None'"
    ),
    "WorkspaceEscapesRootError.__init__": "(self, requested: 'str', root: 'str') -> 'None'",
    "LocalWorkspaceError.__init__": (
        "(self, code: 'str', message: 'str', operation: 'str | None' = None) -> 'None'"
    ),
    "MemoryWorkspace.__init__": (
        "(self, files: 'Mapping[str, str] | None' = None, *, "
        "commands: 'Mapping[str, CommandHandler] | None' = None, "
        "clock: 'Callable[[], str]' = <function utc_timestamp>) -> 'None'"
    ),
}

EXPECTED_STRUCT_FIELDS = {
    "CommandRequest": ("argv", "cwd", "timeout_ms", "signal"),
    "CommandResult": ("exit_code", "stdout", "stderr", "timed_out"),
    "WorkspaceSnapshot": ("id", "created_at", "metadata"),
}

PROTOCOL_METHODS = {
    "read_file": "(self, path: 'str') -> 'str'",
    "write_file": "(self, path: 'str', contents: 'str') -> 'None'",
    "list_files": "(self, path: 'str') -> 'list[str]'",
    "execute": "(self, command: 'CommandRequest') -> 'CommandResult'",
    "diff": "(self) -> 'str'",
    "snapshot": "(self) -> 'WorkspaceSnapshot'",
    "dispose": "(self) -> 'None'",
}


def _resolve(dotted: str) -> object:
    target: object = harness_workspace
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def test_all_lists_exactly_the_public_names() -> None:
    assert set(harness_workspace.__all__) == EXPECTED_NAMES
    assert len(harness_workspace.__all__) == len(EXPECTED_NAMES), "duplicate entries in __all__"


def test_every_public_name_is_importable() -> None:
    for name in harness_workspace.__all__:
        assert hasattr(harness_workspace, name), name


PUBLIC_SUBMODULES = {"conformance", "credentials", "local"}
"""Public modules that become package attributes once imported (not listed in ``__all__``)."""


def test_no_unlisted_public_module_attributes() -> None:
    public = {name for name in vars(harness_workspace) if not name.startswith("_")}
    assert public - EXPECTED_NAMES - PUBLIC_SUBMODULES == set()


def test_public_callables_keep_their_signatures() -> None:
    for dotted, expected in EXPECTED_SIGNATURES.items():
        function = _resolve(dotted)
        assert callable(function), dotted
        # Default values that are functions render with their address; drop it.
        rendered = re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(function)))
        assert rendered == expected, dotted


def test_capabilities_are_the_seven_operations_in_canonical_order() -> None:
    assert harness_workspace.WORKSPACE_CAPABILITIES == (
        "read_file",
        "write_file",
        "list_files",
        "execute",
        "diff",
        "snapshot",
        "dispose",
    )
    assert type(harness_workspace.WORKSPACE_CAPABILITIES) is tuple


def test_workspace_protocol_has_exactly_the_seven_async_operations() -> None:
    protocol = harness_workspace.Workspace
    members = {name for name, value in vars(protocol).items() if inspect.iscoroutinefunction(value)}
    assert members == set(PROTOCOL_METHODS)
    for name, expected in PROTOCOL_METHODS.items():
        assert str(inspect.signature(getattr(protocol, name))) == expected, name


def test_records_keep_their_fields_in_order() -> None:
    for name, fields in EXPECTED_STRUCT_FIELDS.items():
        record = getattr(harness_workspace, name)
        assert record.__struct_fields__ == fields, name
        assert record.__struct_config__.frozen, name
        assert record.__struct_config__.forbid_unknown_fields, name


def test_error_codes_are_stable() -> None:
    assert harness_workspace.WORKSPACE_OPERATION_REQUIRED == "WORKSPACE_OPERATION_REQUIRED"
    assert harness_workspace.WORKSPACE_OPERATION_MALFORMED == "WORKSPACE_OPERATION_MALFORMED"
    assert harness_workspace.WORKSPACE_OPERATION_UNKNOWN == "WORKSPACE_OPERATION_UNKNOWN"
    assert harness_workspace.WORKSPACE_OPERATION_UNSUPPORTED == "WORKSPACE_OPERATION_UNSUPPORTED"


def test_contract_version_matches_the_distribution_minor_version() -> None:
    major, minor, *_ = harness_workspace.__version__.split(".")
    assert f"{major}.{minor}" == harness_workspace.WORKSPACE_CONTRACT_VERSION


LOCAL_EXPECTED_NAMES = {
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_LIST_ENTRIES",
    "LOCAL_WORKSPACE_ERROR_CODES",
    "PROTECTED_HOST_PATHS",
    "WORKSPACE_COMMAND_ABORTED",
    "WORKSPACE_COMMAND_FAILED_TO_START",
    "WORKSPACE_COMMAND_NOT_FOUND",
    "WORKSPACE_DISPOSED",
    "WORKSPACE_GIT_FAILED",
    "WORKSPACE_GIT_TOO_LARGE",
    "WORKSPACE_GIT_UNAVAILABLE",
    "WORKSPACE_GIT_UNSUPPORTED",
    "WORKSPACE_INVALID_UTF8",
    "WORKSPACE_IO_FAILED",
    "WORKSPACE_LINKED_FILE",
    "WORKSPACE_LIST_TOO_LARGE",
    "WORKSPACE_NOT_A_DIRECTORY",
    "WORKSPACE_NOT_A_FILE",
    "WORKSPACE_NOT_A_REPOSITORY",
    "WORKSPACE_NOT_FOUND",
    "WORKSPACE_OUTPUT_TOO_LARGE",
    "WORKSPACE_PATH_ESCAPES_ROOT",
    "WORKSPACE_PATH_INVALID",
    "WORKSPACE_PATH_PROTECTED",
    "WORKSPACE_PATH_TOO_LONG",
    "WORKSPACE_PROTECTED_PATH_CHANGED",
    "WORKSPACE_SECRET_WITHHELD",
    "WORKSPACE_SYMLINK_REFUSED",
    "WORKSPACE_TIMEOUT_TOO_LARGE",
    "WORKSPACE_TOO_LARGE",
    "HeadTailOutput",
    "LocalWorkspace",
    "LocalWorkspaceError",
    "OutputSink",
    "ProcessLimits",
    "ResolverChoice",
    "SupervisedExit",
    "read_committed_file",
    "supervise_process",
}


def test_local_module_lists_exactly_its_public_names() -> None:
    from harness_workspace import local  # noqa: PLC0415  # the adapter module is opt-in

    assert set(local.__all__) == LOCAL_EXPECTED_NAMES
    assert len(local.__all__) == len(LOCAL_EXPECTED_NAMES)
    for name in local.__all__:
        assert getattr(local, name) is not None, name
    for name in LOCAL_EXPECTED_NAMES - {
        "HeadTailOutput",
        "LocalWorkspace",
        "LocalWorkspaceError",
        "OutputSink",
        "ProcessLimits",
        "ResolverChoice",
        "SupervisedExit",
        "read_committed_file",
        "supervise_process",
        "PROTECTED_HOST_PATHS",
    }:
        if name.startswith("WORKSPACE_"):
            assert getattr(local, name) == name
    assert {
        n for n in LOCAL_EXPECTED_NAMES if n.startswith("WORKSPACE_")
    } == local.LOCAL_WORKSPACE_ERROR_CODES
    assert local.LocalWorkspaceError is harness_workspace.LocalWorkspaceError
    rendered = re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(local.LocalWorkspace)))
    assert rendered == (
        "(root: 'str | os.PathLike[str]', *, max_file_bytes: 'int' = 4194304, "
        "max_list_entries: 'int' = 10000, process_limits: 'ProcessLimits | None' = None, "
        "environment: 'Mapping[str, str] | None' = None, resolver: 'ResolverChoice' = 'auto', "
        "protected_paths: 'Iterable[str]' = (), withhold_credentials: 'bool' = True) -> 'None'"
    )
    for name, expected in PROTOCOL_METHODS.items():
        assert str(inspect.signature(getattr(local.LocalWorkspace, name))) == expected, name


CREDENTIALS_EXPECTED_SIGNATURES = {
    "is_credential_path": "(path: 'str', patterns: 'Sequence[str]' = CREDENTIAL_PATTERNS) -> 'bool'",
    "is_git_config_path": "(path: 'str') -> 'bool'",
    "scrub_git_config": "(text: 'str') -> 'str'",
}


def test_credentials_module_lists_exactly_its_public_names() -> None:
    from harness_workspace import credentials  # noqa: PLC0415  # a public submodule

    assert set(credentials.__all__) == {
        "CREDENTIAL_PATTERNS",
        "GIT_CONFIG_PATH",
        *CREDENTIALS_EXPECTED_SIGNATURES,
    }
    assert credentials.GIT_CONFIG_PATH == ".git/config"
    assert type(credentials.CREDENTIAL_PATTERNS) is tuple
    for name, expected in CREDENTIALS_EXPECTED_SIGNATURES.items():
        rendered = str(inspect.signature(getattr(credentials, name)))
        rendered = rendered.replace(repr(credentials.CREDENTIAL_PATTERNS), "CREDENTIAL_PATTERNS")
        assert rendered == expected, name
