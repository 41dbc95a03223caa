"""``restrict_workspace``: frozen one-operation views (spec §3.4, examples in §7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import cast

import pytest

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    WORKSPACE_OPERATION_MALFORMED,
    WORKSPACE_OPERATION_REQUIRED,
    WORKSPACE_OPERATION_UNKNOWN,
    WORKSPACE_OPERATION_UNSUPPORTED,
    AbortController,
    AbortSignal,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    Workspace,
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnknownError,
    WorkspaceOperationUnsupportedError,
    WorkspaceSnapshot,
    bind_workspace,
    invoke_workspace_operation,
    restrict_workspace,
)

# ------------------------------------------------------------------ helpers

OTHER_PAIRS = [
    pytest.param(granted, other, id=f"{granted}-refuses-{other}")
    for granted in WORKSPACE_CAPABILITIES
    for other in WORKSPACE_CAPABILITIES
    if other != granted
]


def exploding_adapter() -> tuple[object, list[str]]:
    """An adapter whose every attribute lookup is recorded and then raises."""
    touched: list[str] = []

    class Exploding:
        def __getattribute__(self, name: str) -> object:
            touched.append(name)
            raise RuntimeError(f"adapter inspected: {name}")

    return Exploding(), touched


def call_operation(workspace: Workspace, operation: str) -> Awaitable[object]:
    """Start ``operation`` on ``workspace`` with well-formed arguments (not yet awaited)."""
    if operation == "read_file":
        return workspace.read_file("a.txt")
    if operation == "write_file":
        return workspace.write_file("b.txt", "beta")
    if operation == "list_files":
        return workspace.list_files(".")
    if operation == "execute":
        return workspace.execute(CommandRequest(argv=("make", "test")))
    if operation == "diff":
        return workspace.diff()
    if operation == "snapshot":
        return workspace.snapshot()
    assert operation == "dispose"
    return workspace.dispose()


def fixed_clock() -> str:
    return "2026-01-01T00:00:00Z"


def memory() -> MemoryWorkspace:
    return MemoryWorkspace({"a.txt": "alpha"}, clock=fixed_clock)


class ScriptedAdapter:
    """An adapter returning a preset value per operation and recording what it received."""

    def __init__(self, results: dict[str, object]) -> None:
        self.results = results
        self.received: list[tuple[str, tuple[object, ...]]] = []

    async def read_file(self, path: str) -> object:
        self.received.append(("read_file", (path,)))
        return self.results.get("read_file", "")

    async def write_file(self, path: str, contents: str) -> object:
        self.received.append(("write_file", (path, contents)))
        return self.results.get("write_file")

    async def list_files(self, path: str) -> object:
        self.received.append(("list_files", (path,)))
        return self.results.get("list_files", [])

    async def execute(self, command: CommandRequest) -> object:
        self.received.append(("execute", (command,)))
        return self.results.get("execute", {"exit_code": 0, "stdout": "", "stderr": ""})

    async def diff(self) -> object:
        self.received.append(("diff", ()))
        return self.results.get("diff", "")

    async def snapshot(self) -> object:
        self.received.append(("snapshot", ()))
        return self.results.get("snapshot", {"id": "s", "created_at": "t"})

    async def dispose(self) -> object:
        self.received.append(("dispose", ()))
        return self.results.get("dispose")


# ------------------------------------------------------------------ step 1: the capability name


@pytest.mark.parametrize(
    "name",
    ["readFile", "READ_FILE", "read_file ", " read_file", "", "delete_file", "root", "__class__", "read"],
)
def test_an_unknown_capability_name_is_rejected_before_the_adapter_is_inspected(name: str) -> None:
    adapter, touched = exploding_adapter()
    with pytest.raises(WorkspaceOperationUnknownError) as caught:
        restrict_workspace(adapter, name)
    assert caught.value.code == WORKSPACE_OPERATION_UNKNOWN
    assert caught.value.operation == name
    assert str(caught.value) == f"unknown workspace operation: {name}"
    assert touched == []


@pytest.mark.parametrize(
    "capability",
    [
        pytest.param(None, id="None"),
        pytest.param(1, id="int"),
        pytest.param(b"read_file", id="bytes"),
        pytest.param(("read_file",), id="tuple"),
        pytest.param(["read_file"], id="list"),
        pytest.param(True, id="bool"),
    ],
)
def test_a_non_string_capability_is_unknown_with_its_repr_as_operation(capability: object) -> None:
    adapter, touched = exploding_adapter()
    with pytest.raises(WorkspaceOperationUnknownError) as caught:
        restrict_workspace(adapter, cast(str, capability))
    assert caught.value.code == WORKSPACE_OPERATION_UNKNOWN
    assert caught.value.operation == repr(capability)
    assert str(caught.value) == f"unknown workspace operation: {capability!r}"
    assert touched == []


def test_a_str_subclass_naming_a_capability_is_unknown_and_the_adapter_is_untouched() -> None:
    class Name(str):
        pass

    adapter, touched = exploding_adapter()
    with pytest.raises(WorkspaceOperationUnknownError) as caught:
        restrict_workspace(adapter, Name("read_file"))
    assert caught.value.code == WORKSPACE_OPERATION_UNKNOWN
    assert touched == []


def test_an_unknown_name_wins_over_a_missing_workspace() -> None:
    with pytest.raises(WorkspaceOperationUnknownError) as caught:
        restrict_workspace(None, "readFile")
    assert caught.value.operation == "readFile"


# ------------------------------------------------------------------ step 2: binding errors


def test_restricting_none_raises_required() -> None:
    with pytest.raises(WorkspaceOperationRequiredError) as caught:
        restrict_workspace(None, "read_file")
    assert caught.value.code == WORKSPACE_OPERATION_REQUIRED
    assert str(caught.value) == "workspace capability is required"


@pytest.mark.parametrize(
    "value", ["workspace", {"read_file": None}, MemoryWorkspace], ids=["str", "dict", "class"]
)
def test_restricting_data_or_a_routine_raises_malformed(value: object) -> None:
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        restrict_workspace(value, "read_file")
    assert str(caught.value) == "workspace capability must be an object"


def test_restricting_an_incomplete_adapter_reports_its_first_missing_capability() -> None:
    class OnlyReads:
        async def read_file(self, path: str) -> str:
            return ""

    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        restrict_workspace(OnlyReads(), "read_file")
    assert caught.value.operation == "write_file"
    assert str(caught.value) == "workspace does not support operation: write_file"


def test_restricting_an_adapter_whose_getter_fails_is_malformed_with_the_cause_chained() -> None:
    adapter, touched = exploding_adapter()
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        restrict_workspace(adapter, "diff")
    assert caught.value.operation == "read_file"
    assert str(caught.value) == "workspace capability read_file could not be inspected"
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert touched[0] == "read_file"


# ------------------------------------------------------------------ step 3: the granted operation


async def test_a_view_granting_read_file_reads_through_the_adapter() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "read_file")
    assert await view.read_file("a.txt") == "alpha"
    assert adapter.calls == [("read_file", ("a.txt",))]


async def test_a_view_granting_write_file_writes_through_the_adapter() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "write_file")
    assert await view.write_file("b.txt", "beta") is None
    assert adapter.files == {"a.txt": "alpha", "b.txt": "beta"}
    assert adapter.calls == [("write_file", ("b.txt", "beta"))]


async def test_a_view_granting_list_files_lists_through_the_adapter() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "list_files")
    assert await view.list_files(".") == ["a.txt"]
    assert adapter.calls == [("list_files", (".",))]


async def test_a_view_granting_execute_runs_commands_through_the_adapter() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "execute")
    result = await view.execute(CommandRequest(argv=("make", "test")))
    assert result == CommandResult(exit_code=127, stdout="", stderr="make: not available\n")
    assert [name for name, _ in adapter.calls] == ["execute"]


async def test_a_view_granting_diff_diffs_through_the_adapter() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "diff")
    assert await view.diff() == ""
    assert adapter.calls == [("diff", ())]


async def test_a_view_granting_snapshot_snapshots_through_the_adapter() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "snapshot")
    snapshot = await view.snapshot()
    assert type(snapshot) is WorkspaceSnapshot
    assert snapshot.id.startswith("mem-")
    assert snapshot.created_at == "2026-01-01T00:00:00Z"
    assert type(snapshot.metadata) is MappingProxyType
    assert adapter.calls == [("snapshot", ())]


async def test_a_view_granting_dispose_disposes_through_the_adapter() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "dispose")
    assert await view.dispose() is None
    assert adapter.disposed
    assert adapter.calls == [("dispose", ())]


StartCall = Callable[[Workspace], Awaitable[object]]


def starting(start: StartCall) -> StartCall:
    """Give a parametrised call its static type."""
    return start


BAD_ARGUMENTS = [
    pytest.param(
        "read_file",
        starting(lambda view: view.read_file("")),
        "read_file.path must be a nonempty string",
        id="read_file-empty-path",
    ),
    pytest.param(
        "read_file",
        starting(lambda view: view.read_file(cast(str, b"a.txt"))),
        "read_file.path must be a nonempty string",
        id="read_file-bytes-path",
    ),
    pytest.param(
        "list_files",
        starting(lambda view: view.list_files("")),
        "list_files.path must be a nonempty string",
        id="list_files-empty-path",
    ),
    pytest.param(
        "write_file",
        starting(lambda view: view.write_file("", "text")),
        "write_file.path must be a nonempty string",
        id="write_file-empty-path",
    ),
    pytest.param(
        "write_file",
        starting(lambda view: view.write_file("", cast(str, None))),
        "write_file.contents must be a string",
        id="write_file-contents-checked-before-path",
    ),
    pytest.param(
        "execute",
        starting(lambda view: view.execute(CommandRequest(argv=()))),
        "execute.command.argv must contain a program",
        id="execute-empty-argv",
    ),
    pytest.param(
        "execute",
        starting(lambda view: view.execute(cast(CommandRequest, "make test"))),
        "execute.command must be an object",
        id="execute-shell-string",
    ),
    pytest.param(
        "execute",
        starting(lambda view: view.execute(cast(CommandRequest, {"argv": ["make"], "shell": True}))),
        "execute.command contains unexpected property 'shell'",
        id="execute-unexpected-key",
    ),
    pytest.param(
        "execute",
        starting(lambda view: view.execute(CommandRequest(argv=("make",), timeout_ms=-1))),
        "execute.command.timeout_ms must be a nonnegative safe integer when provided",
        id="execute-negative-timeout",
    ),
]


@pytest.mark.parametrize(("capability", "start_call", "message"), BAD_ARGUMENTS)
async def test_the_granted_operation_validates_its_arguments_before_the_adapter_is_called(
    capability: str, start_call: StartCall, message: str
) -> None:
    adapter = memory()
    view = restrict_workspace(adapter, capability)
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await start_call(view)
    assert caught.value.code == WORKSPACE_OPERATION_MALFORMED
    assert caught.value.operation == capability
    assert str(caught.value) == message
    assert adapter.calls == []


BAD_RESULTS = [
    pytest.param("read_file", b"alpha", "read_file returned a non-string result", id="read_file-bytes"),
    pytest.param("write_file", "done", "write_file returned a non-void result", id="write_file-str"),
    pytest.param("list_files", "a.txt", "list_files returned a malformed path list", id="list_files-str"),
    pytest.param(
        "execute",
        {"exit_code": True, "stdout": "", "stderr": ""},
        "execute returned a command result with an invalid exit_code",
        id="execute-bool-exit-code",
    ),
    pytest.param("diff", None, "diff returned a non-string result", id="diff-none"),
    pytest.param(
        "snapshot",
        {"id": "", "created_at": "t"},
        "snapshot.id must be a nonempty string",
        id="snapshot-empty-id",
    ),
    pytest.param("dispose", False, "dispose returned a non-void result", id="dispose-false"),
]


@pytest.mark.parametrize(("capability", "bad_result", "message"), BAD_RESULTS)
async def test_the_granted_operation_rejects_a_malformed_adapter_result(
    capability: str, bad_result: object, message: str
) -> None:
    adapter = ScriptedAdapter({capability: bad_result})
    view = restrict_workspace(adapter, capability)
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await call_operation(view, capability)
    assert caught.value.operation == capability
    assert str(caught.value) == message
    assert [name for name, _ in adapter.received] == [capability]


async def test_a_listed_path_list_is_a_new_list_detached_from_the_adapter() -> None:
    paths = ["a.txt", "b.txt"]
    view = restrict_workspace(ScriptedAdapter({"list_files": paths}), "list_files")
    listed = await view.list_files("src")
    assert listed == ["a.txt", "b.txt"]
    assert listed is not paths
    paths.append("c.txt")
    assert listed == ["a.txt", "b.txt"]


async def test_snapshot_metadata_from_a_view_is_a_read_only_detached_copy() -> None:
    metadata: dict[str, object] = {"files": 1, "tags": ["x"]}
    view = restrict_workspace(
        ScriptedAdapter({"snapshot": {"id": "s-1", "created_at": "t", "metadata": metadata}}), "snapshot"
    )
    snapshot = await view.snapshot()
    assert snapshot.metadata == {"files": 1, "tags": ("x",)}
    metadata["files"] = 99
    assert snapshot.metadata == {"files": 1, "tags": ("x",)}
    with pytest.raises(TypeError):
        cast(dict[str, object], snapshot.metadata)["files"] = 2


async def test_an_execute_result_given_as_a_dict_comes_back_as_a_command_result() -> None:
    view = restrict_workspace(
        ScriptedAdapter({"execute": {"exit_code": None, "stdout": "o", "stderr": "e"}}), "execute"
    )
    assert await view.execute(CommandRequest(argv=("run",))) == CommandResult(
        exit_code=None, stdout="o", stderr="e", timed_out=None
    )


async def test_the_adapter_receives_a_fresh_command_with_a_linked_signal() -> None:
    adapter = ScriptedAdapter({})
    view = restrict_workspace(adapter, "execute")
    controller = AbortController()
    command = CommandRequest(argv=("make", "test"), cwd="src", timeout_ms=0, signal=controller.signal)
    await view.execute(command)
    [(_, (received,))] = adapter.received
    assert type(received) is CommandRequest
    assert received is not command
    assert received.argv == ("make", "test")
    assert received.cwd == "src"
    assert received.timeout_ms == 0
    assert type(received.signal) is AbortSignal
    assert received.signal is not controller.signal
    controller.abort("stop")
    assert received.signal.aborted
    assert received.signal.reason == "stop"


# ------------------------------------------------------------------ the refused operations


@pytest.mark.parametrize(("granted", "other"), OTHER_PAIRS)
async def test_a_view_refuses_every_other_operation_without_touching_the_adapter(
    granted: str, other: str
) -> None:
    adapter = memory()
    view = restrict_workspace(adapter, granted)
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await call_operation(view, other)
    assert caught.value.code == WORKSPACE_OPERATION_UNSUPPORTED
    assert caught.value.operation == other
    assert str(caught.value) == f"workspace view grants {granted}, not {other}"
    assert adapter.calls == []
    assert adapter.files == {"a.txt": "alpha"}
    assert not adapter.disposed


@pytest.mark.parametrize(("granted", "other"), OTHER_PAIRS)
async def test_a_refused_operation_raises_only_when_awaited(granted: str, other: str) -> None:
    view = restrict_workspace(memory(), granted)
    pending = call_operation(view, other)
    with pytest.raises(WorkspaceOperationUnsupportedError):
        await pending


async def test_a_refused_operation_ignores_malformed_arguments_and_still_refuses() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "read_file")
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await view.write_file("", cast(str, None))
    assert caught.value.operation == "write_file"
    assert adapter.calls == []


async def test_a_view_refuses_for_an_adapter_that_would_explode_when_called() -> None:
    class ExplodingCalls:
        def __init__(self) -> None:
            self.called: list[str] = []

        def _explode(self, name: str) -> None:
            self.called.append(name)
            raise AssertionError(f"{name} must not be called")

        async def read_file(self, path: str) -> str:
            self._explode("read_file")
            return ""

        async def write_file(self, path: str, contents: str) -> None:
            self._explode("write_file")

        async def list_files(self, path: str) -> list[str]:
            self._explode("list_files")
            return []

        async def execute(self, command: CommandRequest) -> CommandResult:
            self._explode("execute")
            return CommandResult(exit_code=0, stdout="", stderr="")

        async def diff(self) -> str:
            self._explode("diff")
            return ""

        async def snapshot(self) -> WorkspaceSnapshot:
            self._explode("snapshot")
            return WorkspaceSnapshot(id="x", created_at="y")

        async def dispose(self) -> None:
            self._explode("dispose")

    adapter = ExplodingCalls()
    view = restrict_workspace(adapter, "diff")
    for other in WORKSPACE_CAPABILITIES:
        if other == "diff":
            continue
        with pytest.raises(WorkspaceOperationUnsupportedError):
            await call_operation(view, other)
    assert adapter.called == []


# ------------------------------------------------------------------ frozen, opaque views


@pytest.mark.parametrize("name", [*WORKSPACE_CAPABILITIES, "_bound", "_granted", "_methods", "extra"])
def test_a_view_refuses_attribute_assignment(name: str) -> None:
    view = restrict_workspace(memory(), "read_file")
    with pytest.raises(AttributeError):
        setattr(view, name, memory())


@pytest.mark.parametrize("name", [*WORKSPACE_CAPABILITIES, "_bound", "_granted", "_methods"])
def test_a_view_refuses_attribute_deletion(name: str) -> None:
    view = restrict_workspace(memory(), "read_file")
    with pytest.raises(AttributeError):
        delattr(view, name)


async def test_a_view_keeps_working_after_refused_writes() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "read_file")
    other = restrict_workspace(MemoryWorkspace({"a.txt": "forged"}), "read_file")
    with pytest.raises(AttributeError):
        setattr(view, "read_file", other.read_file)  # noqa: B010  # the point is a dynamic write
    with pytest.raises(AttributeError):
        setattr(view, "_granted", "write_file")  # noqa: B010  # the point is a dynamic write
    assert await view.read_file("a.txt") == "alpha"
    with pytest.raises(WorkspaceOperationUnsupportedError):
        await view.write_file("a.txt", "")


@pytest.mark.parametrize("capability", WORKSPACE_CAPABILITIES)
def test_the_public_names_of_a_view_are_exactly_the_seven_operations(capability: str) -> None:
    view = restrict_workspace(memory(), capability)
    public = {name for name in dir(view) if not name.startswith("_")}
    assert public == set(WORKSPACE_CAPABILITIES)


@pytest.mark.parametrize("capability", WORKSPACE_CAPABILITIES)
def test_no_public_attribute_of_a_view_leads_to_the_adapter(capability: str) -> None:
    adapter = memory()
    view = restrict_workspace(adapter, capability)
    for name in dir(view):
        if name.startswith("_"):
            continue
        attribute: object = getattr(view, name)
        assert attribute is not adapter
        assert getattr(attribute, "__self__", None) is not adapter
        assert callable(attribute)


# ------------------------------------------------------------------ composition


async def test_a_view_of_a_view_with_the_same_grant_works() -> None:
    adapter = memory()
    outer = restrict_workspace(restrict_workspace(adapter, "read_file"), "read_file")
    assert await outer.read_file("a.txt") == "alpha"
    assert adapter.calls == [("read_file", ("a.txt",))]


async def test_a_view_of_a_view_cannot_widen_the_inner_grant() -> None:
    adapter = memory()
    outer = restrict_workspace(restrict_workspace(adapter, "read_file"), "write_file")
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await outer.write_file("a.txt", "overwritten")
    assert caught.value.operation == "write_file"
    assert adapter.calls == []
    assert adapter.files == {"a.txt": "alpha"}


async def test_a_view_of_a_view_refuses_what_the_outer_view_does_not_grant() -> None:
    adapter = memory()
    outer = restrict_workspace(restrict_workspace(adapter, "read_file"), "diff")
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await outer.read_file("a.txt")
    assert str(caught.value) == "workspace view grants diff, not read_file"
    assert adapter.calls == []


async def test_views_of_views_return_the_same_validated_read_only_snapshot() -> None:
    adapter = memory()
    inner = restrict_workspace(adapter, "snapshot")
    outer = restrict_workspace(inner, "snapshot")
    snapshot = await outer.snapshot()
    assert snapshot == await inner.snapshot()
    assert type(snapshot.metadata) is MappingProxyType


async def test_a_view_of_a_bound_facade_works() -> None:
    adapter = memory()
    view = restrict_workspace(bind_workspace(adapter), "list_files")
    assert await view.list_files(".") == ["a.txt"]


def test_binding_a_view_returns_the_view() -> None:
    view = restrict_workspace(memory(), "diff")
    assert bind_workspace(view) is view


async def test_a_view_passed_to_the_dispatcher_still_refuses_other_operations() -> None:
    adapter = memory()
    view = restrict_workspace(adapter, "read_file")
    assert await invoke_workspace_operation(view, {"operation": "read_file", "path": "a.txt"}) == "alpha"
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await invoke_workspace_operation(view, {"operation": "dispose"})
    assert caught.value.operation == "dispose"
    assert not adapter.disposed


# ------------------------------------------------------------------ the examples of §7


class SpecExampleWorkspace:
    """The minimal in-memory adapter of spec §7, as written there."""

    def __init__(self, files: dict[str, str]) -> None:
        self._files = dict(files)

    async def read_file(self, path: str) -> str:
        return self._files[path]

    async def write_file(self, path: str, contents: str) -> None:
        self._files[path] = contents

    async def list_files(self, path: str) -> list[str]:
        return sorted(p for p in self._files if p.startswith(path))

    async def execute(self, command: CommandRequest) -> CommandResult:
        return CommandResult(exit_code=127, stdout="", stderr=f"{command.argv[0]}: not available\n")

    async def diff(self) -> str:
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        return WorkspaceSnapshot(
            id="mem-1", created_at="2026-01-01T00:00:00Z", metadata={"files": len(self._files)}
        )

    async def dispose(self) -> None:
        self._files.clear()


async def test_the_binding_example_of_section_7_works_as_written() -> None:
    adapter = SpecExampleWorkspace({"README.md": "# demo\n"})
    ws = bind_workspace(adapter)

    async def forged(path: str) -> str:
        return "forged"

    setattr(adapter, "read_file", forged)  # noqa: B010  # as written in the spec
    assert await ws.read_file("README.md") == "# demo\n"
    with pytest.raises(AttributeError):
        setattr(ws, "read_file", forged)  # noqa: B010  # as written in the spec


async def test_the_restriction_example_of_section_7_works_without_the_tool() -> None:
    adapter = SpecExampleWorkspace({"README.md": "# demo\n"})
    view = restrict_workspace(bind_workspace(adapter), "read_file")
    assert await view.read_file("README.md") == "# demo\n"
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await view.write_file("README.md", "")
    assert caught.value.operation == "write_file"
    assert await adapter.read_file("README.md") == "# demo\n"


async def test_the_dispatcher_example_of_section_7_works_as_written() -> None:
    ws = bind_workspace(SpecExampleWorkspace({}))
    controller = AbortController()
    result = await invoke_workspace_operation(
        ws,
        {
            "operation": "execute",
            "command": {"argv": ["make", "test"], "timeout_ms": 30_000, "signal": controller.signal},
        },
    )
    assert isinstance(result, CommandResult)
    assert result.exit_code == 127
    controller.abort("stopped by the user")
    assert controller.signal.aborted


async def test_the_example_adapter_snapshot_passes_through_a_snapshot_view() -> None:
    view = restrict_workspace(SpecExampleWorkspace({"README.md": "# demo\n"}), "snapshot")
    snapshot = await view.snapshot()
    assert snapshot.id == "mem-1"
    assert snapshot.metadata == {"files": 1}
