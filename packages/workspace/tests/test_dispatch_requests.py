"""Requests crossing ``invoke_workspace_operation`` (spec §3.5-3.7).

Every malformed request is checked three ways: against a live in-memory adapter (which must
record no call), against a tripwire whose every attribute lookup is recorded (binding must not
even start), and with no workspace at all (a bad request wins over a missing workspace). All
three must report the same typed error.
"""

from __future__ import annotations

import collections
import enum
import pathlib
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, cast

import msgspec
import pytest
import trio

from harness_workspace import (
    AbortController,
    AbortSignal,
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

ERROR_CODES: dict[type[WorkspaceOperationError], str] = {
    WorkspaceOperationRequiredError: "WORKSPACE_OPERATION_REQUIRED",
    WorkspaceOperationMalformedError: "WORKSPACE_OPERATION_MALFORMED",
    WorkspaceOperationUnknownError: "WORKSPACE_OPERATION_UNKNOWN",
    WorkspaceOperationUnsupportedError: "WORKSPACE_OPERATION_UNSUPPORTED",
}

MAX_SAFE_INTEGER = 2**53 - 1


# ------------------------------------------------------------------ helpers


class TripwireWorkspace:
    """Records every attribute lookup; a dispatcher that rejects the request first never looks."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str) -> object:
        self.touched.append(name)
        raise AttributeError(name)


def assert_error(
    error: BaseException,
    error_type: type[WorkspaceOperationError],
    message: str,
    operation: str | None,
) -> None:
    """Assert the exact class, code, message and operation of a typed workspace error."""
    assert type(error) is error_type
    assert isinstance(error, WorkspaceOperationError)
    assert error.code == ERROR_CODES[error_type]
    assert str(error) == message
    assert error.operation == operation


async def rejection_of(request: object) -> WorkspaceOperationError:
    """Invoke ``request`` three ways and return the error, once all three agree and no adapter ran."""
    memory = MemoryWorkspace({"a.txt": "text"})
    with pytest.raises(WorkspaceOperationError) as with_adapter:
        await invoke_workspace_operation(memory, request)
    assert memory.calls == []

    tripwire = TripwireWorkspace()
    with pytest.raises(WorkspaceOperationError) as with_tripwire:
        await invoke_workspace_operation(tripwire, request)
    assert tripwire.touched == []

    with pytest.raises(WorkspaceOperationError) as without_workspace:
        await invoke_workspace_operation(None, request)

    expected = with_adapter.value
    for other in (with_tripwire.value, without_workspace.value):
        assert type(other) is type(expected)
        assert (other.code, str(other), other.operation) == (expected.code, str(expected), expected.operation)
    return expected


async def assert_rejected(
    request: object,
    error_type: type[WorkspaceOperationError],
    message: str,
    operation: str | None,
) -> WorkspaceOperationError:
    """Assert that ``request`` is refused with exactly this error before any adapter code runs."""
    error = await rejection_of(request)
    assert_error(error, error_type, message, operation)
    return error


async def assert_malformed(request: object, message: str, operation: str | None) -> WorkspaceOperationError:
    """Shorthand for a MALFORMED rejection."""
    return await assert_rejected(request, WorkspaceOperationMalformedError, message, operation)


async def executed_command(command: object) -> CommandRequest:
    """Run a well-formed ``execute`` request on a memory adapter; return what the adapter received."""
    memory = MemoryWorkspace()
    request: object = {"operation": "execute", "command": command}
    await invoke_workspace_operation(memory, request)
    assert len(memory.calls) == 1
    name, arguments = memory.calls[0]
    assert name == "execute"
    assert len(arguments) == 1
    received = arguments[0]
    assert type(received) is CommandRequest
    return received


build_command_request = cast("Callable[..., CommandRequest]", CommandRequest)
"""``CommandRequest`` called with deliberately ill-typed fields (msgspec does not validate them)."""


def command_in_form(form: str, fields: Mapping[str, object]) -> object:
    """Return the command as a plain dict or as an exact ``CommandRequest`` with the same fields."""
    if form == "dict":
        return dict(fields)
    return build_command_request(**fields)


class StrSubclass(str):
    """A ``str`` subclass that records any comparison or hashing run on it."""

    consulted: list[str]

    def __eq__(self, other: object) -> bool:
        StrSubclass.consulted.append("__eq__")
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        StrSubclass.consulted.append("__hash__")
        return str.__hash__(self)


StrSubclass.consulted = []


class IntSubclass(int):
    """An ``int`` subclass; the contract accepts only exact ``int``."""


class Number(enum.IntEnum):
    """An ``IntEnum`` member is an ``int`` subclass too."""

    FIVE = 5


class DictSubclass(dict[object, object]):
    """A ``dict`` subclass whose overridden lookups would show the validator a different value."""

    def __init__(self, data: Mapping[object, object]) -> None:
        super().__init__(data)
        self.consulted: list[str] = []

    def __getitem__(self, key: object) -> object:
        self.consulted.append("__getitem__")
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[object]:
        self.consulted.append("__iter__")
        return super().__iter__()

    def __len__(self) -> int:
        self.consulted.append("__len__")
        return super().__len__()

    def __contains__(self, key: object) -> bool:
        self.consulted.append("__contains__")
        return super().__contains__(key)


class ListSubclass(list[object]):
    """A ``list`` subclass whose overridden accessors would run caller code."""

    def __init__(self, items: list[object]) -> None:
        super().__init__(items)
        self.consulted: list[str] = []

    def __iter__(self) -> Iterator[object]:
        self.consulted.append("__iter__")
        return super().__iter__()

    def __len__(self) -> int:
        self.consulted.append("__len__")
        return super().__len__()


class ProgramAndArgument(NamedTuple):
    """A namedtuple is a ``tuple`` subclass, not an exact array."""

    program: str
    argument: str


@dataclass(frozen=True)
class ReadFileShape:
    """A dataclass with the fields of a read_file request."""

    operation: str
    path: str


class ReadFileStruct(msgspec.Struct):
    """A msgspec Struct with the fields of a read_file request."""

    operation: str
    path: str


class CommandRequestSubclass(CommandRequest, frozen=True, kw_only=True):
    """A subclass of ``CommandRequest``; only the exact class is accepted."""


@dataclass
class CommandShape:
    """A dataclass with the fields of a command."""

    argv: list[str]


class HostileKey:
    """A dict key whose ``__hash__``/``__eq__`` record (and fail) once armed.

    It hashes like ``collides_with``, so any lookup of that name in a dict holding this key
    would have to compare against it, running caller code inside the dispatcher.
    """

    def __init__(self, collides_with: str) -> None:
        self._hash = hash(collides_with)
        self.armed = False
        self.consulted: list[str] = []

    def __hash__(self) -> int:
        if self.armed:
            self.consulted.append("__hash__")
            raise RuntimeError("caller code ran inside the dispatcher: __hash__")
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self.armed:
            self.consulted.append("__eq__")
            raise RuntimeError("caller code ran inside the dispatcher: __eq__")
        return self is other


class LookalikeSignal:
    """Quacks like an ``AbortSignal`` but was not made by this module."""

    aborted = False
    reason: object = None

    async def wait(self) -> None:
        await trio.sleep_forever()


class ClassForgingSignal(LookalikeSignal):
    """Claims to be an ``AbortSignal`` through ``__class__``, so ``isinstance`` believes it."""

    @property
    def __class__(self) -> type:  # pyright: ignore[reportIncompatibleMethodOverride]
        return AbortSignal


def half_built_signal() -> AbortSignal:
    """An instance of the exact class whose state was never initialised."""
    return object.__new__(AbortSignal)


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


# ------------------------------------------------------------------ §3.7 execute.command: container


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(None, id="None"),
        pytest.param("ls -l", id="shell-string"),
        pytest.param(["ls", "-l"], id="bare-argv-list"),
        pytest.param(("ls",), id="bare-argv-tuple"),
        pytest.param(1, id="int"),
        pytest.param(collections.OrderedDict[str, list[str]](argv=["ls"]), id="OrderedDict"),
        pytest.param(collections.defaultdict(list, {"argv": ["ls"]}), id="defaultdict"),
        pytest.param(DictSubclass({"argv": ["ls"]}), id="dict-subclass"),
        pytest.param(types.MappingProxyType({"argv": ["ls"]}), id="MappingProxyType"),
        pytest.param(CommandShape(argv=["ls"]), id="dataclass"),
        pytest.param(CommandRequestSubclass(argv=("ls",)), id="CommandRequest-subclass"),
        pytest.param(CommandResult(exit_code=0, stdout="", stderr=""), id="other-Struct"),
        pytest.param({1: ["ls"]}, id="int-key"),
        pytest.param({"argv": ["ls"], b"cwd": "/"}, id="bytes-key"),
    ],
)
async def test_command_that_is_neither_an_exact_dict_with_string_keys_nor_a_command_request_is_malformed(
    command: object,
) -> None:
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")


async def test_execute_without_a_command_is_malformed() -> None:
    request: object = {"operation": "execute"}
    await assert_malformed(request, "execute.command must be an object", "execute")


async def test_command_dict_subclass_is_rejected_without_running_its_overridden_methods() -> None:
    command = DictSubclass({"argv": ["ls"]})
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")
    assert command.consulted == []


async def test_command_key_with_hostile_eq_and_hash_is_rejected_without_running_caller_code() -> None:
    key = HostileKey(collides_with="argv")
    command: dict[object, object] = {key: "x", "argv": ["ls"]}
    key.armed = True
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")
    assert key.consulted == []


async def test_command_with_a_str_subclass_key_is_malformed_without_hashing_or_comparing_it() -> None:
    command: dict[object, object] = {StrSubclass("argv"): ["ls"]}
    StrSubclass.consulted.clear()
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")
    assert StrSubclass.consulted == []


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("timeoutMs", id="camelCase-timeoutMs"),
        pytest.param("env", id="env"),
        pytest.param("shell", id="shell"),
        pytest.param("operation", id="operation"),
    ],
)
async def test_command_with_an_unexpected_key_is_malformed(key: str) -> None:
    request: object = {"operation": "execute", "command": {"argv": ["ls"], key: 5}}
    await assert_malformed(request, f"execute.command contains unexpected property {key!r}", "execute")


async def test_command_key_present_with_none_still_counts_as_unexpected() -> None:
    request: object = {"operation": "execute", "command": {"argv": ["ls"], "env": None}}
    await assert_malformed(request, "execute.command contains unexpected property 'env'", "execute")


async def test_command_unexpected_key_is_reported_before_its_field_checks() -> None:
    request: object = {"operation": "execute", "command": {"argv": [], "cwd": "", "stdin": ""}}
    await assert_malformed(request, "execute.command contains unexpected property 'stdin'", "execute")


# ------------------------------------------------------------------ §3.7 execute.command: fields

COMMAND_FORMS = [pytest.param("dict", id="dict-form"), pytest.param("struct", id="CommandRequest-form")]

ARGV_MUST_BE_AN_ARRAY = "execute.command.argv must be an array"
ARGV_LENGTH = "execute.command.argv length must be between 0 and 100000"
ARGV_NEEDS_A_PROGRAM = "execute.command.argv must contain a program"
ARGV_PROGRAM = "execute.command.argv[0] must be a nonempty program string"


async def test_command_dict_without_argv_is_malformed() -> None:
    request: object = {"operation": "execute", "command": {"cwd": "/"}}
    await assert_malformed(request, ARGV_MUST_BE_AN_ARRAY, "execute")


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(None, ARGV_MUST_BE_AN_ARRAY, id="None"),
        pytest.param("ls", ARGV_MUST_BE_AN_ARRAY, id="str"),
        pytest.param(b"ls", ARGV_MUST_BE_AN_ARRAY, id="bytes"),
        pytest.param({"ls"}, ARGV_MUST_BE_AN_ARRAY, id="set"),
        pytest.param({"0": "ls"}, ARGV_MUST_BE_AN_ARRAY, id="dict"),
        pytest.param(ListSubclass(["ls"]), ARGV_MUST_BE_AN_ARRAY, id="list-subclass"),
        pytest.param(ProgramAndArgument("ls", "-l"), ARGV_MUST_BE_AN_ARRAY, id="namedtuple"),
        pytest.param(["ls"] * 100_001, ARGV_LENGTH, id="100001-items"),
        pytest.param([], ARGV_NEEDS_A_PROGRAM, id="empty-list"),
        pytest.param((), ARGV_NEEDS_A_PROGRAM, id="empty-tuple"),
        pytest.param([""], ARGV_PROGRAM, id="empty-program"),
        pytest.param([1], ARGV_PROGRAM, id="int-program"),
        pytest.param([None, "x"], ARGV_PROGRAM, id="None-program"),
        pytest.param([b"ls"], ARGV_PROGRAM, id="bytes-program"),
        pytest.param([["ls"]], ARGV_PROGRAM, id="nested-list-program"),
        pytest.param([StrSubclass("ls")], ARGV_PROGRAM, id="str-subclass-program"),
        pytest.param([1, 2], ARGV_PROGRAM, id="program-checked-before-arguments"),
        pytest.param(["ls", 1], "execute.command.argv[1] must be a string", id="int-argument"),
        pytest.param(["ls", "-l", None], "execute.command.argv[2] must be a string", id="None-argument"),
        pytest.param(["ls", b"x"], "execute.command.argv[1] must be a string", id="bytes-argument"),
        pytest.param(["ls", StrSubclass("x")], "execute.command.argv[1] must be a string", id="str-subclass"),
        pytest.param(("ls", "a", "b", ["c"]), "execute.command.argv[3] must be a string", id="tuple-argv"),
    ],
)
async def test_invalid_argv_is_malformed(form: str, argv: object, message: str) -> None:
    request: object = {"operation": "execute", "command": command_in_form(form, {"argv": argv})}
    await assert_malformed(request, message, "execute")


async def test_list_subclass_argv_is_rejected_without_running_its_overridden_methods() -> None:
    argv = ListSubclass(["ls", "-l"])
    request: object = {"operation": "execute", "command": {"argv": argv}}
    await assert_malformed(request, ARGV_MUST_BE_AN_ARRAY, "execute")
    assert argv.consulted == []


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["ls"], ("ls",), id="program-only"),
        pytest.param(["printf", ""], ("printf", ""), id="empty-argument"),
        pytest.param(("git", "status", "--short"), ("git", "status", "--short"), id="tuple"),
        pytest.param(["ls", "-", " ", "a\x00b"], ("ls", "-", " ", "a\x00b"), id="odd-arguments"),
    ],
)
async def test_valid_argv_reaches_the_adapter_as_a_tuple(
    form: str, argv: object, expected: tuple[str, ...]
) -> None:
    received = await executed_command(command_in_form(form, {"argv": argv}))
    assert type(received.argv) is tuple
    assert received.argv == expected


@pytest.mark.parametrize("form", COMMAND_FORMS)
async def test_argv_of_exactly_100000_items_is_accepted(form: str) -> None:
    argv = ["echo"] + ["x"] * 99_999
    received = await executed_command(command_in_form(form, {"argv": argv}))
    assert len(received.argv) == 100_000


CWD_MESSAGE = "execute.command.cwd must be a nonempty string when provided"


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "cwd",
    [
        pytest.param("", id="empty"),
        pytest.param(1, id="int"),
        pytest.param(b"/", id="bytes"),
        pytest.param(["/"], id="list"),
        pytest.param(pathlib.PurePosixPath("/"), id="PurePath"),
        pytest.param(StrSubclass("/"), id="str-subclass"),
        pytest.param(False, id="bool"),
    ],
)
async def test_invalid_cwd_is_malformed(form: str, cwd: object) -> None:
    request: object = {"operation": "execute", "command": command_in_form(form, {"argv": ["ls"], "cwd": cwd})}
    await assert_malformed(request, CWD_MESSAGE, "execute")


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "cwd",
    [
        pytest.param(None, id="None"),
        pytest.param("/srv/checkout", id="absolute"),
        pytest.param("..", id="dot-dot"),
        pytest.param("sub dir", id="relative"),
    ],
)
async def test_valid_cwd_reaches_the_adapter(form: str, cwd: str | None) -> None:
    received = await executed_command(command_in_form(form, {"argv": ["ls"], "cwd": cwd}))
    assert received.cwd == cwd
    assert received.cwd is cwd


TIMEOUT_MESSAGE = "execute.command.timeout_ms must be a nonnegative safe integer when provided"


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "timeout_ms",
    [
        pytest.param(-1, id="negative"),
        pytest.param(2**53, id="2**53"),
        pytest.param(10**100, id="huge"),
        pytest.param(-(2**53), id="minus-2**53"),
        pytest.param(True, id="True"),
        pytest.param(False, id="False"),
        pytest.param(5.0, id="integral-float"),
        pytest.param(0.0, id="zero-float"),
        pytest.param(0.5, id="fraction"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param("5", id="str"),
        pytest.param(IntSubclass(5), id="int-subclass"),
        pytest.param(Number.FIVE, id="IntEnum"),
    ],
)
async def test_invalid_timeout_is_malformed(form: str, timeout_ms: object) -> None:
    command = command_in_form(form, {"argv": ["ls"], "timeout_ms": timeout_ms})
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, TIMEOUT_MESSAGE, "execute")


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "timeout_ms",
    [
        pytest.param(None, id="None"),
        pytest.param(0, id="zero"),
        pytest.param(1, id="one"),
        pytest.param(30_000, id="thirty-seconds"),
        pytest.param(MAX_SAFE_INTEGER, id="2**53-1"),
    ],
)
async def test_valid_timeout_reaches_the_adapter_unchanged(form: str, timeout_ms: int | None) -> None:
    received = await executed_command(command_in_form(form, {"argv": ["ls"], "timeout_ms": timeout_ms}))
    assert received.timeout_ms == timeout_ms
    assert type(received.timeout_ms) is type(timeout_ms)


async def test_absent_optional_fields_reach_the_adapter_as_none() -> None:
    received = await executed_command({"argv": ["ls"]})
    assert (received.cwd, received.timeout_ms, received.signal) == (None, None, None)


SIGNAL_MESSAGE = "execute.command.signal must be a genuine AbortSignal when provided"


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "make_signal",
    [
        pytest.param(LookalikeSignal, id="look-alike"),
        pytest.param(ClassForgingSignal, id="forged-__class__"),
        pytest.param(half_built_signal, id="object.__new__(AbortSignal)"),
        pytest.param(AbortController, id="AbortController"),
        pytest.param(lambda: AbortSignal, id="the-AbortSignal-class"),
        pytest.param(trio.Event, id="trio.Event"),
        pytest.param(trio.CancelScope, id="trio.CancelScope"),
        pytest.param(lambda: True, id="bool"),
        pytest.param(lambda: "signal", id="str"),
    ],
)
async def test_signal_that_is_not_a_genuine_abort_signal_is_malformed_with_the_cause_chained(
    form: str, make_signal: Callable[[], object]
) -> None:
    command = command_in_form(form, {"argv": ["ls"], "signal": make_signal()})
    request: object = {"operation": "execute", "command": command}
    error = await assert_malformed(request, SIGNAL_MESSAGE, "execute")
    assert isinstance(error.__cause__, Exception)


def test_abort_signal_cannot_be_subclassed_so_no_subclass_instance_exists() -> None:
    with pytest.raises(TypeError):
        type("SignalSubclass", (AbortSignal,), {})


@pytest.mark.parametrize(
    ("command", "message"),
    [
        pytest.param(
            {"argv": None, "cwd": "", "timeout_ms": -1, "signal": "x"}, ARGV_MUST_BE_AN_ARRAY, id="argv-first"
        ),
        pytest.param(
            {"argv": ["ls"], "cwd": "", "timeout_ms": -1, "signal": "x"}, CWD_MESSAGE, id="then-cwd"
        ),
        pytest.param({"argv": ["ls"], "timeout_ms": True, "signal": "x"}, TIMEOUT_MESSAGE, id="then-timeout"),
        pytest.param(
            {"argv": ["ls"], "cwd": "/", "timeout_ms": 0, "signal": 1}, SIGNAL_MESSAGE, id="then-signal"
        ),
    ],
)
@pytest.mark.parametrize("form", COMMAND_FORMS)
async def test_command_fields_are_checked_in_contract_order(
    form: str, command: dict[str, object], message: str
) -> None:
    request: object = {"operation": "execute", "command": command_in_form(form, command)}
    await assert_malformed(request, message, "execute")


# ------------------------------------------------------------------ §3.7 the adapter's copy


async def test_adapter_receives_a_new_command_request_never_the_callers_struct() -> None:
    controller = AbortController()
    original = CommandRequest(argv=("make", "test"), cwd="/srv", timeout_ms=0, signal=controller.signal)
    received = await executed_command(original)
    assert received is not original
    assert (received.argv, received.cwd, received.timeout_ms) == (("make", "test"), "/srv", 0)


async def test_command_request_with_a_list_argv_reaches_the_adapter_with_a_tuple_copy() -> None:
    argv = ["make", "test"]
    received = await executed_command(build_command_request(argv=argv))
    argv.append("--evil")
    assert type(received.argv) is tuple
    assert received.argv == ("make", "test")


async def test_callers_argv_list_mutated_afterwards_does_not_change_what_the_adapter_received() -> None:
    argv = ["make", "test"]
    received = await executed_command({"argv": argv, "cwd": "/srv"})
    argv[0] = "rm"
    argv.append("-rf")
    assert type(received.argv) is tuple
    assert received.argv == ("make", "test")


async def test_callers_argv_list_mutated_while_the_adapter_runs_does_not_change_its_copy() -> None:
    argv = ["make", "test"]
    seen: list[tuple[str, ...]] = []

    def run(command: CommandRequest) -> CommandResult:
        argv[1] = "deploy"
        argv.append("--force")
        seen.append(command.argv)
        return CommandResult(exit_code=0, stdout="", stderr="")

    memory = MemoryWorkspace(commands={"make": run})
    await invoke_workspace_operation(memory, {"operation": "execute", "command": {"argv": argv}})
    assert seen == [("make", "test")]


async def test_genuine_signal_is_replaced_by_a_fresh_linked_signal_that_follows_a_later_abort() -> None:
    controller = AbortController()
    received = await executed_command({"argv": ["sleep", "10"], "signal": controller.signal})
    linked = received.signal
    assert linked is not None
    assert linked is not controller.signal
    assert type(linked) is AbortSignal
    assert (linked.aborted, linked.reason) == (False, None)

    controller.abort("stopped by the user")

    assert (linked.aborted, linked.reason) == (True, "stopped by the user")


async def test_signal_in_a_command_request_is_replaced_by_a_fresh_linked_signal() -> None:
    controller = AbortController()
    received = await executed_command(CommandRequest(argv=("sleep", "10"), signal=controller.signal))
    linked = received.signal
    assert linked is not None
    assert linked is not controller.signal
    assert type(linked) is AbortSignal
    assert not linked.aborted
    controller.abort("later")
    assert (linked.aborted, linked.reason) == (True, "later")


async def test_already_aborted_signal_is_replaced_by_a_fresh_signal_that_starts_aborted() -> None:
    reason = RuntimeError("gone")
    caller_signal = AbortSignal.aborted_with(reason)
    received = await executed_command({"argv": ["ls"], "signal": caller_signal})
    linked = received.signal
    assert linked is not None
    assert linked is not caller_signal
    assert type(linked) is AbortSignal
    assert linked.aborted
    assert linked.reason is reason


async def test_linked_signal_wakes_an_adapter_waiting_on_it_when_the_caller_aborts() -> None:
    controller = AbortController()
    received = await executed_command({"argv": ["sleep", "10"], "signal": controller.signal})
    linked = received.signal
    assert linked is not None
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(linked.wait)
            await trio.lowlevel.checkpoint()
            controller.abort("now")
    assert linked.reason == "now"


async def test_each_call_gets_its_own_linked_signal() -> None:
    controller = AbortController()
    first = await executed_command({"argv": ["ls"], "signal": controller.signal})
    second = await executed_command({"argv": ["ls"], "signal": controller.signal})
    assert first.signal is not None
    assert second.signal is not None
    assert first.signal is not second.signal


async def test_zero_timeout_is_not_wired_to_the_linked_signal() -> None:
    controller = AbortController()
    received = await executed_command({"argv": ["ls"], "timeout_ms": 0, "signal": controller.signal})
    assert received.timeout_ms == 0
    assert received.signal is not None
    await trio.sleep(0.01)
    assert not received.signal.aborted
    assert not controller.signal.aborted


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
