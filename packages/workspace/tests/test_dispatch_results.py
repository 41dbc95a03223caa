"""Adapter results crossing ``invoke_workspace_operation`` (spec §3.9).

The adapter is untrusted: whatever it returns is checked in the contract's order and handed
to the caller only as a detached copy (or, for immutable strings, as the same object).
"""

from __future__ import annotations

import collections
import enum
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, cast

import msgspec
import pytest

from harness_workspace import (
    CommandRequest,
    CommandResult,
    WorkspaceOperationMalformedError,
    WorkspaceSnapshot,
    invoke_workspace_operation,
)

MAX_SAFE_INTEGER = 2**53 - 1

REQUESTS: dict[str, dict[str, object]] = {
    "read_file": {"operation": "read_file", "path": "a.txt"},
    "write_file": {"operation": "write_file", "path": "a.txt", "contents": "text"},
    "list_files": {"operation": "list_files", "path": "."},
    "execute": {"operation": "execute", "command": {"argv": ["make", "test"]}},
    "diff": {"operation": "diff"},
    "snapshot": {"operation": "snapshot"},
    "dispose": {"operation": "dispose"},
}


# ------------------------------------------------------------------ helpers


class ScriptedWorkspace:
    """Answers every operation with one scripted value and records which operations ran."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.calls: list[str] = []

    def _reply(self, operation: str) -> object:
        self.calls.append(operation)
        return self.answer

    async def read_file(self, path: str) -> object:
        return self._reply("read_file")

    async def write_file(self, path: str, contents: str) -> object:
        return self._reply("write_file")

    async def list_files(self, path: str) -> object:
        return self._reply("list_files")

    async def execute(self, command: CommandRequest) -> object:
        return self._reply("execute")

    async def diff(self) -> object:
        return self._reply("diff")

    async def snapshot(self) -> object:
        return self._reply("snapshot")

    async def dispose(self) -> object:
        return self._reply("dispose")


async def result_of(operation: str, answer: object) -> object:
    """Invoke ``operation`` on an adapter that returns ``answer``; it must be called exactly once."""
    adapter = ScriptedWorkspace(answer)
    result = await invoke_workspace_operation(adapter, REQUESTS[operation])
    assert adapter.calls == [operation]
    return result


async def assert_malformed_result(operation: str, answer: object, message: str) -> None:
    """Assert that ``answer`` is refused as MALFORMED with ``message`` after one adapter call."""
    adapter = ScriptedWorkspace(answer)
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await invoke_workspace_operation(adapter, REQUESTS[operation])
    error = caught.value
    assert type(error) is WorkspaceOperationMalformedError
    assert error.code == "WORKSPACE_OPERATION_MALFORMED"
    assert str(error) == message
    assert error.operation == operation
    assert adapter.calls == [operation]


build_command_result = cast("Callable[..., CommandResult]", CommandResult)
"""``CommandResult`` called with deliberately ill-typed fields (msgspec does not validate them)."""

build_snapshot = cast("Callable[..., WorkspaceSnapshot]", WorkspaceSnapshot)
"""``WorkspaceSnapshot`` called with deliberately ill-typed fields."""


class StrSubclass(str):
    """A ``str`` subclass; the contract accepts only exact ``str``."""


class IntSubclass(int):
    """An ``int`` subclass; the contract accepts only exact ``int``."""


class ExitCode(enum.IntEnum):
    """An ``IntEnum`` member is an ``int`` subclass too."""

    FAILURE = 1


class DictSubclass(dict[str, object]):
    """A ``dict`` subclass; the contract accepts only an exact ``dict``."""


class ListSubclass(list[object]):
    """A ``list`` subclass; the contract accepts only an exact ``list`` or ``tuple``."""


class PathPair(NamedTuple):
    """A namedtuple is a ``tuple`` subclass, not an exact array."""

    first: str
    second: str


@dataclass(frozen=True)
class ResultShape:
    """A dataclass with the fields of a command result."""

    exit_code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class SnapshotShape:
    """A dataclass with the fields of a snapshot."""

    id: str
    created_at: str


class ResultStruct(msgspec.Struct, frozen=True):
    """A Struct with the fields of a command result that is not ``CommandResult``."""

    exit_code: int
    stdout: str
    stderr: str


class CommandResultSubclass(CommandResult, frozen=True, kw_only=True):
    """A subclass of ``CommandResult``; only the exact class is accepted."""


class WorkspaceSnapshotSubclass(WorkspaceSnapshot, frozen=True, kw_only=True):
    """A subclass of ``WorkspaceSnapshot``; only the exact class is accepted."""


def fresh_text(label: str) -> str:
    """A string built at run time, so identity checks are not satisfied by interning."""
    return "".join([label, ":", "x" * 64])


# ------------------------------------------------------------------ read_file, diff

TEXT_OPERATIONS = ["read_file", "diff"]


@pytest.mark.parametrize("operation", TEXT_OPERATIONS)
@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(None, id="None"),
        pytest.param(b"text", id="bytes"),
        pytest.param(bytearray(b"text"), id="bytearray"),
        pytest.param(1, id="int"),
        pytest.param(["text"], id="list"),
        pytest.param({"content": "text"}, id="dict"),
        pytest.param(StrSubclass("text"), id="str-subclass"),
    ],
)
async def test_text_operation_returning_a_non_string_is_malformed(operation: str, answer: object) -> None:
    await assert_malformed_result(operation, answer, f"{operation} returned a non-string result")


@pytest.mark.parametrize("operation", TEXT_OPERATIONS)
@pytest.mark.parametrize(
    "make_text",
    [
        pytest.param(lambda: fresh_text("body"), id="text"),
        pytest.param(lambda: "", id="empty"),
        pytest.param(lambda: "é\ud800" * 1000, id="non-ascii-with-lone-surrogate"),
    ],
)
async def test_text_operation_returns_the_adapters_string_object_itself(
    operation: str, make_text: Callable[[], str]
) -> None:
    text = make_text()
    assert await result_of(operation, text) is text


# ------------------------------------------------------------------ write_file, dispose

VOID_OPERATIONS = ["write_file", "dispose"]


@pytest.mark.parametrize("operation", VOID_OPERATIONS)
@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("", id="empty-str"),
        pytest.param("None", id="str-None"),
        pytest.param(0, id="zero"),
        pytest.param(False, id="False"),
        pytest.param([], id="empty-list"),
        pytest.param({}, id="empty-dict"),
        pytest.param(True, id="True"),
        pytest.param(Ellipsis, id="Ellipsis"),
    ],
)
async def test_void_operation_returning_anything_but_none_is_malformed(
    operation: str, answer: object
) -> None:
    await assert_malformed_result(operation, answer, f"{operation} returned a non-void result")


@pytest.mark.parametrize("operation", VOID_OPERATIONS)
async def test_void_operation_returning_none_returns_exactly_none(operation: str) -> None:
    assert await result_of(operation, None) is None


# ------------------------------------------------------------------ list_files

PATH_LIST_MESSAGE = "list_files returned a malformed path list"


@pytest.mark.parametrize(
    "make_answer",
    [
        pytest.param(lambda: None, id="None"),
        pytest.param(lambda: "a.txt", id="str"),
        pytest.param(lambda: b"a.txt", id="bytes"),
        pytest.param(lambda: {"a.txt"}, id="set"),
        pytest.param(lambda: frozenset({"a.txt"}), id="frozenset"),
        pytest.param(lambda: {"a.txt": "a.txt"}, id="dict"),
        pytest.param(lambda: iter(["a.txt"]), id="iterator"),
        pytest.param(lambda: (name for name in ["a.txt"]), id="generator"),
        pytest.param(lambda: ListSubclass(["a.txt"]), id="list-subclass"),
        pytest.param(lambda: PathPair("a.txt", "b.txt"), id="namedtuple"),
        pytest.param(lambda: types.MappingProxyType({"a.txt": "a.txt"}), id="MappingProxyType"),
        pytest.param(lambda: ["a.txt"] * 100_001, id="100001-items"),
        pytest.param(lambda: [1], id="int-item"),
        pytest.param(lambda: ["a.txt", None], id="None-item"),
        pytest.param(lambda: [b"a.txt"], id="bytes-item"),
        pytest.param(lambda: [["a.txt"]], id="nested-list-item"),
        pytest.param(lambda: [StrSubclass("a.txt")], id="str-subclass-item"),
        pytest.param(lambda: ("a.txt", 1), id="tuple-with-int-item"),
    ],
)
async def test_list_files_returning_anything_but_an_array_of_strings_is_malformed(
    make_answer: Callable[[], object],
) -> None:
    await assert_malformed_result("list_files", make_answer(), PATH_LIST_MESSAGE)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param([], [], id="empty-list"),
        pytest.param(["a.txt", "", "src/b.py"], ["a.txt", "", "src/b.py"], id="list-with-empty-name"),
        pytest.param(("a.txt", "b.txt"), ["a.txt", "b.txt"], id="tuple"),
        pytest.param((), [], id="empty-tuple"),
    ],
)
async def test_list_files_returns_a_new_list_of_the_paths(answer: object, expected: list[str]) -> None:
    result = await result_of("list_files", answer)
    assert type(result) is list
    assert result is not answer
    assert result == expected


async def test_list_files_accepts_exactly_100000_paths() -> None:
    answer = [f"f{index}" for index in range(100_000)]
    result = await result_of("list_files", answer)
    assert result == answer
    assert result is not answer


async def test_list_files_result_is_detached_from_the_adapters_list() -> None:
    answer = ["a.txt", "b.txt"]
    result = await result_of("list_files", answer)
    answer.append("injected.txt")
    answer[0] = "changed.txt"
    assert result == ["a.txt", "b.txt"]


async def test_list_files_caller_mutating_its_result_does_not_reach_the_adapters_list() -> None:
    answer = ["a.txt"]
    result = await result_of("list_files", answer)
    assert isinstance(result, list)
    cast("list[str]", result).append("from-caller.txt")
    assert answer == ["a.txt"]


# ------------------------------------------------------------------ execute

COMMAND_RESULT_MESSAGE = "execute returned a malformed command result"
EXIT_CODE_MESSAGE = "execute returned a command result with an invalid exit_code"
OUTPUT_MESSAGE = "execute returned a command result with invalid output"
TIMED_OUT_MESSAGE = "execute returned a command result with an invalid timed_out flag"


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(None, id="None"),
        pytest.param("exit 0", id="str"),
        pytest.param([0, "", ""], id="list"),
        pytest.param((0, "", ""), id="tuple"),
        pytest.param(0, id="int"),
        pytest.param(
            collections.OrderedDict[str, object](exit_code=0, stdout="", stderr=""), id="OrderedDict"
        ),
        pytest.param(DictSubclass(exit_code=0, stdout="", stderr=""), id="dict-subclass"),
        pytest.param(types.MappingProxyType({"exit_code": 0, "stdout": "", "stderr": ""}), id="MappingProxy"),
        pytest.param(ResultShape(exit_code=0, stdout="", stderr=""), id="dataclass"),
        pytest.param(ResultStruct(exit_code=0, stdout="", stderr=""), id="other-Struct"),
        pytest.param(CommandRequest(argv=("ls",)), id="CommandRequest"),
        pytest.param(CommandResultSubclass(exit_code=0, stdout="", stderr=""), id="CommandResult-subclass"),
        pytest.param(WorkspaceSnapshot(id="s", created_at="t"), id="WorkspaceSnapshot"),
        pytest.param({1: 0, "stdout": "", "stderr": ""}, id="int-key"),
        pytest.param({"exitCode": 0, "stdout": "", "stderr": ""}, id="camelCase-key"),
        pytest.param({"exit_code": 0, "stdout": "", "stderr": "", "pid": 1}, id="extra-key"),
        pytest.param({"exit_code": 0, "stdout": "", "stderr": "", "signal": None}, id="extra-None-key"),
        pytest.param({"exit_code": True, "stdout": 1, "timed_out": 1, "x": 0}, id="keys-before-fields"),
    ],
)
async def test_execute_returning_something_other_than_a_command_result_is_malformed(answer: object) -> None:
    await assert_malformed_result("execute", answer, COMMAND_RESULT_MESSAGE)


INVALID_EXIT_CODES = [
    pytest.param(True, id="True"),
    pytest.param(False, id="False"),
    pytest.param(1.0, id="integral-float"),
    pytest.param(0.0, id="zero-float"),
    pytest.param(float("nan"), id="NaN"),
    pytest.param("0", id="str"),
    pytest.param(2**53, id="2**53"),
    pytest.param(-(2**53), id="minus-2**53"),
    pytest.param(10**30, id="huge"),
    pytest.param(IntSubclass(1), id="int-subclass"),
    pytest.param(ExitCode.FAILURE, id="IntEnum"),
    pytest.param([0], id="list"),
]


@pytest.mark.parametrize("exit_code", INVALID_EXIT_CODES)
async def test_execute_dict_result_with_an_invalid_exit_code_is_malformed(exit_code: object) -> None:
    answer = {"exit_code": exit_code, "stdout": "", "stderr": ""}
    await assert_malformed_result("execute", answer, EXIT_CODE_MESSAGE)


@pytest.mark.parametrize("exit_code", INVALID_EXIT_CODES)
async def test_execute_command_result_with_an_invalid_exit_code_is_malformed(exit_code: object) -> None:
    answer = build_command_result(exit_code=exit_code, stdout="", stderr="")
    await assert_malformed_result("execute", answer, EXIT_CODE_MESSAGE)


async def test_execute_result_without_an_exit_code_is_malformed() -> None:
    await assert_malformed_result("execute", {"stdout": "", "stderr": ""}, EXIT_CODE_MESSAGE)


async def test_execute_result_exit_code_is_checked_before_output_and_flag() -> None:
    answer = {"exit_code": 1.5, "stdout": None, "timed_out": "yes"}
    await assert_malformed_result("execute", answer, EXIT_CODE_MESSAGE)


@pytest.mark.parametrize(
    "exit_code",
    [
        pytest.param(None, id="None"),
        pytest.param(0, id="zero"),
        pytest.param(1, id="one"),
        pytest.param(-1, id="minus-one"),
        pytest.param(-9, id="killed-by-signal"),
        pytest.param(255, id="255"),
        pytest.param(MAX_SAFE_INTEGER, id="2**53-1"),
        pytest.param(-MAX_SAFE_INTEGER, id="minus-2**53-1"),
    ],
)
async def test_execute_result_accepts_none_and_any_safe_integer_exit_code(exit_code: int | None) -> None:
    for answer in (
        {"exit_code": exit_code, "stdout": "out", "stderr": "err"},
        CommandResult(exit_code=exit_code, stdout="out", stderr="err"),
    ):
        result = await result_of("execute", answer)
        assert result == CommandResult(exit_code=exit_code, stdout="out", stderr="err", timed_out=None)


INVALID_OUTPUTS = [
    pytest.param(None, id="None"),
    pytest.param(b"", id="bytes"),
    pytest.param(1, id="int"),
    pytest.param(["line"], id="list"),
    pytest.param(StrSubclass("out"), id="str-subclass"),
]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("value", INVALID_OUTPUTS)
async def test_execute_result_with_invalid_output_is_malformed(stream: str, value: object) -> None:
    answer: dict[str, object] = {"exit_code": 0, "stdout": "", "stderr": ""}
    answer[stream] = value
    await assert_malformed_result("execute", answer, OUTPUT_MESSAGE)
    fields: dict[str, object] = {"exit_code": 0, "stdout": "", "stderr": "", stream: value}
    await assert_malformed_result("execute", build_command_result(**fields), OUTPUT_MESSAGE)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_execute_result_with_missing_output_is_malformed(stream: str) -> None:
    answer: dict[str, object] = {"exit_code": 0, "stdout": "", "stderr": ""}
    del answer[stream]
    await assert_malformed_result("execute", answer, OUTPUT_MESSAGE)


async def test_execute_result_output_is_checked_before_the_timed_out_flag() -> None:
    answer = {"exit_code": 0, "stdout": "", "stderr": 0, "timed_out": 0}
    await assert_malformed_result("execute", answer, OUTPUT_MESSAGE)


@pytest.mark.parametrize(
    "timed_out",
    [
        pytest.param(0, id="zero"),
        pytest.param(1, id="one"),
        pytest.param("true", id="str"),
        pytest.param([], id="empty-list"),
        pytest.param(1.0, id="float"),
    ],
)
async def test_execute_result_with_an_invalid_timed_out_flag_is_malformed(timed_out: object) -> None:
    answer = {"exit_code": None, "stdout": "", "stderr": "", "timed_out": timed_out}
    await assert_malformed_result("execute", answer, TIMED_OUT_MESSAGE)
    struct = build_command_result(exit_code=None, stdout="", stderr="", timed_out=timed_out)
    await assert_malformed_result("execute", struct, TIMED_OUT_MESSAGE)


@pytest.mark.parametrize(
    ("answer", "expected_flag"),
    [
        pytest.param({"exit_code": 0, "stdout": "", "stderr": ""}, None, id="absent"),
        pytest.param({"exit_code": 0, "stdout": "", "stderr": "", "timed_out": None}, None, id="None"),
        pytest.param({"exit_code": None, "stdout": "", "stderr": "", "timed_out": True}, True, id="True"),
        pytest.param({"exit_code": 0, "stdout": "", "stderr": "", "timed_out": False}, False, id="False"),
    ],
)
async def test_execute_result_timed_out_flag_may_be_absent_none_or_bool(
    answer: dict[str, object], expected_flag: bool | None
) -> None:
    result = await result_of("execute", answer)
    assert isinstance(result, CommandResult)
    assert result.timed_out is expected_flag


async def test_execute_returns_a_new_frozen_command_result_not_the_adapters() -> None:
    answer = CommandResult(exit_code=2, stdout="out\n", stderr="err\n", timed_out=False)
    result = await result_of("execute", answer)
    assert type(result) is CommandResult
    assert result is not answer
    assert result == answer
    with pytest.raises(AttributeError):
        result.exit_code = 0  # pyright: ignore[reportAttributeAccessIssue]


async def test_execute_dict_result_becomes_a_command_result_detached_from_the_dict() -> None:
    answer: dict[str, object] = {"exit_code": 0, "stdout": "built\n", "stderr": ""}
    result = await result_of("execute", answer)
    answer["exit_code"] = 1
    answer["stdout"] = "tampered"
    answer["timed_out"] = True
    assert type(result) is CommandResult
    assert result == CommandResult(exit_code=0, stdout="built\n", stderr="", timed_out=None)


# ------------------------------------------------------------------ snapshot

SNAPSHOT_MESSAGE = "snapshot returned a malformed snapshot"
SNAPSHOT_ID_MESSAGE = "snapshot.id must be a nonempty string"
SNAPSHOT_CREATED_AT_MESSAGE = "snapshot.created_at must be a nonempty string"
NON_OBJECT_METADATA = "snapshot returned a snapshot with non-object metadata"


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(None, id="None"),
        pytest.param("snap-1", id="str"),
        pytest.param(["snap-1", "2026-01-01"], id="list"),
        pytest.param(collections.OrderedDict[str, object](id="s", created_at="t"), id="OrderedDict"),
        pytest.param(DictSubclass(id="s", created_at="t"), id="dict-subclass"),
        pytest.param(types.MappingProxyType({"id": "s", "created_at": "t"}), id="MappingProxyType"),
        pytest.param(SnapshotShape(id="s", created_at="t"), id="dataclass"),
        pytest.param(CommandResult(exit_code=0, stdout="", stderr=""), id="CommandResult"),
        pytest.param(WorkspaceSnapshotSubclass(id="s", created_at="t"), id="WorkspaceSnapshot-subclass"),
        pytest.param({"id": "s", "created_at": "t", "size": None}, id="extra-None-key"),
        pytest.param({1: "s", "created_at": "t"}, id="int-key"),
        pytest.param({"id": "s", "createdAt": "t"}, id="camelCase-key"),
        pytest.param({"id": "s", "created_at": "t", "size": 1}, id="extra-key"),
        pytest.param({"id": "", "created_at": None, "metadata": 1, "x": 1}, id="keys-before-fields"),
    ],
)
async def test_snapshot_returning_something_other_than_a_snapshot_is_malformed(answer: object) -> None:
    await assert_malformed_result("snapshot", answer, SNAPSHOT_MESSAGE)


INVALID_SNAPSHOT_STRINGS = [
    pytest.param(None, id="None"),
    pytest.param("", id="empty"),
    pytest.param(1, id="int"),
    pytest.param(b"s", id="bytes"),
    pytest.param(StrSubclass("s"), id="str-subclass"),
]


@pytest.mark.parametrize("snapshot_id", INVALID_SNAPSHOT_STRINGS)
async def test_snapshot_with_an_invalid_id_is_malformed(snapshot_id: object) -> None:
    await assert_malformed_result("snapshot", {"id": snapshot_id, "created_at": "t"}, SNAPSHOT_ID_MESSAGE)
    struct = build_snapshot(id=snapshot_id, created_at="t")
    await assert_malformed_result("snapshot", struct, SNAPSHOT_ID_MESSAGE)


async def test_snapshot_without_an_id_is_malformed() -> None:
    await assert_malformed_result("snapshot", {"created_at": "t"}, SNAPSHOT_ID_MESSAGE)


@pytest.mark.parametrize("created_at", INVALID_SNAPSHOT_STRINGS)
async def test_snapshot_with_an_invalid_created_at_is_malformed(created_at: object) -> None:
    answer = {"id": "s", "created_at": created_at}
    await assert_malformed_result("snapshot", answer, SNAPSHOT_CREATED_AT_MESSAGE)
    struct = build_snapshot(id="s", created_at=created_at)
    await assert_malformed_result("snapshot", struct, SNAPSHOT_CREATED_AT_MESSAGE)


async def test_snapshot_without_created_at_is_malformed() -> None:
    await assert_malformed_result("snapshot", {"id": "s"}, SNAPSHOT_CREATED_AT_MESSAGE)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        pytest.param(
            {"id": "", "created_at": "", "metadata": []}, SNAPSHOT_ID_MESSAGE, id="id-before-created_at"
        ),
        pytest.param(
            {"id": "s", "created_at": "", "metadata": []},
            SNAPSHOT_CREATED_AT_MESSAGE,
            id="created_at-before-metadata",
        ),
        pytest.param({"id": "s", "created_at": "t", "metadata": []}, NON_OBJECT_METADATA, id="then-metadata"),
    ],
)
async def test_snapshot_fields_are_checked_in_contract_order(answer: dict[str, object], message: str) -> None:
    await assert_malformed_result("snapshot", answer, message)


async def test_snapshot_created_at_format_is_not_checked() -> None:
    result = await result_of("snapshot", {"id": "s", "created_at": "yesterday, roughly"})
    assert result == WorkspaceSnapshot(id="s", created_at="yesterday, roughly", metadata=None)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({"id": "s", "created_at": "t"}, id="absent"),
        pytest.param({"id": "s", "created_at": "t", "metadata": None}, id="None"),
        pytest.param(WorkspaceSnapshot(id="s", created_at="t"), id="struct-default"),
    ],
)
async def test_snapshot_without_metadata_has_none(answer: object) -> None:
    result = await result_of("snapshot", answer)
    assert type(result) is WorkspaceSnapshot
    assert (result.id, result.created_at, result.metadata) == ("s", "t", None)


async def test_snapshot_returns_a_new_frozen_snapshot_not_the_adapters() -> None:
    metadata: dict[str, object] = {"files": 2, "names": ["a.txt", "b.txt"]}
    answer = build_snapshot(id="mem-1", created_at="2026-01-01T00:00:00Z", metadata=metadata)
    result = await result_of("snapshot", answer)
    assert type(result) is WorkspaceSnapshot
    assert result is not answer
    assert (result.id, result.created_at) == ("mem-1", "2026-01-01T00:00:00Z")
    assert result.metadata is not metadata
    assert result.metadata == {"files": 2, "names": ("a.txt", "b.txt")}
    assert type(result.metadata) is types.MappingProxyType
    with pytest.raises(AttributeError):
        result.id = "other"  # pyright: ignore[reportAttributeAccessIssue]


async def test_snapshot_result_is_detached_from_what_the_adapter_returned() -> None:
    names = ["a.txt"]
    nested: dict[str, object] = {"files": 1}
    answer: dict[str, object] = {
        "id": "s",
        "created_at": "t",
        "metadata": {"names": names, "counts": nested},
    }
    result = await result_of("snapshot", answer)
    names.append("injected.txt")
    nested["files"] = 99
    answer["id"] = "tampered"
    metadata = cast("dict[str, object]", answer["metadata"])
    metadata["added"] = True
    assert isinstance(result, WorkspaceSnapshot)
    assert result.id == "s"
    assert result.metadata is not None
    assert dict(result.metadata) == {"names": ("a.txt",), "counts": types.MappingProxyType({"files": 1})}
