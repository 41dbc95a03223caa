"""harness-sandbox's public surface: exactly these names, and codes that equal their names."""

from __future__ import annotations

import inspect

import harness_sandbox
from harness_sandbox import SANDBOX_ERROR_CODES, SandboxError
from harness_workspace import WorkspaceOperationError

EXPECTED = {
    "BubblewrapEngine",
    "CommandOutcome",
    "CommandSpec",
    "DEFAULT_DENY",
    "DeniedPolicy",
    "DockerEngine",
    "EnvironmentSpec",
    "LABEL",
    "SANDBOX_COPY_FAILED",
    "SANDBOX_DISK_LIMIT",
    "SANDBOX_DISPOSE_FAILED",
    "SANDBOX_ENGINE_UNAVAILABLE",
    "SANDBOX_ENVIRONMENT",
    "SANDBOX_ERROR_CODES",
    "SANDBOX_IDS_UNAVAILABLE",
    "SANDBOX_ID_RANGE",
    "SANDBOX_IMAGE_NOT_PINNED",
    "SANDBOX_SOURCE_INVALID",
    "SANDBOX_START_FAILED",
    "SandboxEngine",
    "SandboxEnvironment",
    "SandboxError",
    "SandboxLimits",
    "SandboxWorkspace",
    "is_isolating_engine",
    "WORKSPACE_MOUNT",
    "sweep_leftovers",
}


def test_the_package_exports_exactly_its_pinned_names() -> None:
    assert set(harness_sandbox.__all__) == EXPECTED
    assert len(harness_sandbox.__all__) == len(EXPECTED)
    public = {name for name in vars(harness_sandbox) if not name.startswith("_")}
    assert public - EXPECTED == {"annotations"}  # the __future__ import's name


def test_every_code_is_its_own_name_and_the_error_is_a_workspace_error() -> None:
    codes = {name for name in EXPECTED if name.startswith("SANDBOX_") and name.endswith(tuple(_CODE_ENDINGS))}
    assert {getattr(harness_sandbox, name) for name in codes} == SANDBOX_ERROR_CODES
    for name in codes:
        assert getattr(harness_sandbox, name) == name
    assert issubclass(SandboxError, WorkspaceOperationError)
    error = SandboxError(harness_sandbox.SANDBOX_DISK_LIMIT, "full", "write_file")
    assert (error.code, error.message, error.operation) == ("SANDBOX_DISK_LIMIT", "full", "write_file")


def test_the_workspace_has_the_seven_operations_as_coroutines() -> None:
    operations = ("read_file", "write_file", "list_files", "execute", "diff", "snapshot", "dispose")
    for name in operations:
        assert inspect.iscoroutinefunction(getattr(harness_sandbox.SandboxWorkspace, name)), name


_CODE_ENDINGS = ("_FAILED", "_LIMIT", "_UNAVAILABLE", "_NOT_PINNED", "_INVALID")
