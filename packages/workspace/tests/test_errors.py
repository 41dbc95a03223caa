"""The typed error family of the workspace contract (spec §3.2)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pytest

from harness_workspace import (
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

PICKLE_PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


@dataclass(frozen=True)
class ErrorCase:
    """One constructor form of the §3.2 table and what it must produce."""

    error: WorkspaceOperationError
    error_class: type[WorkspaceOperationError]
    code: str
    operation: str | None
    message: str


ERROR_CASES = [
    pytest.param(
        ErrorCase(
            WorkspaceOperationError("SOME_CODE", "something failed", "diff"),
            WorkspaceOperationError,
            "SOME_CODE",
            "diff",
            "something failed",
        ),
        id="base-with-operation",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationError("SOME_CODE", "something failed"),
            WorkspaceOperationError,
            "SOME_CODE",
            None,
            "something failed",
        ),
        id="base-without-operation",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationRequiredError(),
            WorkspaceOperationRequiredError,
            "WORKSPACE_OPERATION_REQUIRED",
            None,
            "workspace capability is required",
        ),
        id="required-default-message",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationRequiredError("read_file requires an injected workspace capability"),
            WorkspaceOperationRequiredError,
            "WORKSPACE_OPERATION_REQUIRED",
            None,
            "read_file requires an injected workspace capability",
        ),
        id="required-custom-message",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationMalformedError("workspace operation must be an object"),
            WorkspaceOperationMalformedError,
            "WORKSPACE_OPERATION_MALFORMED",
            None,
            "workspace operation must be an object",
        ),
        id="malformed-without-operation",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationMalformedError("execute.command.argv must be an array", "execute"),
            WorkspaceOperationMalformedError,
            "WORKSPACE_OPERATION_MALFORMED",
            "execute",
            "execute.command.argv must be an array",
        ),
        id="malformed-with-operation",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationUnknownError("readFile"),
            WorkspaceOperationUnknownError,
            "WORKSPACE_OPERATION_UNKNOWN",
            "readFile",
            "unknown workspace operation: readFile",
        ),
        id="unknown",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationUnsupportedError("snapshot"),
            WorkspaceOperationUnsupportedError,
            "WORKSPACE_OPERATION_UNSUPPORTED",
            "snapshot",
            "workspace does not support operation: snapshot",
        ),
        id="unsupported-default-message",
    ),
    pytest.param(
        ErrorCase(
            WorkspaceOperationUnsupportedError(
                "write_file", "workspace view grants read_file, not write_file"
            ),
            WorkspaceOperationUnsupportedError,
            "WORKSPACE_OPERATION_UNSUPPORTED",
            "write_file",
            "workspace view grants read_file, not write_file",
        ),
        id="unsupported-custom-message",
    ),
]


def test_code_constants_are_their_own_names() -> None:
    assert WORKSPACE_OPERATION_REQUIRED == "WORKSPACE_OPERATION_REQUIRED"
    assert WORKSPACE_OPERATION_MALFORMED == "WORKSPACE_OPERATION_MALFORMED"
    assert WORKSPACE_OPERATION_UNKNOWN == "WORKSPACE_OPERATION_UNKNOWN"
    assert WORKSPACE_OPERATION_UNSUPPORTED == "WORKSPACE_OPERATION_UNSUPPORTED"


def test_base_error_is_a_direct_exception_subclass() -> None:
    assert WorkspaceOperationError.__bases__ == (Exception,)


@pytest.mark.parametrize(
    "error_class",
    [
        WorkspaceOperationRequiredError,
        WorkspaceOperationMalformedError,
        WorkspaceOperationUnknownError,
        WorkspaceOperationUnsupportedError,
    ],
    ids=["required", "malformed", "unknown", "unsupported"],
)
def test_each_specific_error_derives_directly_from_the_base_error(
    error_class: type[WorkspaceOperationError],
) -> None:
    assert error_class.__bases__ == (WorkspaceOperationError,)


@pytest.mark.parametrize("case", ERROR_CASES)
def test_error_carries_its_code_operation_and_message(case: ErrorCase) -> None:
    assert type(case.error) is case.error_class
    assert case.error.code == case.code
    assert case.error.operation == case.operation
    assert str(case.error) == case.message


@pytest.mark.parametrize("case", ERROR_CASES)
@pytest.mark.parametrize("protocol", PICKLE_PROTOCOLS)
def test_pickling_an_error_keeps_class_code_message_and_operation(case: ErrorCase, protocol: int) -> None:
    restored = pickle.loads(pickle.dumps(case.error, protocol=protocol))
    assert type(restored) is case.error_class
    assert restored.code == case.code
    assert restored.operation == case.operation
    assert str(restored) == case.message


def test_required_error_has_no_operation_even_with_a_custom_message() -> None:
    error = WorkspaceOperationRequiredError("workspace operation name is required")
    assert error.operation is None
    assert error.code == WORKSPACE_OPERATION_REQUIRED


def test_typed_errors_are_caught_as_the_base_error_and_as_exception() -> None:
    with pytest.raises(WorkspaceOperationError) as caught:
        raise WorkspaceOperationUnknownError("readFile")
    assert isinstance(caught.value, Exception)
    assert caught.value.code == WORKSPACE_OPERATION_UNKNOWN


def test_escape_error_is_a_value_error_and_not_a_workspace_operation_error() -> None:
    error = WorkspaceEscapesRootError("../etc/passwd", "/srv/work")
    assert isinstance(error, ValueError)
    assert not isinstance(error, WorkspaceOperationError)


def test_escape_error_reports_the_requested_path_and_the_root() -> None:
    error = WorkspaceEscapesRootError("../etc/passwd", "/srv/work")
    assert error.requested == "../etc/passwd"
    assert error.root == "/srv/work"
    assert str(error) == 'path "../etc/passwd" escapes the workspace root "/srv/work"'


@pytest.mark.parametrize("protocol", PICKLE_PROTOCOLS)
def test_pickling_an_escape_error_keeps_requested_root_and_message(protocol: int) -> None:
    error = WorkspaceEscapesRootError("/srv/work-evil/x", "/srv/work")
    restored = pickle.loads(pickle.dumps(error, protocol=protocol))
    assert type(restored) is WorkspaceEscapesRootError
    assert restored.requested == "/srv/work-evil/x"
    assert restored.root == "/srv/work"
    assert str(restored) == 'path "/srv/work-evil/x" escapes the workspace root "/srv/work"'
