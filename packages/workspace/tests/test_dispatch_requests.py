"""Requests crossing ``invoke_workspace_operation``: the envelope, key sets and fields (spec §3.6).

Each malformed request is checked three ways (see ``workspace_dispatch_fixtures``).
"""

from __future__ import annotations

import collections
import pathlib
import types

import pytest
from workspace_dispatch_fixtures import (
    DictSubclass,
    HostileKey,
    ReadFileShape,
    ReadFileStruct,
    StrSubclass,
    assert_malformed,
    assert_rejected,
)

from harness_workspace import (
    CommandRequest,
    MemoryWorkspace,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnknownError,
    invoke_workspace_operation,
)

# ------------------------------------------------------------------ §3.6 envelope, rows 1-6


async def test_missing_request_is_required() -> None:
    await assert_rejected(None, WorkspaceOperationRequiredError, "workspace operation is required", None)


@pytest.mark.parametrize(
    "request_value",
    [
        pytest.param([("operation", "read_file"), ("path", "a")], id="list-of-pairs"),
        pytest.param(("operation", "diff"), id="tuple"),
        pytest.param("read_file", id="str"),
        pytest.param(b'{"operation": "diff"}', id="bytes"),
        pytest.param(1, id="int"),
        pytest.param(collections.OrderedDict[str, str](operation="diff"), id="OrderedDict"),
        pytest.param(collections.defaultdict(str, {"operation": "diff"}), id="defaultdict"),
        pytest.param(collections.UserDict({"operation": "diff"}), id="UserDict"),
        pytest.param(types.MappingProxyType({"operation": "diff"}), id="MappingProxyType"),
        pytest.param(DictSubclass({"operation": "diff"}), id="dict-subclass"),
        pytest.param(ReadFileShape(operation="read_file", path="a"), id="dataclass"),
        pytest.param(ReadFileStruct(operation="read_file", path="a"), id="msgspec-Struct"),
        pytest.param(CommandRequest(argv=("ls",)), id="CommandRequest"),
    ],
)
async def test_request_that_is_not_an_exact_dict_is_malformed(request_value: object) -> None:
    await assert_malformed(request_value, "workspace operation must be an object", None)


async def test_dict_subclass_request_is_rejected_without_running_its_overridden_methods() -> None:
    request = DictSubclass({"operation": "read_file", "path": "a.txt"})
    await assert_malformed(request, "workspace operation must be an object", None)
    assert request.consulted == []


async def test_dict_subclass_with_a_non_string_key_reports_the_container_before_the_key() -> None:
    request = collections.OrderedDict[object, object]({1: "x", "operation": "diff"})
    await assert_malformed(request, "workspace operation must be an object", None)


@pytest.mark.parametrize(
    "request_value",
    [
        pytest.param({1: "x", "operation": "read_file", "path": "a"}, id="int-key"),
        pytest.param({b"operation": "diff"}, id="bytes-key"),
        pytest.param({None: "diff"}, id="None-key"),
        pytest.param({("operation",): "diff"}, id="tuple-key"),
        pytest.param({"operation": "diff", 2.5: "x"}, id="float-key-after-valid-keys"),
        pytest.param({1: 1}, id="non-string-key-and-no-operation"),
        pytest.param({"operation": "readFile", 1: 1}, id="non-string-key-and-unknown-operation"),
    ],
)
async def test_request_with_a_non_string_key_is_malformed_before_any_lookup(
    request_value: dict[object, object],
) -> None:
    await assert_malformed(request_value, "workspace operation contains a non-string key", None)


async def test_request_with_a_str_subclass_key_is_malformed_without_hashing_or_comparing_it() -> None:
    StrSubclass.consulted.clear()
    key = StrSubclass("operation")
    request: dict[object, object] = {key: "diff"}
    StrSubclass.consulted.clear()
    await assert_malformed(request, "workspace operation contains a non-string key", None)
    assert StrSubclass.consulted == []


@pytest.mark.parametrize(
    "companions",
    [
        pytest.param({"operation": "read_file", "path": "a.txt"}, id="with-a-valid-request"),
        pytest.param({}, id="alone"),
    ],
)
async def test_request_key_with_hostile_eq_and_hash_is_rejected_without_running_caller_code(
    companions: dict[str, object],
) -> None:
    key = HostileKey(collides_with="operation")
    # The hostile key goes in first, so a later lookup of "operation" would probe its slot.
    request: dict[object, object] = {key: "value", **companions}
    key.armed = True
    await assert_malformed(request, "workspace operation contains a non-string key", None)
    assert key.consulted == []


@pytest.mark.parametrize(
    "request_value",
    [
        pytest.param({}, id="empty-dict"),
        pytest.param({"path": "a.txt"}, id="operation-key-missing"),
        pytest.param({"operation": None}, id="operation-None"),
        pytest.param({"operation": None, "path": "a.txt"}, id="operation-None-with-fields"),
        pytest.param({"path": 1, "bogus": True}, id="missing-operation-wins-over-bad-fields"),
    ],
)
async def test_request_without_an_operation_name_is_required(request_value: dict[str, object]) -> None:
    await assert_rejected(
        request_value, WorkspaceOperationRequiredError, "workspace operation name is required", None
    )


@pytest.mark.parametrize(
    "operation",
    [
        pytest.param("", id="empty"),
        pytest.param(1, id="int"),
        pytest.param(True, id="bool"),
        pytest.param(b"read_file", id="bytes"),
        pytest.param(["read_file"], id="list"),
        pytest.param({"name": "read_file"}, id="dict"),
        pytest.param(StrSubclass("read_file"), id="str-subclass"),
    ],
)
async def test_operation_name_that_is_not_a_nonempty_exact_string_is_malformed(operation: object) -> None:
    request: object = {"operation": operation, "path": "a.txt"}
    await assert_malformed(request, "workspace operation name must be a nonempty string", None)


async def test_str_subclass_operation_name_is_rejected_without_comparing_or_hashing_it() -> None:
    name = StrSubclass("read_file")
    StrSubclass.consulted.clear()
    request: object = {"operation": name, "path": "a.txt"}
    await assert_malformed(request, "workspace operation name must be a nonempty string", None)
    assert StrSubclass.consulted == []


@pytest.mark.parametrize(
    "operation",
    [
        pytest.param("readFile", id="camelCase-readFile"),
        pytest.param("writeFile", id="camelCase-writeFile"),
        pytest.param("listFiles", id="camelCase-listFiles"),
        pytest.param("READ_FILE", id="upper-case"),
        pytest.param("Diff", id="capitalised"),
        pytest.param(" read_file", id="leading-space"),
        pytest.param("read_file ", id="trailing-space"),
        pytest.param("read-file", id="kebab-case"),
        pytest.param("fs.read", id="dotted-tool-name"),
        pytest.param("read_file\x00", id="trailing-NUL"),
        pytest.param("open", id="unrelated-name"),
    ],
)
async def test_operation_outside_the_vocabulary_is_unknown(operation: str) -> None:
    request: object = {"operation": operation}
    await assert_rejected(
        request, WorkspaceOperationUnknownError, f"unknown workspace operation: {operation}", operation
    )


async def test_unknown_operation_wins_over_unexpected_properties_and_bad_fields() -> None:
    request: object = {"operation": "readFile", "path": "", "timeoutMs": 5}
    await assert_rejected(
        request, WorkspaceOperationUnknownError, "unknown workspace operation: readFile", "readFile"
    )


# ------------------------------------------------------------------ §3.6 rows 7-8: key sets


@pytest.mark.parametrize(
    ("request_value", "key", "operation"),
    [
        pytest.param({"operation": "diff", "path": "x"}, "path", "diff", id="diff-with-stray-path"),
        pytest.param({"operation": "snapshot", "metadata": {}}, "metadata", "snapshot", id="snapshot"),
        pytest.param({"operation": "dispose", "force": True}, "force", "dispose", id="dispose"),
        pytest.param({"operation": "dispose", "operations": None}, "operations", "dispose", id="None-value"),
        pytest.param(
            {"operation": "read_file", "path": "a", "contents": "x"}, "contents", "read_file", id="read_file"
        ),
        pytest.param(
            {"operation": "list_files", "path": "a", "recursive": True}, "recursive", "list_files", id="list"
        ),
        pytest.param(
            {"operation": "write_file", "path": "a", "contents": "", "mode": "w"},
            "mode",
            "write_file",
            id="write",
        ),
        pytest.param(
            {"operation": "execute", "command": {"argv": ["ls"]}, "path": "a"},
            "path",
            "execute",
            id="execute",
        ),
        pytest.param({"operation": "read_file", "Path": "a"}, "Path", "read_file", id="wrong-case-key"),
        pytest.param({"operation": "read_file", "it's": "a"}, "it's", "read_file", id="key-rendered-by-repr"),
    ],
)
async def test_request_with_an_unexpected_key_is_malformed_and_never_reaches_the_adapter(
    request_value: dict[str, object], key: str, operation: str
) -> None:
    await assert_malformed(
        request_value, f"workspace operation contains unexpected property {key!r}", operation
    )


@pytest.mark.parametrize(
    ("request_value", "key", "operation"),
    [
        pytest.param({"operation": "read_file", "path": "", "extra": 1}, "extra", "read_file", id="bad-path"),
        pytest.param({"operation": "read_file", "extra": 1}, "extra", "read_file", id="missing-path"),
        pytest.param(
            {"operation": "write_file", "contents": None, "extra": 1},
            "extra",
            "write_file",
            id="bad-contents",
        ),
        pytest.param({"operation": "execute", "timeoutMs": 5}, "timeoutMs", "execute", id="missing-command"),
    ],
)
async def test_unexpected_key_is_reported_before_any_field_check(
    request_value: dict[str, object], key: str, operation: str
) -> None:
    await assert_malformed(
        request_value, f"workspace operation contains unexpected property {key!r}", operation
    )


# ------------------------------------------------------------------ §3.6 field checks


PATH_OPERATIONS = ["read_file", "list_files"]

INVALID_PATHS = [
    pytest.param(None, id="None"),
    pytest.param("", id="empty"),
    pytest.param(1, id="int"),
    pytest.param(b"a.txt", id="bytes"),
    pytest.param(["a.txt"], id="list"),
    pytest.param(pathlib.PurePosixPath("a.txt"), id="PurePath"),
    pytest.param(StrSubclass("a.txt"), id="str-subclass"),
]


@pytest.mark.parametrize("operation", PATH_OPERATIONS)
@pytest.mark.parametrize("path", INVALID_PATHS)
async def test_path_operation_with_an_invalid_path_is_malformed(operation: str, path: object) -> None:
    request: object = {"operation": operation, "path": path}
    await assert_malformed(request, f"{operation}.path must be a nonempty string", operation)


@pytest.mark.parametrize("operation", PATH_OPERATIONS)
async def test_path_operation_without_a_path_is_malformed(operation: str) -> None:
    request: object = {"operation": operation}
    await assert_malformed(request, f"{operation}.path must be a nonempty string", operation)


@pytest.mark.parametrize("operation", PATH_OPERATIONS)
@pytest.mark.parametrize(
    "path",
    [
        pytest.param("a.txt", id="relative"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("../outside", id="dot-dot"),
        pytest.param("a\x00b", id="NUL"),
        pytest.param(" ", id="blank"),
    ],
)
async def test_path_operation_passes_the_same_path_object_to_the_adapter_without_path_semantics(
    operation: str, path: str
) -> None:
    memory = MemoryWorkspace({path: "text"})
    request: object = {"operation": operation, "path": path}
    await invoke_workspace_operation(memory, request)
    assert memory.calls == [(operation, (path,))]
    assert memory.calls[0][1][0] is path


@pytest.mark.parametrize(
    "contents",
    [
        pytest.param(None, id="None"),
        pytest.param(1, id="int"),
        pytest.param(b"", id="bytes"),
        pytest.param(["x"], id="list"),
        pytest.param(StrSubclass("x"), id="str-subclass"),
    ],
)
async def test_write_file_with_invalid_contents_is_malformed(contents: object) -> None:
    request: object = {"operation": "write_file", "path": "a.txt", "contents": contents}
    await assert_malformed(request, "write_file.contents must be a string", "write_file")


@pytest.mark.parametrize(
    "request_value",
    [
        pytest.param({"operation": "write_file", "path": "", "contents": None}, id="empty-path"),
        pytest.param({"operation": "write_file", "path": 1, "contents": 1}, id="int-path"),
        pytest.param({"operation": "write_file", "contents": b"x"}, id="missing-path"),
        pytest.param({"operation": "write_file"}, id="both-missing"),
    ],
)
async def test_write_file_checks_contents_before_path(request_value: dict[str, object]) -> None:
    await assert_malformed(request_value, "write_file.contents must be a string", "write_file")


@pytest.mark.parametrize("path", INVALID_PATHS)
async def test_write_file_with_valid_contents_and_an_invalid_path_is_malformed(path: object) -> None:
    request: object = {"operation": "write_file", "path": path, "contents": "text"}
    await assert_malformed(request, "write_file.path must be a nonempty string", "write_file")


async def test_write_file_without_a_path_is_malformed() -> None:
    request: object = {"operation": "write_file", "contents": "text"}
    await assert_malformed(request, "write_file.path must be a nonempty string", "write_file")


async def test_write_file_accepts_empty_contents_and_passes_both_strings_as_the_same_objects() -> None:
    memory = MemoryWorkspace()
    path = "notes/empty.txt"
    contents = ""
    assert (
        await invoke_workspace_operation(
            memory, {"operation": "write_file", "path": path, "contents": contents}
        )
        is None
    )
    assert memory.calls == [("write_file", (path, contents))]
    assert memory.calls[0][1][0] is path
    assert memory.calls[0][1][1] is contents


@pytest.mark.parametrize("operation", ["diff", "snapshot", "dispose"])
async def test_operation_without_fields_reaches_the_adapter_once_with_no_arguments(operation: str) -> None:
    memory = MemoryWorkspace()
    request: object = {"operation": operation}
    await invoke_workspace_operation(memory, request)
    assert memory.calls == [(operation, ())]


async def test_request_dict_is_left_unchanged_by_the_dispatcher() -> None:
    memory = MemoryWorkspace({"a.txt": "text"})
    request = {"operation": "read_file", "path": "a.txt"}
    await invoke_workspace_operation(memory, request)
    assert request == {"operation": "read_file", "path": "a.txt"}
