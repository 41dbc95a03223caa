"""Requests crossing ``invoke_workspace_operation``: check order and propagation (spec §3.5).

A bad request wins over a missing workspace; a valid one reaches the adapter once, and what
the adapter returns or raises comes back as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import trio
from workspace_dispatch_fixtures import (
    assert_error,
)

from harness_workspace import (
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    WorkspaceOperationError,
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnknownError,
    WorkspaceOperationUnsupportedError,
    WorkspaceSnapshot,
    invoke_workspace_operation,
)

# ------------------------------------------------------------------ §3.5 order and propagation


VALID_REQUESTS = [
    pytest.param({"operation": "read_file", "path": "a.txt"}, id="read_file"),
    pytest.param({"operation": "write_file", "path": "a.txt", "contents": "x"}, id="write_file"),
    pytest.param({"operation": "list_files", "path": "."}, id="list_files"),
    pytest.param({"operation": "execute", "command": {"argv": ["ls"]}}, id="execute"),
    pytest.param({"operation": "diff"}, id="diff"),
    pytest.param({"operation": "snapshot"}, id="snapshot"),
    pytest.param({"operation": "dispose"}, id="dispose"),
]


@pytest.mark.parametrize("request_value", VALID_REQUESTS)
async def test_valid_request_without_a_workspace_is_required(request_value: dict[str, object]) -> None:
    with pytest.raises(WorkspaceOperationRequiredError) as caught:
        await invoke_workspace_operation(None, request_value)
    assert_error(caught.value, WorkspaceOperationRequiredError, "workspace capability is required", None)


@pytest.mark.parametrize(
    ("request_value", "error_type", "message", "operation"),
    [
        pytest.param(
            {"operation": "readFile"},
            WorkspaceOperationUnknownError,
            "unknown workspace operation: readFile",
            "readFile",
            id="unknown-operation",
        ),
        pytest.param(
            {"operation": "read_file", "path": ""},
            WorkspaceOperationMalformedError,
            "read_file.path must be a nonempty string",
            "read_file",
            id="malformed-field",
        ),
        pytest.param(
            {}, WorkspaceOperationRequiredError, "workspace operation name is required", None, id="no-name"
        ),
        pytest.param(
            [],
            WorkspaceOperationMalformedError,
            "workspace operation must be an object",
            None,
            id="not-a-dict",
        ),
    ],
)
async def test_bad_request_wins_over_a_missing_workspace(
    request_value: object,
    error_type: type[WorkspaceOperationError],
    message: str,
    operation: str | None,
) -> None:
    with pytest.raises(WorkspaceOperationError) as caught:
        await invoke_workspace_operation(None, request_value)
    assert_error(caught.value, error_type, message, operation)


class IncompleteWorkspace:
    """Has six of the seven operations: ``dispose`` is missing."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def read_file(self, path: str) -> str:
        self.calls.append("read_file")
        return "text"

    async def write_file(self, path: str, contents: str) -> None:
        self.calls.append("write_file")

    async def list_files(self, path: str) -> list[str]:
        self.calls.append("list_files")
        return []

    async def execute(self, command: CommandRequest) -> CommandResult:
        self.calls.append("execute")
        return CommandResult(exit_code=0, stdout="", stderr="")

    async def diff(self) -> str:
        self.calls.append("diff")
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        self.calls.append("snapshot")
        return WorkspaceSnapshot(id="s", created_at="t")


async def test_workspace_that_fails_binding_is_never_called() -> None:
    adapter = IncompleteWorkspace()
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await invoke_workspace_operation(adapter, {"operation": "read_file", "path": "a.txt"})
    message = "workspace does not support operation: dispose"
    assert_error(caught.value, WorkspaceOperationUnsupportedError, message, "dispose")
    assert adapter.calls == []


@pytest.mark.parametrize("request_value", VALID_REQUESTS)
async def test_valid_request_reaches_the_adapter_exactly_once(request_value: dict[str, object]) -> None:
    memory = MemoryWorkspace({"a.txt": "text"})
    await invoke_workspace_operation(memory, request_value)
    assert [name for name, _ in memory.calls] == [request_value["operation"]]


class FailingWorkspace:
    """Every (async) operation raises the given exception."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def read_file(self, path: str) -> str:
        raise self.error

    async def write_file(self, path: str, contents: str) -> None:
        raise self.error

    async def list_files(self, path: str) -> list[str]:
        raise self.error

    async def execute(self, command: CommandRequest) -> CommandResult:
        raise self.error

    async def diff(self) -> str:
        raise self.error

    async def snapshot(self) -> WorkspaceSnapshot:
        raise self.error

    async def dispose(self) -> None:
        raise self.error


class SynchronouslyFailingWorkspace:
    """Plain (non-async) methods that raise the given exception when called."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def read_file(self, path: str) -> str:
        raise self.error

    def write_file(self, path: str, contents: str) -> None:
        raise self.error

    def list_files(self, path: str) -> list[str]:
        raise self.error

    def execute(self, command: CommandRequest) -> CommandResult:
        raise self.error

    def diff(self) -> str:
        raise self.error

    def snapshot(self) -> WorkspaceSnapshot:
        raise self.error

    def dispose(self) -> None:
        raise self.error


class AdapterBaseException(BaseException):
    """A ``BaseException`` that is not an ``Exception``."""


@pytest.mark.parametrize("request_value", VALID_REQUESTS)
@pytest.mark.parametrize(
    "make_error",
    [
        pytest.param(lambda: RuntimeError("adapter broke"), id="RuntimeError"),
        pytest.param(lambda: KeyError("a.txt"), id="KeyError"),
        pytest.param(lambda: FileNotFoundError("a.txt"), id="FileNotFoundError"),
        pytest.param(lambda: TypeError("bad"), id="TypeError"),
        pytest.param(
            lambda: WorkspaceOperationUnsupportedError("read_file", "disposed"), id="typed-Unsupported"
        ),
        pytest.param(lambda: WorkspaceOperationMalformedError("adapter says no", "x"), id="typed-Malformed"),
        pytest.param(lambda: AdapterBaseException("stop"), id="BaseException"),
    ],
)
@pytest.mark.parametrize(
    "make_adapter",
    [
        pytest.param(FailingWorkspace, id="async-adapter"),
        pytest.param(SynchronouslyFailingWorkspace, id="sync-adapter"),
    ],
)
async def test_adapter_exception_propagates_as_the_same_object_without_wrapping(
    request_value: dict[str, object],
    make_error: Callable[[], BaseException],
    make_adapter: Callable[[BaseException], object],
) -> None:
    error = make_error()
    adapter = make_adapter(error)
    with pytest.raises(BaseException) as caught:  # noqa: PT011  # identity is asserted below
        await invoke_workspace_operation(adapter, request_value)
    assert caught.value is error
    assert error.__cause__ is None
    assert not error.__suppress_context__


class SynchronousWorkspace:
    """Plain (non-async) methods: their return values are used as they are."""

    def __init__(self) -> None:
        self.text = "contents of a.txt"
        self.diff_text = "--- a/x\n+++ b/x\n"
        self.calls: list[str] = []

    def read_file(self, path: str) -> str:
        self.calls.append("read_file")
        return self.text

    def write_file(self, path: str, contents: str) -> None:
        self.calls.append("write_file")

    def list_files(self, path: str) -> list[str]:
        self.calls.append("list_files")
        return ["a.txt", "b.txt"]

    def execute(self, command: CommandRequest) -> CommandResult:
        self.calls.append("execute")
        return CommandResult(exit_code=0, stdout="ok", stderr="")

    def diff(self) -> str:
        self.calls.append("diff")
        return self.diff_text

    def snapshot(self) -> WorkspaceSnapshot:
        self.calls.append("snapshot")
        return WorkspaceSnapshot(id="sync-1", created_at="2026-01-01T00:00:00Z")

    def dispose(self) -> None:
        self.calls.append("dispose")


async def test_synchronous_adapter_return_values_are_used_as_they_are() -> None:
    adapter = SynchronousWorkspace()
    text = await invoke_workspace_operation(adapter, {"operation": "read_file", "path": "a.txt"})
    assert text is adapter.text
    assert await invoke_workspace_operation(adapter, {"operation": "diff"}) is adapter.diff_text
    assert await invoke_workspace_operation(adapter, {"operation": "list_files", "path": "."}) == [
        "a.txt",
        "b.txt",
    ]
    assert (
        await invoke_workspace_operation(
            adapter, {"operation": "write_file", "path": "a.txt", "contents": ""}
        )
        is None
    )
    result = await invoke_workspace_operation(adapter, {"operation": "execute", "command": {"argv": ["ls"]}})
    assert result == CommandResult(exit_code=0, stdout="ok", stderr="")
    snapshot = await invoke_workspace_operation(adapter, {"operation": "snapshot"})
    assert (snapshot.id, snapshot.created_at, snapshot.metadata) == ("sync-1", "2026-01-01T00:00:00Z", None)
    assert await invoke_workspace_operation(adapter, {"operation": "dispose"}) is None
    order = ["read_file", "diff", "list_files", "write_file", "execute", "snapshot", "dispose"]
    assert adapter.calls == order


async def test_dispatcher_adds_no_checkpoint_of_its_own() -> None:
    adapter = SynchronousWorkspace()
    text: str | None = None
    with trio.CancelScope() as scope:
        scope.cancel()
        text = await invoke_workspace_operation(adapter, {"operation": "read_file", "path": "a.txt"})
    assert text == adapter.text
    assert not scope.cancelled_caught


class AwaitableReturningWorkspace(SynchronousWorkspace):
    """A plain method that returns an awaitable: the dispatcher awaits it."""

    def read_file(self, path: str) -> str:
        async def later() -> str:
            return f"awaited {path}"

        return cast("str", later())


async def test_awaitable_returned_by_a_plain_method_is_awaited() -> None:
    adapter = AwaitableReturningWorkspace()
    text = await invoke_workspace_operation(adapter, {"operation": "read_file", "path": "a.txt"})
    assert text == "awaited a.txt"
