"""``read_file``: the reviewed tool that reads through an injected workspace (spec §4.4, §7)."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import types
from collections.abc import Awaitable, Callable
from typing import Final, cast

import msgspec
import pytest

from harness_tools import (
    READ_FILE_MAX_BYTES,
    TOOL_WORKSPACE_INVALID_ROOT,
    TOOL_WORKSPACE_PATH_INVALID,
    TOOL_WORKSPACE_TOO_LARGE,
    InvalidWorkspacePathError,
    ReadFileParameters,
    Tool,
    ToolExecutionContext,
    ToolPermissionIntent,
    WorkspaceBoundary,
    WorkspaceFileAccessError,
    create_read_file_tool,
    get_tool_execution_boundary,
)
from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    WORKSPACE_OPERATION_MALFORMED,
    WORKSPACE_OPERATION_REQUIRED,
    WORKSPACE_OPERATION_UNSUPPORTED,
    AbortSignal,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    Workspace,
    WorkspaceOperationError,
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnsupportedError,
    WorkspaceSnapshot,
    restrict_workspace,
)

ROOT: Final = "/srv/checkout"
TOO_LARGE_MESSAGE: Final = "read_file is limited to 131072 bytes"
MISSING_PATH_MESSAGE: Final = "read_file.path must be a nonempty string"

UntypedExecute = Callable[[object, ToolExecutionContext | None], Awaitable[object]]

# ------------------------------------------------------------------ helpers


class ScriptedWorkspace:
    """A complete adapter whose ``read_file`` answers through ``answer``; every call is recorded."""

    def __init__(self, answer: Callable[[str], object]) -> None:
        self.answer = answer
        self.calls: list[str] = []

    async def read_file(self, path: str) -> object:
        self.calls.append(path)
        return self.answer(path)

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

    async def dispose(self) -> None:
        self.calls.append("dispose")


def raising(error: BaseException) -> Callable[[str], object]:
    def answer(path: str) -> object:
        raise error

    return answer


def reading(adapter: object) -> ToolExecutionContext:
    """A context holding a view that grants ``read_file`` on ``adapter``, as a kernel would build it."""
    return ToolExecutionContext(workspace=restrict_workspace(adapter, "read_file"))


def untyped(tool: Tool[ReadFileParameters]) -> UntypedExecute:
    """``tool.execute`` typed to accept any params, for deliberately ill-typed calls."""
    return cast(UntypedExecute, tool.execute)


async def read(content: str, path: str = "file.txt") -> object:
    """Run ``read_file`` on a memory workspace holding ``content`` at ``path``."""
    tool = create_read_file_tool(ROOT)
    return await tool.execute(ReadFileParameters(path=path), reading(MemoryWorkspace({path: content})))


async def too_large(content: str) -> tuple[WorkspaceFileAccessError, list[str]]:
    """Run ``read_file`` on an adapter answering ``content``; return the error and the adapter calls."""
    adapter = ScriptedWorkspace(lambda path: content)
    tool = create_read_file_tool(ROOT)
    with pytest.raises(WorkspaceFileAccessError) as caught:
        await tool.execute(ReadFileParameters(path="big.txt"), reading(adapter))
    return caught.value, adapter.calls


# ------------------------------------------------------------------ creation


def test_read_file_tool_has_the_specified_name_description_and_parameters() -> None:
    tool = create_read_file_tool(ROOT)

    assert tool.name == "read_file"
    assert tool.description == "Read a UTF-8 text file from the workspace."
    assert tool.parameters is ReadFileParameters


def test_read_file_input_schema_is_exactly_the_specified_schema() -> None:
    tool = create_read_file_tool(ROOT)

    assert tool.input_schema == {
        "type": "object",
        "properties": {"path": {"type": "string", "minLength": 1}},
        "required": ["path"],
        "additionalProperties": False,
    }
    assert tool.input_schema is not None
    assert tool.input_schema["additionalProperties"] is False
    assert msgspec.json.encode(tool.input_schema) == msgspec.json.encode(
        {
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 1}},
            "required": ["path"],
            "additionalProperties": False,
        }
    )


def test_read_file_parameters_are_a_frozen_struct_that_forbids_unknown_fields() -> None:
    config = ReadFileParameters.__struct_config__
    params = ReadFileParameters(path="a.txt")

    assert config.frozen
    assert config.forbid_unknown_fields
    with pytest.raises(AttributeError):
        setattr(params, "path", "b.txt")  # noqa: B010 - bypasses the static check on purpose
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"path": "a.txt", "mode": "w"}, ReadFileParameters, strict=True)


def test_read_file_parameters_require_a_nonempty_path_when_converted() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"path": ""}, ReadFileParameters, strict=True)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({}, ReadFileParameters, strict=True)

    assert msgspec.convert({"path": "a"}, ReadFileParameters, strict=True) == ReadFileParameters(path="a")


def test_read_file_authorization_asks_to_read_the_path_once() -> None:
    tool = create_read_file_tool(ROOT)

    assert tool.authorization is not None
    assert tool.authorization(ReadFileParameters(path="src/app.py")) == ToolPermissionIntent(
        action="fs.read", subject="src/app.py", scope="once"
    )


def test_read_file_tool_is_bounded_to_the_workspace_read_file_operation() -> None:
    boundary = get_tool_execution_boundary(create_read_file_tool(ROOT))

    assert boundary == WorkspaceBoundary(capability="read_file", root=ROOT)
    assert isinstance(boundary, WorkspaceBoundary)
    assert boundary.access == "read"
    assert boundary.kind == "workspace"


@pytest.mark.parametrize(
    "root",
    [
        pytest.param("relative/../x", id="dot-dot"),
        pytest.param(" ", id="space"),
        pytest.param("/srv/checkout/", id="trailing-slash"),
        pytest.param(".", id="dot"),
    ],
)
def test_read_file_boundary_root_is_kept_verbatim(root: str) -> None:
    assert get_tool_execution_boundary(create_read_file_tool(root)) == WorkspaceBoundary(
        capability="read_file", root=root
    )


def test_each_read_file_tool_is_a_distinct_bounded_object() -> None:
    first = create_read_file_tool("/a")
    second = create_read_file_tool("/b")

    assert first is not second
    assert get_tool_execution_boundary(first) == WorkspaceBoundary(capability="read_file", root="/a")
    assert get_tool_execution_boundary(second) == WorkspaceBoundary(capability="read_file", root="/b")


class StrSubclass(str):
    """A ``str`` subclass."""


@pytest.mark.parametrize(
    "root",
    [
        pytest.param("", id="empty"),
        pytest.param(None, id="none"),
        pytest.param(b"/srv", id="bytes"),
        pytest.param(5, id="int"),
        pytest.param(["/srv"], id="list"),
        pytest.param(StrSubclass("/srv"), id="str-subclass"),
        pytest.param(MemoryWorkspace(), id="a-workspace-instead-of-a-root"),
    ],
)
def test_invalid_workspace_root_raises_synchronously(root: object) -> None:
    with pytest.raises(WorkspaceFileAccessError) as caught:
        create_read_file_tool(cast(str, root))

    assert caught.value.code == TOOL_WORKSPACE_INVALID_ROOT == "TOOL_WORKSPACE_INVALID_ROOT"
    assert str(caught.value) == "read_file requires workspace boundary metadata"


def test_invalid_root_consults_no_workspace() -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})

    with pytest.raises(WorkspaceFileAccessError):
        create_read_file_tool(cast(str, adapter))

    assert adapter.calls == []


def test_workspace_file_access_error_is_an_exception_with_a_code() -> None:
    error = WorkspaceFileAccessError(
        "TOOL_WORKSPACE_READ_FAILED", "read_file workspace returned non-text content"
    )

    assert isinstance(error, Exception)
    assert error.code == "TOOL_WORKSPACE_READ_FAILED"
    assert str(error) == "read_file workspace returned non-text content"


def test_read_file_limit_is_128_kib() -> None:
    assert READ_FILE_MAX_BYTES == 131072 == 128 * 1024


# ------------------------------------------------------------------ step 1: a workspace is required


@pytest.mark.parametrize(
    "context",
    [
        pytest.param(None, id="no-context"),
        pytest.param(ToolExecutionContext(), id="context-without-workspace"),
        pytest.param(
            ToolExecutionContext(session_id="s", task_id="t", call_id="c"), id="context-with-ids-only"
        ),
    ],
)
async def test_read_file_without_a_workspace_requires_one(context: ToolExecutionContext | None) -> None:
    tool = create_read_file_tool(ROOT)

    with pytest.raises(WorkspaceOperationRequiredError) as caught:
        await tool.execute(ReadFileParameters(path="a.txt"), context)

    assert str(caught.value) == "read_file requires an injected workspace capability"
    assert caught.value.code == WORKSPACE_OPERATION_REQUIRED
    assert caught.value.operation is None


async def test_read_file_context_defaults_to_none() -> None:
    tool = create_read_file_tool(ROOT)
    execute = cast(Callable[[ReadFileParameters], Awaitable[object]], tool.execute)

    with pytest.raises(WorkspaceOperationRequiredError, match="read_file requires an injected workspace"):
        await execute(ReadFileParameters(path="a.txt"))


async def test_missing_workspace_is_reported_before_malformed_params() -> None:
    tool = create_read_file_tool(ROOT)

    with pytest.raises(WorkspaceOperationRequiredError):
        await untyped(tool)({"path": 5, "extra": True}, None)


# ------------------------------------------------------------------ steps 2-3: the path reaches the workspace


async def test_read_file_returns_path_content_and_size() -> None:
    adapter = MemoryWorkspace({"README.md": "# demo\n"})
    tool = create_read_file_tool(ROOT)

    out = await tool.execute(ReadFileParameters(path="README.md"), reading(adapter))

    assert out == {"path": "README.md", "content": "# demo\n", "size": 7}
    assert adapter.calls == [("read_file", ("README.md",))]


async def test_a_read_through_a_view_is_one_request_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tool's request reaches the adapter through the dispatcher and the view without a
    # second request being built and parsed inside the view (issue #16).
    dispatch = importlib.import_module("harness_workspace._dispatch")
    parse = dispatch.parse_request
    parsed: list[object] = []

    def counting_parse(request: object) -> object:
        parsed.append(request)
        return parse(request)

    monkeypatch.setattr(dispatch, "parse_request", counting_parse)
    adapter = MemoryWorkspace({"README.md": "# demo\n"})
    tool = create_read_file_tool(ROOT)

    out = await tool.execute(ReadFileParameters(path="README.md"), reading(adapter))

    assert out == {"path": "README.md", "content": "# demo\n", "size": 7}
    assert parsed == [{"operation": "read_file", "path": "README.md"}]
    assert adapter.calls == [("read_file", ("README.md",))]


async def test_read_file_accepts_an_unrestricted_workspace_too() -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_read_file_tool(ROOT)

    out = await tool.execute(ReadFileParameters(path="a.txt"), ToolExecutionContext(workspace=adapter))

    assert out == {"path": "a.txt", "content": "alpha", "size": 5}


async def test_read_file_returns_the_adapters_string_without_copying() -> None:
    content = "x" * 100_000
    adapter = ScriptedWorkspace(lambda path: content)
    tool = create_read_file_tool(ROOT)

    out = await tool.execute(ReadFileParameters(path="a.txt"), reading(adapter))

    assert isinstance(out, dict)
    assert cast(dict[str, object], out)["content"] is content


async def test_read_file_accepts_params_as_an_exact_dict() -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_read_file_tool(ROOT)

    out = await untyped(tool)({"path": "a.txt"}, reading(adapter))

    assert out == {"path": "a.txt", "content": "alpha", "size": 5}
    assert adapter.calls == [("read_file", ("a.txt",))]


async def test_extra_dict_keys_never_widen_the_request() -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_read_file_tool(ROOT)
    params = {"path": "a.txt", "operation": "write_file", "contents": "owned", "command": ["rm"]}

    out = await untyped(tool)(params, ToolExecutionContext(workspace=adapter))

    assert out == {"path": "a.txt", "content": "alpha", "size": 5}
    assert adapter.calls == [("read_file", ("a.txt",))]
    assert adapter.files == {"a.txt": "alpha"}


@dataclasses.dataclass(frozen=True)
class DataclassPath:
    path: str


class OtherStructPath(msgspec.Struct, frozen=True):
    path: str


@pytest.mark.parametrize(
    "params",
    [
        pytest.param(OtherStructPath(path="a.txt"), id="other-struct"),
        pytest.param(DataclassPath(path="a.txt"), id="dataclass"),
        pytest.param(types.SimpleNamespace(path="a.txt"), id="namespace"),
    ],
)
async def test_read_file_takes_the_path_attribute_of_any_params_object(params: object) -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_read_file_tool(ROOT)

    out = await untyped(tool)(params, reading(adapter))

    assert out == {"path": "a.txt", "content": "alpha", "size": 5}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(" padded ", id="spaces"),
        pytest.param("README.MD", id="case"),
        pytest.param("deep/er/file name.txt", id="nested-with-a-space"),
    ],
)
async def test_read_file_echoes_a_canonical_path_verbatim(path: str) -> None:
    adapter = MemoryWorkspace({path: "text"})
    tool = create_read_file_tool(ROOT)

    out = await tool.execute(ReadFileParameters(path=path), reading(adapter))

    assert out == {"path": path, "content": "text", "size": 4}
    assert adapter.calls == [("read_file", (path,))]


NON_CANONICAL_PATHS = [
    pytest.param("./src/../README.md", id="dot-segments"),
    pytest.param("/etc/passwd", id="absolute"),
    pytest.param("../outside.txt", id="escaping"),
    pytest.param("dir//file.txt/", id="doubled-and-trailing-slashes"),
    pytest.param("nul\x00byte", id="nul"),
    pytest.param("secrets\\key", id="backslash"),
    pytest.param(".", id="the-root"),
]


@pytest.mark.parametrize("path", NON_CANONICAL_PATHS)
def test_read_file_parameters_refuse_a_non_canonical_path_when_built(path: str) -> None:
    with pytest.raises(InvalidWorkspacePathError) as built:
        ReadFileParameters(path=path)
    with pytest.raises(msgspec.ValidationError) as converted:
        msgspec.convert({"path": path}, ReadFileParameters, strict=True)

    assert built.value.code == TOOL_WORKSPACE_PATH_INVALID
    assert str(converted.value) == str(built.value)
    assert isinstance(converted.value.__cause__, InvalidWorkspacePathError)


@pytest.mark.parametrize("path", NON_CANONICAL_PATHS)
async def test_read_file_refuses_a_non_canonical_path_without_calling_the_adapter(path: str) -> None:
    # Params that skipped conversion (an exact dict, another object) are checked by execute.
    adapter = MemoryWorkspace({path: "text"})
    tool = create_read_file_tool(ROOT)

    for params in ({"path": path}, types.SimpleNamespace(path=path)):
        with pytest.raises(InvalidWorkspacePathError) as caught:
            await untyped(tool)(params, reading(adapter))
        assert caught.value.code == TOOL_WORKSPACE_PATH_INVALID

    assert adapter.calls == []


async def test_read_file_does_not_wire_an_aborted_signal_to_the_read() -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_read_file_tool(ROOT)
    context = ToolExecutionContext(
        workspace=restrict_workspace(adapter, "read_file"), signal=AbortSignal.aborted_with("stop")
    )

    out = await tool.execute(ReadFileParameters(path="a.txt"), context)

    assert out == {"path": "a.txt", "content": "alpha", "size": 5}
    assert adapter.calls == [("read_file", ("a.txt",))]


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="empty-dict"),
        pytest.param({"file": "a.txt"}, id="dict-with-another-key"),
        pytest.param({"path": ""}, id="dict-with-empty-path"),
        pytest.param({"path": None}, id="dict-with-none-path"),
        pytest.param({"path": 5}, id="dict-with-int-path"),
        pytest.param({"path": b"a.txt"}, id="dict-with-bytes-path"),
        pytest.param({"path": ["a.txt"]}, id="dict-with-list-path"),
        pytest.param({"path": StrSubclass("a.txt")}, id="dict-with-str-subclass-path"),
        pytest.param(ReadFileParameters(path=""), id="struct-with-empty-path"),
        pytest.param(collections.OrderedDict([("path", "a.txt")]), id="ordered-dict"),
        pytest.param(None, id="none"),
        pytest.param("a.txt", id="bare-string"),
        pytest.param(["a.txt"], id="list"),
    ],
)
async def test_missing_or_malformed_path_is_malformed_without_calling_the_adapter(params: object) -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_read_file_tool(ROOT)

    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await untyped(tool)(params, reading(adapter))

    assert str(caught.value) == MISSING_PATH_MESSAGE
    assert caught.value.code == WORKSPACE_OPERATION_MALFORMED
    assert caught.value.operation == "read_file"
    assert adapter.calls == []


@pytest.mark.parametrize(
    "granted", [pytest.param(cap, id=cap) for cap in WORKSPACE_CAPABILITIES if cap != "read_file"]
)
async def test_view_granting_another_operation_is_unsupported_without_touching_the_adapter(
    granted: str,
) -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_read_file_tool(ROOT)
    context = ToolExecutionContext(workspace=restrict_workspace(adapter, granted))

    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await tool.execute(ReadFileParameters(path="a.txt"), context)

    assert str(caught.value) == f"workspace view grants {granted}, not read_file"
    assert caught.value.code == WORKSPACE_OPERATION_UNSUPPORTED
    assert caught.value.operation == "read_file"
    assert adapter.calls == []


class Halt(BaseException):
    """Not an ``Exception``: it must never be converted into a typed error."""


class WithoutReadFile:
    async def list_files(self, path: str) -> list[str]:
        return []


@pytest.mark.parametrize(
    ("workspace", "error_type", "message"),
    [
        pytest.param(
            "/srv/checkout",
            WorkspaceOperationMalformedError,
            "workspace capability must be an object",
            id="string-identity",
        ),
        pytest.param(
            WithoutReadFile(),
            WorkspaceOperationUnsupportedError,
            "workspace does not support operation: read_file",
            id="incomplete-adapter",
        ),
    ],
)
async def test_workspace_that_cannot_be_bound_raises_its_typed_error(
    workspace: object, error_type: type[WorkspaceOperationError], message: str
) -> None:
    tool = create_read_file_tool(ROOT)
    context = ToolExecutionContext(workspace=cast(Workspace, workspace))

    with pytest.raises(error_type) as caught:
        await tool.execute(ReadFileParameters(path="a.txt"), context)

    assert str(caught.value) == message


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(b"alpha", id="bytes"),
        pytest.param(None, id="none"),
        pytest.param(["alpha"], id="list"),
        pytest.param(StrSubclass("alpha"), id="str-subclass"),
        pytest.param({"content": "alpha"}, id="dict"),
    ],
)
async def test_non_string_adapter_result_is_malformed(result: object) -> None:
    adapter = ScriptedWorkspace(lambda path: result)
    tool = create_read_file_tool(ROOT)

    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await tool.execute(ReadFileParameters(path="a.txt"), reading(adapter))

    assert str(caught.value) == "read_file returned a non-string result"
    assert caught.value.operation == "read_file"
    assert adapter.calls == ["a.txt"]


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(FileNotFoundError("a.txt"), id="file-not-found"),
        pytest.param(PermissionError("denied"), id="permission"),
        pytest.param(ValueError("bad"), id="value-error"),
        pytest.param(WorkspaceOperationUnsupportedError("read_file", "disposed"), id="typed-unsupported"),
        pytest.param(WorkspaceOperationRequiredError(), id="typed-required"),
        pytest.param(WorkspaceFileAccessError(TOOL_WORKSPACE_TOO_LARGE, "adapter said so"), id="tool-error"),
        pytest.param(Halt("stop"), id="base-exception"),
    ],
)
@pytest.mark.parametrize("through_view", [pytest.param(True, id="view"), pytest.param(False, id="adapter")])
async def test_adapter_exception_propagates_as_the_same_object(
    error: BaseException, through_view: bool
) -> None:
    adapter = ScriptedWorkspace(raising(error))
    tool = create_read_file_tool(ROOT)
    context = reading(adapter) if through_view else ToolExecutionContext(workspace=cast(Workspace, adapter))

    with pytest.raises(type(error)) as caught:
        await tool.execute(ReadFileParameters(path="a.txt"), context)

    assert caught.value is error
    assert caught.value.__cause__ is None
    assert adapter.calls == ["a.txt"]


async def test_missing_file_in_memory_workspace_propagates_its_file_not_found_error() -> None:
    tool = create_read_file_tool(ROOT)

    with pytest.raises(FileNotFoundError, match=r"no such file in memory workspace: 'b\.txt'"):
        await tool.execute(ReadFileParameters(path="b.txt"), reading(MemoryWorkspace({"a.txt": "alpha"})))


# ------------------------------------------------------------------ step 5: size


@pytest.mark.parametrize(
    ("content", "size"),
    [
        pytest.param("", 0, id="empty"),
        pytest.param("# demo\n", 7, id="ascii"),
        pytest.param("h\u00e9llo", 6, id="two-byte"),
        pytest.param("\u20ac", 3, id="three-byte"),
        pytest.param("\U0001f600", 4, id="four-byte"),
        pytest.param("\ud800", 3, id="lone-high-surrogate"),
        pytest.param("a\udfffb", 5, id="lone-low-surrogate"),
        pytest.param("\ud83d\ude00", 6, id="surrogate-pair-as-two-code-points"),
        pytest.param("\x00", 1, id="nul"),
    ],
)
async def test_size_is_the_utf8_byte_length_counting_lone_surrogates_as_three_bytes(
    content: str, size: int
) -> None:
    out = await read(content)

    assert out == {"path": "file.txt", "content": content, "size": size}


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("a" * 131072, id="ascii"),
        pytest.param("\u00e9" * 65536, id="two-byte"),
        pytest.param("\u20ac" * 43690 + "ab", id="three-byte"),
        pytest.param("\U0001f600" * 32768, id="four-byte"),
        pytest.param("\ud800" * 43690 + "ab", id="lone-surrogates"),
    ],
)
async def test_exactly_131072_bytes_are_allowed(content: str) -> None:
    out = await read(content)

    assert out == {"path": "file.txt", "content": content, "size": 131072}


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("a" * 131073, id="ascii-131073-characters"),
        pytest.param("\u00e9" * 65536 + "a", id="two-byte-131073-bytes"),
        pytest.param("\u20ac" * 43691, id="three-byte-131073-bytes"),
        pytest.param("\U0001f600" * 32768 + "a", id="four-byte-131073-bytes"),
        pytest.param("\ud800" * 43691, id="lone-surrogates-131073-bytes"),
        pytest.param("\u00e9" * 131073, id="multibyte-131073-characters"),
        pytest.param("\ud800" * 200_000, id="lone-surrogates-many-characters"),
        pytest.param("a" * 1_000_000, id="ascii-a-million-characters"),
    ],
)
async def test_content_over_131072_bytes_is_too_large_after_one_adapter_call(content: str) -> None:
    error, calls = await too_large(content)

    assert error.code == TOOL_WORKSPACE_TOO_LARGE == "TOOL_WORKSPACE_TOO_LARGE"
    assert str(error) == TOO_LARGE_MESSAGE
    assert calls == ["big.txt"]


# ------------------------------------------------------------------ the spec §7 example


async def demo_tool(ws: Workspace) -> None:
    tool = create_read_file_tool("/srv/checkout")
    boundary = get_tool_execution_boundary(tool)
    assert isinstance(boundary, WorkspaceBoundary)
    view = restrict_workspace(ws, boundary.capability)  # grants read_file only
    params = msgspec.convert({"path": "README.md"}, tool.parameters, strict=True)
    out = await tool.execute(params, ToolExecutionContext(workspace=view))
    assert out == {"path": "README.md", "content": "# demo\n", "size": 7}
    try:
        await view.write_file("README.md", "")  # never reaches the adapter
    except WorkspaceOperationUnsupportedError as err:
        assert err.operation == "write_file"  # noqa: PT017 - the specification's example, verbatim


async def test_spec_demo_tool_example_runs_as_written() -> None:
    adapter = MemoryWorkspace({"README.md": "# demo\n"})

    await demo_tool(adapter)

    assert adapter.calls == [("read_file", ("README.md",))]
    assert adapter.files == {"README.md": "# demo\n"}


async def test_view_in_the_spec_example_refuses_the_write() -> None:
    adapter = MemoryWorkspace({"README.md": "# demo\n"})
    view = restrict_workspace(adapter, "read_file")

    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await view.write_file("README.md", "")

    assert caught.value.operation == "write_file"
    assert adapter.calls == []
