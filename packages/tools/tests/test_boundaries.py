"""Execution boundaries and their identity registry (spec §4.2)."""

from __future__ import annotations

import collections
import copy
import dataclasses
import gc
import weakref
from collections.abc import Iterator
from types import MappingProxyType
from typing import Final, cast

import msgspec
import pytest

from harness_tools import (
    REVIEWED_WORKSPACE_CAPABILITIES,
    TOOL_EXECUTION_BOUNDARY_INVALID,
    WORKSPACE_CAPABILITY_ACCESS,
    InvalidToolExecutionBoundaryError,
    PureBoundary,
    SandboxBoundary,
    Tool,
    ToolError,
    ToolExecutionBoundary,
    ToolExecutionContext,
    WorkspaceBoundary,
    create_bounded_tool,
    create_tool,
    get_tool_execution_boundary,
)

NOT_AN_OBJECT: Final = "tool execution boundary must be an object"
UNEXPECTED_PROPERTIES: Final = "tool execution boundary contains unexpected properties"
KIND_MISSING: Final = "tool execution boundary property kind must be present"
KIND_UNKNOWN: Final = "tool execution boundary kind is unknown"
ACCESS_UNKNOWN: Final = "workspace tool boundary access must be read, write or execute"
CAPABILITY_NOT_REVIEWED: Final = "workspace tool boundary capability must be a reviewed operation"


def access_mismatch(expected: str, capability: str) -> str:
    return f"workspace tool boundary access must be {expected} for {capability}"


WORKSPACE_ROOT_INVALID: Final = "workspace tool boundary root must be a nonempty string"
SANDBOX_ROOT_INVALID: Final = "sandbox tool boundary root must be a nonempty string"

# ------------------------------------------------------------------ helpers


class NoteParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str


async def take_note(params: NoteParameters, context: ToolExecutionContext | None = None) -> object:
    return params.text


def note_tool() -> Tool[NoteParameters]:
    return create_tool(name="note", description="Take a note.", parameters=NoteParameters, execute=take_note)


def workspace_dict(**overrides: object) -> dict[object, object]:
    boundary: dict[object, object] = {
        "kind": "workspace",
        "access": "read",
        "capability": "read_file",
        "root": "/srv/checkout",
    }
    boundary.update(overrides)
    return boundary


def without(boundary: dict[object, object], key: str) -> dict[object, object]:
    return {name: value for name, value in boundary.items() if name != key}


FRESH_TOOL: Final = object()


def refusal(boundary: object, tool: object = FRESH_TOOL) -> InvalidToolExecutionBoundaryError:
    """Bound ``tool`` (default: a fresh one) to ``boundary``; return the error; check nothing is recorded."""
    target = note_tool() if tool is FRESH_TOOL else tool
    with pytest.raises(InvalidToolExecutionBoundaryError) as caught:
        create_bounded_tool(cast(Tool[NoteParameters], target), boundary)
    assert get_tool_execution_boundary(target) is None
    return caught.value


class StrSubclass(str):
    """A ``str`` subclass."""


class DictSubclass(dict[object, object]):
    """A ``dict`` subclass that reports a valid boundary however it is read."""


class LyingDict(dict[object, object]):
    """A ``dict`` subclass that shows a validator a pure boundary whatever it holds."""

    def __getitem__(self, key: object) -> object:
        return "pure"

    def __iter__(self) -> Iterator[object]:
        return iter(["kind"])

    def __len__(self) -> int:
        return 1


class RecordingKey:
    """A key that hashes like ``"kind"`` and records every comparison made with it."""

    def __init__(self) -> None:
        self.comparisons: list[object] = []

    def __hash__(self) -> int:
        return hash("kind")

    def __eq__(self, other: object) -> bool:
        self.comparisons.append(other)
        return False


class WorkspaceBoundarySubclass(WorkspaceBoundary, frozen=True):
    """A subclass of a record type."""


@dataclasses.dataclass(frozen=True)
class DataclassBoundary:
    kind: str = "pure"


class StructBoundary(msgspec.Struct, frozen=True):
    kind: str = "pure"


# ------------------------------------------------------------------ the check table, row by row


@pytest.mark.parametrize(
    "boundary",
    [
        pytest.param(None, id="none"),
        pytest.param("pure", id="kind-string"),
        pytest.param(["kind", "pure"], id="list"),
        pytest.param((("kind", "pure"),), id="tuple-of-pairs"),
        pytest.param(collections.OrderedDict([("kind", "pure")]), id="ordered-dict"),
        pytest.param(collections.defaultdict(str, kind="pure"), id="defaultdict"),
        pytest.param(DictSubclass({"kind": "pure"}), id="dict-subclass"),
        pytest.param(LyingDict({"kind": "sandbox"}), id="lying-dict-subclass"),
        pytest.param(collections.UserDict(kind="pure"), id="userdict"),
        pytest.param(MappingProxyType({"kind": "pure"}), id="mappingproxy"),
        pytest.param(StructBoundary(), id="other-struct"),
        pytest.param(DataclassBoundary(), id="dataclass"),
        pytest.param(WorkspaceBoundarySubclass(capability="read_file", root="/r"), id="record-subclass"),
        pytest.param(PureBoundary, id="record-class"),
        pytest.param(object(), id="object"),
    ],
)
def test_boundary_that_is_not_an_exact_dict_or_record_is_not_an_object(boundary: object) -> None:
    assert str(refusal(boundary)) == NOT_AN_OBJECT


@pytest.mark.parametrize(
    "boundary",
    [
        pytest.param({1: "x", "kind": "pure"}, id="int-key"),
        pytest.param({None: "x", "kind": "pure"}, id="none-key"),
        pytest.param({("kind",): "pure"}, id="tuple-key-and-no-kind"),
        pytest.param({StrSubclass("kind"): "pure"}, id="str-subclass-kind-key"),
        pytest.param({"kind": "unknown", b"root": "/r"}, id="bytes-key-beats-unknown-kind"),
        pytest.param({"kind": "pure", StrSubclass("extra"): 1}, id="str-subclass-extra-key"),
    ],
)
def test_boundary_with_a_non_string_key_contains_unexpected_properties(boundary: object) -> None:
    assert str(refusal(boundary)) == UNEXPECTED_PROPERTIES


def test_key_types_are_checked_before_any_lookup() -> None:
    hostile = RecordingKey()
    boundary: dict[object, object] = {hostile: "x", "kind": "pure"}
    hostile.comparisons.clear()

    assert str(refusal(boundary)) == UNEXPECTED_PROPERTIES
    assert hostile.comparisons == []


@pytest.mark.parametrize(
    "boundary",
    [
        pytest.param({}, id="empty"),
        pytest.param(without(workspace_dict(), "kind"), id="workspace-fields-without-kind"),
        pytest.param({"root": "/r"}, id="sandbox-fields-without-kind"),
        pytest.param({"Kind": "pure"}, id="capitalised-key"),
        pytest.param({"type": "pure"}, id="type-instead-of-kind"),
    ],
)
def test_boundary_without_kind_reports_kind_must_be_present(boundary: object) -> None:
    assert str(refusal(boundary)) == KIND_MISSING


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(None, id="none-is-not-absent"),
        pytest.param("", id="empty"),
        pytest.param("Pure", id="capitalised"),
        pytest.param("host", id="host"),
        pytest.param("write", id="write"),
        pytest.param("workspace ", id="trailing-space"),
        pytest.param(StrSubclass("pure"), id="str-subclass"),
        pytest.param(1, id="int"),
        pytest.param(["pure"], id="list"),
    ],
)
def test_boundary_with_an_unknown_kind_is_refused(kind: object) -> None:
    assert str(refusal({"kind": kind})) == KIND_UNKNOWN


def test_unknown_kind_is_reported_before_the_key_set() -> None:
    assert str(refusal({"kind": "host", "root": "/r", "extra": 1})) == KIND_UNKNOWN


@pytest.mark.parametrize(
    "boundary",
    [
        pytest.param({"kind": "pure", "root": "/r"}, id="pure-with-root"),
        pytest.param({"kind": "pure", "root": None}, id="pure-with-none-root"),
        pytest.param({"kind": "pure", "capability": "read_file"}, id="pure-with-capability"),
        pytest.param(without(workspace_dict(), "access"), id="workspace-without-access"),
        pytest.param(without(workspace_dict(), "capability"), id="workspace-without-capability"),
        pytest.param(without(workspace_dict(), "root"), id="workspace-without-root"),
        pytest.param(workspace_dict(path="src"), id="workspace-with-path"),
        pytest.param(workspace_dict(extra=None), id="workspace-with-none-extra"),
        pytest.param(workspace_dict(capabilities=["read_file"]), id="workspace-with-capabilities"),
        pytest.param({"kind": "workspace"}, id="workspace-with-kind-only"),
        pytest.param({"kind": "sandbox"}, id="sandbox-without-root"),
        pytest.param({"kind": "sandbox", "root": "/r", "access": "read"}, id="sandbox-with-access"),
        pytest.param({"kind": "sandbox", "root": "/r", "image": None}, id="sandbox-with-none-extra"),
    ],
)
def test_boundary_whose_key_set_differs_from_its_kind_contains_unexpected_properties(
    boundary: object,
) -> None:
    assert str(refusal(boundary)) == UNEXPECTED_PROPERTIES


def test_key_set_is_checked_before_field_values() -> None:
    boundary = workspace_dict(access="write", capability="execute", root="", extra=1)

    assert str(refusal(boundary)) == UNEXPECTED_PROPERTIES


@pytest.mark.parametrize(
    "access",
    [
        pytest.param("admin", id="unknown"),
        pytest.param("READ", id="capitalised"),
        pytest.param("read ", id="trailing-space"),
        pytest.param("", id="empty"),
        pytest.param(None, id="none"),
        pytest.param(StrSubclass("read"), id="str-subclass"),
        pytest.param(["read"], id="list"),
    ],
)
def test_workspace_boundary_access_must_be_read_write_or_execute(access: object) -> None:
    assert str(refusal(workspace_dict(access=access))) == ACCESS_UNKNOWN


def test_access_is_checked_before_capability_and_root() -> None:
    boundary = workspace_dict(access="delete", capability="dispose", root="")

    assert str(refusal(boundary)) == ACCESS_UNKNOWN


@pytest.mark.parametrize(
    ("capability", "access", "expected"),
    [
        pytest.param("read_file", "write", "read", id="read-declared-write"),
        pytest.param("diff", "execute", "read", id="diff-declared-execute"),
        pytest.param("write_file", "read", "write", id="write-declared-read"),
        pytest.param("write_file", "execute", "write", id="write-declared-execute"),
        pytest.param("execute", "read", "execute", id="execute-declared-read"),
        pytest.param("execute", "write", "execute", id="execute-declared-write"),
    ],
)
def test_access_must_be_the_one_its_capability_declares(capability: str, access: str, expected: str) -> None:
    # The reviewer states what the operation does; a mismatch means reviewer and code disagree.
    boundary = workspace_dict(capability=capability, access=access, root="")

    assert str(refusal(boundary)) == access_mismatch(expected, capability)


@pytest.mark.parametrize(
    "capability",
    [
        pytest.param("dispose", id="dispose"),
        pytest.param("readFile", id="camel-case"),
        pytest.param("READ_FILE", id="upper-case"),
        pytest.param("fs.read", id="tool-action"),
        pytest.param("", id="empty"),
        pytest.param(None, id="none"),
        pytest.param(StrSubclass("read_file"), id="str-subclass"),
        pytest.param(("read_file",), id="tuple"),
    ],
)
def test_workspace_boundary_capability_must_be_a_reviewed_operation(capability: object) -> None:
    assert str(refusal(workspace_dict(capability=capability))) == CAPABILITY_NOT_REVIEWED


def test_capability_is_checked_before_root() -> None:
    assert str(refusal(workspace_dict(capability="dispose", root=None))) == CAPABILITY_NOT_REVIEWED


@pytest.mark.parametrize(
    "root",
    [
        pytest.param("", id="empty"),
        pytest.param(None, id="none"),
        pytest.param(b"/srv", id="bytes"),
        pytest.param(1, id="int"),
        pytest.param(StrSubclass("/srv"), id="str-subclass"),
        pytest.param(["/srv"], id="list"),
    ],
)
def test_workspace_boundary_root_must_be_a_nonempty_string(root: object) -> None:
    assert str(refusal(workspace_dict(root=root))) == WORKSPACE_ROOT_INVALID


@pytest.mark.parametrize(
    "root",
    [
        pytest.param("", id="empty"),
        pytest.param(None, id="none"),
        pytest.param(b"/sandbox", id="bytes"),
        pytest.param(0, id="int"),
        pytest.param(StrSubclass("/sandbox"), id="str-subclass"),
    ],
)
def test_sandbox_boundary_root_must_be_a_nonempty_string(root: object) -> None:
    assert str(refusal({"kind": "sandbox", "root": root})) == SANDBOX_ROOT_INVALID


def test_every_refusal_is_a_typed_tool_error_with_the_boundary_code() -> None:
    error = refusal({"kind": "host"})

    assert isinstance(error, ToolError)
    assert error.code == TOOL_EXECUTION_BOUNDARY_INVALID == "TOOL_EXECUTION_BOUNDARY_INVALID"


# ------------------------------------------------------------------ record inputs


@pytest.mark.parametrize(
    ("boundary", "message"),
    [
        pytest.param(
            WorkspaceBoundary(capability="write_file", root="/r"),
            access_mismatch("write", "write_file"),
            id="workspace-write_file-without-write-access",
        ),
        pytest.param(
            WorkspaceBoundary(capability="execute", root="/r"),
            access_mismatch("execute", "execute"),
            id="workspace-execute-without-execute-access",
        ),
        pytest.param(
            WorkspaceBoundary(capability="dispose", root="/r"),  # pyright: ignore[reportArgumentType]
            CAPABILITY_NOT_REVIEWED,
            id="workspace-dispose",
        ),
        pytest.param(
            WorkspaceBoundary(capability=StrSubclass("read_file"), root="/r"),  # pyright: ignore[reportArgumentType]
            CAPABILITY_NOT_REVIEWED,
            id="workspace-str-subclass-capability",
        ),
        pytest.param(
            WorkspaceBoundary(capability="read_file", root="/r", access="write"),
            access_mismatch("read", "read_file"),
            id="workspace-write-access",
        ),
        pytest.param(
            WorkspaceBoundary(capability="dispose", root="", access="delete"),  # pyright: ignore[reportArgumentType]
            ACCESS_UNKNOWN,
            id="workspace-access-checked-first",
        ),
        pytest.param(
            WorkspaceBoundary(capability="read_file", root=""),
            WORKSPACE_ROOT_INVALID,
            id="workspace-empty-root",
        ),
        pytest.param(
            WorkspaceBoundary(capability="list_files", root=None),  # pyright: ignore[reportArgumentType]
            WORKSPACE_ROOT_INVALID,
            id="workspace-none-root",
        ),
        pytest.param(SandboxBoundary(root=""), SANDBOX_ROOT_INVALID, id="sandbox-empty-root"),
        pytest.param(
            SandboxBoundary(root=7),  # pyright: ignore[reportArgumentType]
            SANDBOX_ROOT_INVALID,
            id="sandbox-int-root",
        ),
        pytest.param(
            SandboxBoundary(root=StrSubclass("/sandbox")),
            SANDBOX_ROOT_INVALID,
            id="sandbox-str-subclass-root",
        ),
    ],
)
def test_records_are_revalidated_field_by_field(boundary: object, message: str) -> None:
    assert str(refusal(boundary)) == message


def test_pure_record_is_accepted() -> None:
    tool = note_tool()

    create_bounded_tool(tool, PureBoundary())

    assert get_tool_execution_boundary(tool) == PureBoundary()


@pytest.mark.parametrize("capability", sorted(REVIEWED_WORKSPACE_CAPABILITIES))
def test_workspace_record_with_each_reviewed_capability_is_accepted(capability: str) -> None:
    tool = note_tool()
    access = WORKSPACE_CAPABILITY_ACCESS[capability]
    record = WorkspaceBoundary(capability=capability, root="/srv", access=access)  # pyright: ignore[reportArgumentType]

    create_bounded_tool(tool, record)

    boundary = get_tool_execution_boundary(tool)
    assert boundary == record
    assert isinstance(boundary, WorkspaceBoundary)
    assert boundary.access == access


def test_sandbox_record_is_accepted() -> None:
    tool = note_tool()

    create_bounded_tool(tool, SandboxBoundary(root="/sandbox"))

    assert get_tool_execution_boundary(tool) == SandboxBoundary(root="/sandbox")


def test_reviewed_capabilities_are_every_operation_but_dispose_each_with_its_access() -> None:
    assert dict(WORKSPACE_CAPABILITY_ACCESS) == {
        "read_file": "read",
        "list_files": "read",
        "diff": "read",
        "snapshot": "read",
        "write_file": "write",
        "execute": "execute",
    }
    assert set(REVIEWED_WORKSPACE_CAPABILITIES) == set(WORKSPACE_CAPABILITY_ACCESS)


# ------------------------------------------------------------------ dict inputs are normalised


@pytest.mark.parametrize(
    ("boundary", "record"),
    [
        pytest.param({"kind": "pure"}, PureBoundary(), id="pure"),
        pytest.param(
            workspace_dict(capability="read_file"),
            WorkspaceBoundary(capability="read_file", root="/srv/checkout"),
            id="workspace-read_file",
        ),
        pytest.param(
            workspace_dict(capability="list_files"),
            WorkspaceBoundary(capability="list_files", root="/srv/checkout"),
            id="workspace-list_files",
        ),
        pytest.param(
            workspace_dict(capability="diff"),
            WorkspaceBoundary(capability="diff", root="/srv/checkout"),
            id="workspace-diff",
        ),
        pytest.param(
            workspace_dict(capability="snapshot"),
            WorkspaceBoundary(capability="snapshot", root="/srv/checkout"),
            id="workspace-snapshot",
        ),
        pytest.param({"kind": "sandbox", "root": "/sandbox"}, SandboxBoundary(root="/sandbox"), id="sandbox"),
    ],
)
def test_valid_dict_boundary_is_recorded_as_its_record(
    boundary: object, record: ToolExecutionBoundary
) -> None:
    tool = note_tool()

    create_bounded_tool(tool, boundary)

    recorded = get_tool_execution_boundary(tool)
    assert recorded == record
    assert type(recorded) is type(record)


def test_dict_key_order_does_not_matter() -> None:
    tool = note_tool()

    create_bounded_tool(tool, {"root": "/srv", "capability": "diff", "access": "read", "kind": "workspace"})

    assert get_tool_execution_boundary(tool) == WorkspaceBoundary(capability="diff", root="/srv")


def test_recorded_boundary_is_detached_from_the_callers_dict() -> None:
    tool = note_tool()
    boundary = workspace_dict(root="/srv/checkout")

    create_bounded_tool(tool, boundary)
    boundary["capability"] = "execute"
    boundary["root"] = "/"

    assert get_tool_execution_boundary(tool) == WorkspaceBoundary(
        capability="read_file", root="/srv/checkout"
    )


@pytest.mark.parametrize(
    "root",
    [
        pytest.param("relative/../x", id="dot-dot"),
        pytest.param(" ", id="space"),
        pytest.param("/srv/checkout/", id="trailing-slash"),
        pytest.param("//srv//checkout", id="double-slashes"),
        pytest.param("~/project", id="tilde"),
        pytest.param("C:\\work", id="windows-path"),
        pytest.param("/nonexistent/\x00/path", id="nul"),
    ],
)
def test_roots_are_kept_verbatim(root: str) -> None:
    workspace_tool = note_tool()
    sandbox_tool = note_tool()

    create_bounded_tool(workspace_tool, workspace_dict(root=root))
    create_bounded_tool(sandbox_tool, SandboxBoundary(root=root))

    workspace_boundary = get_tool_execution_boundary(workspace_tool)
    sandbox_boundary = get_tool_execution_boundary(sandbox_tool)
    assert isinstance(workspace_boundary, WorkspaceBoundary)
    assert isinstance(sandbox_boundary, SandboxBoundary)
    assert workspace_boundary.root == root
    assert sandbox_boundary.root == root


# ------------------------------------------------------------------ create_bounded_tool


def test_create_bounded_tool_returns_the_same_object() -> None:
    tool = note_tool()

    assert create_bounded_tool(tool, {"kind": "pure"}) is tool


@pytest.mark.parametrize(
    "not_a_tool",
    [
        pytest.param(None, id="none"),
        pytest.param(object(), id="object"),
        pytest.param({"name": "note"}, id="dict"),
        pytest.param(note_tool, id="tool-factory"),
    ],
)
def test_invalid_boundary_is_reported_before_the_tool_type(not_a_tool: object) -> None:
    error = refusal({"kind": "host"}, tool=not_a_tool)

    assert str(error) == KIND_UNKNOWN


@pytest.mark.parametrize(
    "not_a_tool",
    [
        pytest.param(None, id="none"),
        pytest.param(object(), id="object"),
        pytest.param({"name": "note"}, id="dict"),
        pytest.param(note_tool, id="tool-factory"),
        pytest.param(MappingProxyType({"kind": "pure"}), id="mappingproxy"),
    ],
)
def test_valid_boundary_for_a_non_tool_raises_type_error(not_a_tool: object) -> None:
    with pytest.raises(TypeError):
        create_bounded_tool(cast(Tool[NoteParameters], not_a_tool), {"kind": "pure"})


def test_look_alike_struct_with_the_same_fields_is_not_a_tool() -> None:
    class LookAlike(msgspec.Struct, frozen=True, eq=False, weakref=True, kw_only=True):
        name: str
        description: str
        parameters: object
        input_schema: object
        authorization: object
        execute: object

    real = note_tool()
    look_alike = LookAlike(**msgspec.structs.asdict(real))

    with pytest.raises(TypeError):
        create_bounded_tool(cast(Tool[NoteParameters], look_alike), {"kind": "pure"})
    assert get_tool_execution_boundary(look_alike) is None


def test_failed_validation_records_nothing_so_a_valid_boundary_can_follow() -> None:
    tool = note_tool()

    refusal(workspace_dict(capability="write_file"), tool=tool)
    create_bounded_tool(tool, workspace_dict(capability="list_files"))

    assert get_tool_execution_boundary(tool) == WorkspaceBoundary(
        capability="list_files", root="/srv/checkout"
    )


@pytest.mark.parametrize(
    "second",
    [
        pytest.param({"kind": "pure"}, id="pure-dict"),
        pytest.param(PureBoundary(), id="pure-record"),
        pytest.param({"kind": "sandbox", "root": "/sandbox"}, id="sandbox"),
        pytest.param(workspace_dict(capability="list_files"), id="other-capability"),
        pytest.param(workspace_dict(), id="identical"),
    ],
)
def test_second_boundary_on_the_same_tool_is_refused_and_the_first_is_kept(second: object) -> None:
    tool = create_bounded_tool(note_tool(), workspace_dict())

    with pytest.raises(InvalidToolExecutionBoundaryError) as caught:
        create_bounded_tool(tool, second)

    assert str(caught.value) == "tool already has an execution boundary"
    assert caught.value.code == TOOL_EXECUTION_BOUNDARY_INVALID
    assert get_tool_execution_boundary(tool) == WorkspaceBoundary(
        capability="read_file", root="/srv/checkout"
    )


def test_second_invalid_boundary_reports_the_boundary_error_first() -> None:
    tool = create_bounded_tool(note_tool(), {"kind": "pure"})

    with pytest.raises(InvalidToolExecutionBoundaryError) as caught:
        create_bounded_tool(tool, {"kind": "host"})

    assert str(caught.value) == KIND_UNKNOWN
    assert get_tool_execution_boundary(tool) == PureBoundary()


# ------------------------------------------------------------------ get_tool_execution_boundary


def test_copies_of_a_bounded_tool_are_unbounded() -> None:
    tool = create_bounded_tool(note_tool(), workspace_dict())

    assert get_tool_execution_boundary(copy.copy(tool)) is None
    assert get_tool_execution_boundary(copy.deepcopy(tool)) is None
    assert get_tool_execution_boundary(msgspec.structs.replace(tool)) is None
    assert get_tool_execution_boundary(msgspec.structs.replace(tool, name="other")) is None
    assert get_tool_execution_boundary(tool) == WorkspaceBoundary(
        capability="read_file", root="/srv/checkout"
    )


def test_equal_looking_tool_is_unbounded() -> None:
    bounded = create_bounded_tool(note_tool(), {"kind": "pure"})
    twin = note_tool()

    assert get_tool_execution_boundary(twin) is None
    assert get_tool_execution_boundary(bounded) == PureBoundary()


class NotWeaklyReferenceable:
    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = "note"


class HostileObject:
    """Fails on every kind of inspection a careless registry lookup might do."""

    def __hash__(self) -> int:
        raise RuntimeError("hashed")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("compared")

    def __getattribute__(self, name: str) -> object:
        raise RuntimeError(f"inspected: {name}")


class ClaimsToBeATool:
    @property
    def __class__(self) -> type[object]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return Tool


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="none"),
        pytest.param(0, id="int"),
        pytest.param("note", id="string"),
        pytest.param({"kind": "pure"}, id="dict"),
        pytest.param([], id="unhashable-list"),
        pytest.param(PureBoundary(), id="boundary-record"),
        pytest.param(Tool, id="tool-class"),
        pytest.param(NotWeaklyReferenceable(), id="not-weakly-referenceable"),
        pytest.param(HostileObject(), id="hostile-object"),
        pytest.param(ClaimsToBeATool(), id="claims-to-be-a-tool"),
        pytest.param(weakref.ref(note_tool), id="weak-reference"),
    ],
)
def test_get_boundary_returns_none_for_anything_but_a_bounded_tool_and_never_raises(value: object) -> None:
    assert get_tool_execution_boundary(value) is None


def test_get_boundary_returns_none_for_an_unbounded_tool() -> None:
    assert get_tool_execution_boundary(note_tool()) is None


def test_registry_keeps_no_tool_alive() -> None:
    tool = create_bounded_tool(note_tool(), workspace_dict())
    reference = weakref.ref(tool)

    del tool
    gc.collect()

    assert reference() is None


def test_each_tool_keeps_its_own_boundary() -> None:
    reader = create_bounded_tool(note_tool(), workspace_dict(capability="read_file", root="/a"))
    lister = create_bounded_tool(note_tool(), workspace_dict(capability="list_files", root="/b"))
    pure = create_bounded_tool(note_tool(), {"kind": "pure"})

    assert get_tool_execution_boundary(reader) == WorkspaceBoundary(capability="read_file", root="/a")
    assert get_tool_execution_boundary(lister) == WorkspaceBoundary(capability="list_files", root="/b")
    assert get_tool_execution_boundary(pure) == PureBoundary()


# ------------------------------------------------------------------ records


def test_records_have_their_kind() -> None:
    assert PureBoundary().kind == "pure"
    assert WorkspaceBoundary(capability="read_file", root="/r").kind == "workspace"
    assert SandboxBoundary(root="/r").kind == "sandbox"


def test_workspace_record_access_is_read() -> None:
    assert WorkspaceBoundary(capability="diff", root="/r").access == "read"


def test_records_are_value_equal_and_hash_alike() -> None:
    assert PureBoundary() == PureBoundary()
    assert hash(PureBoundary()) == hash(PureBoundary())
    assert WorkspaceBoundary(capability="diff", root="/r") == WorkspaceBoundary(capability="diff", root="/r")
    assert hash(WorkspaceBoundary(capability="diff", root="/r")) == hash(
        WorkspaceBoundary(capability="diff", root="/r")
    )
    assert WorkspaceBoundary(capability="diff", root="/r") != WorkspaceBoundary(capability="diff", root="/s")
    assert WorkspaceBoundary(capability="diff", root="/r") != WorkspaceBoundary(
        capability="snapshot", root="/r"
    )
    assert SandboxBoundary(root="/r") == SandboxBoundary(root="/r")
    assert SandboxBoundary(root="/r") != SandboxBoundary(root="/s")


def test_records_of_different_kinds_are_not_equal() -> None:
    records: list[ToolExecutionBoundary] = [
        PureBoundary(),
        WorkspaceBoundary(capability="read_file", root="/r"),
        SandboxBoundary(root="/r"),
    ]

    assert len(set(records)) == 3


def test_records_are_frozen() -> None:
    workspace = WorkspaceBoundary(capability="read_file", root="/r")
    sandbox = SandboxBoundary(root="/r")

    with pytest.raises(AttributeError):
        setattr(workspace, "capability", "execute")  # noqa: B010 - bypasses the static check on purpose
    with pytest.raises(AttributeError):
        setattr(workspace, "access", "write")  # noqa: B010 - bypasses the static check on purpose
    with pytest.raises(AttributeError):
        setattr(sandbox, "root", "/")  # noqa: B010 - bypasses the static check on purpose
    assert workspace == WorkspaceBoundary(capability="read_file", root="/r")
    assert sandbox == SandboxBoundary(root="/r")
