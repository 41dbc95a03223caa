"""The tool model: permission intents, execution contexts, ``Tool`` and ``create_tool`` (spec §4.1)."""

from __future__ import annotations

import copy
import dataclasses
import typing
import weakref
from collections.abc import Callable
from types import MappingProxyType
from typing import Annotated, cast

import msgspec
import pytest

from harness_tools import (
    Tool,
    ToolExecute,
    ToolExecutionContext,
    ToolPermissionIntent,
    create_tool,
    get_tool_execution_boundary,
    schema_for_parameters,
)
from harness_workspace import AbortController, JsonValue, MemoryWorkspace, restrict_workspace

# ------------------------------------------------------------------ parameter types


class SearchParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Search the workspace for a pattern."""

    pattern: Annotated[str, msgspec.Meta(min_length=1)]
    limit: int = 10


class Window(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A range of lines."""

    start: int
    stop: int


class ExcerptParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Show part of a file."""

    path: str
    window: Window


class LenientParameters(msgspec.Struct, frozen=True):
    """Unknown fields are ignored by msgspec here."""

    query: str


class SchemaDict(dict[str, object]):
    """A ``dict`` subclass posing as a schema."""


@dataclasses.dataclass(frozen=True)
class DataclassParameters:
    query: str


async def search(params: SearchParameters, context: ToolExecutionContext | None = None) -> object:
    return {"pattern": params.pattern, "limit": params.limit}


def authorize_search(params: SearchParameters) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="fs.search", subject=params.pattern, scope="run")


async def ignore_parameters(params: object, context: ToolExecutionContext | None = None) -> object:
    return None


def search_tool(name: str = "search") -> Tool[SearchParameters]:
    return create_tool(
        name=name,
        description="Search the workspace.",
        parameters=SearchParameters,
        execute=search,
        authorization=authorize_search,
    )


# ------------------------------------------------------------------ ToolPermissionIntent


def test_permission_intent_defaults_subject_and_scope_to_none() -> None:
    intent = ToolPermissionIntent(action="fs.read")

    assert (intent.action, intent.subject, intent.scope) == ("fs.read", None, None)


def test_permission_intent_is_frozen() -> None:
    intent = ToolPermissionIntent(action="fs.read", subject="a.txt", scope="once")

    with pytest.raises(AttributeError):
        intent.action = "fs.write"  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(AttributeError):
        setattr(intent, "subject", "b.txt")  # noqa: B010 - bypasses the static check on purpose
    assert intent == ToolPermissionIntent(action="fs.read", subject="a.txt", scope="once")


def test_permission_intents_compare_by_value() -> None:
    first = ToolPermissionIntent(action="fs.read", subject="a.txt", scope="run")

    assert first == ToolPermissionIntent(action="fs.read", subject="a.txt", scope="run")
    assert first != ToolPermissionIntent(action="fs.read", subject="a.txt", scope="once")


# ------------------------------------------------------------------ ToolExecutionContext


def test_execution_context_defaults_to_nothing() -> None:
    context = ToolExecutionContext()

    assert context.signal is None
    assert context.workspace is None
    assert context.session_id is None
    assert context.task_id is None
    assert context.call_id is None


def test_execution_context_holds_the_given_workspace_view_and_signal_themselves() -> None:
    view = restrict_workspace(MemoryWorkspace({"a.txt": "alpha"}), "read_file")
    signal = AbortController().signal

    context = ToolExecutionContext(
        signal=signal, workspace=view, session_id="s-1", task_id="t-1", call_id="c-1"
    )

    assert context.workspace is view
    assert context.signal is signal
    assert (context.session_id, context.task_id, context.call_id) == ("s-1", "t-1", "c-1")


def test_execution_context_is_frozen() -> None:
    context = ToolExecutionContext(session_id="s-1")
    view = restrict_workspace(MemoryWorkspace(), "read_file")

    with pytest.raises(AttributeError):
        context.workspace = view  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(AttributeError):
        setattr(context, "session_id", "s-2")  # noqa: B010 - bypasses the static check on purpose
    assert context.workspace is None
    assert context.session_id == "s-1"


# ------------------------------------------------------------------ Tool


def test_create_tool_keeps_every_given_field() -> None:
    tool = search_tool()

    assert tool.name == "search"
    assert tool.description == "Search the workspace."
    assert tool.parameters is SearchParameters
    assert tool.execute is search
    assert tool.authorization is authorize_search


def test_tool_has_exactly_the_specified_fields() -> None:
    assert list(Tool.__struct_fields__) == [
        "name",
        "description",
        "parameters",
        "input_schema",
        "authorization",
        "execute",
    ]


def test_tool_and_context_type_hints_resolve_at_run_time() -> None:
    # JsonValue and Workspace must be resolvable from this package's modules, so that
    # msgspec and typing can introspect the records downstream code builds on.
    assert [field.name for field in msgspec.structs.fields(Tool)] == list(Tool.__struct_fields__)
    hints = typing.get_type_hints(ToolExecutionContext)
    assert set(hints) == {"signal", "workspace", "session_id", "task_id", "call_id"}


def test_create_tool_defaults_authorization_to_none() -> None:
    tool = create_tool(name="noop", description="", parameters=SearchParameters, execute=search)

    assert tool.authorization is None


def test_create_tool_returns_an_unbounded_tool() -> None:
    assert get_tool_execution_boundary(search_tool()) is None


async def test_created_tool_executes_with_validated_parameters() -> None:
    tool = search_tool()
    params = msgspec.convert({"pattern": "TODO"}, tool.parameters, strict=True)

    assert await tool.execute(params, None) == {"pattern": "TODO", "limit": 10}
    assert tool.authorization is not None
    assert tool.authorization(params) == ToolPermissionIntent(action="fs.search", subject="TODO", scope="run")


def test_tool_is_frozen() -> None:
    tool = search_tool()

    with pytest.raises(AttributeError):
        tool.name = "other"  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(AttributeError):
        setattr(tool, "execute", ignore_parameters)  # noqa: B010 - bypasses the static check on purpose
    with pytest.raises(AttributeError):
        delattr(tool, "authorization")
    assert tool.name == "search"
    assert tool.execute is search
    assert tool.authorization is authorize_search


def test_tools_with_equal_fields_are_not_equal() -> None:
    first = search_tool()
    second = search_tool()

    assert first == first  # noqa: PLR0124 - identity equality is the behaviour under test
    assert first != second
    assert not (first == second)  # noqa: SIM201 - exercises __eq__, not only __ne__


def test_tool_copies_are_different_tools() -> None:
    tool = search_tool()

    assert copy.copy(tool) != tool
    assert msgspec.structs.replace(tool) != tool


def test_tools_hash_by_identity() -> None:
    first = search_tool()
    second = search_tool()

    assert hash(first) == object.__hash__(first)
    assert len({first, second, first}) == 2
    assert {first: "first", second: "second"}[second] == "second"


def test_tool_is_weakly_referenceable() -> None:
    tool = search_tool()

    reference = weakref.ref(tool)

    assert reference() is tool


# ------------------------------------------------------------------ schema generation


def test_schema_is_generated_from_a_forbid_unknown_fields_struct() -> None:
    tool = search_tool()

    assert tool.input_schema == {
        "description": "Search the workspace for a pattern.",
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "default": 10},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }


def test_generated_schema_drops_the_title_and_forbids_additional_properties() -> None:
    schema = search_tool().input_schema

    assert schema is not None
    assert "title" not in schema
    assert "$ref" not in schema
    assert schema["additionalProperties"] is False


def test_generated_schema_keeps_nested_structs_under_defs() -> None:
    tool = create_tool(
        name="excerpt", description="", parameters=ExcerptParameters, execute=ignore_parameters
    )

    schema = tool.input_schema

    assert schema is not None
    assert "title" not in schema
    assert schema["properties"] == {
        "path": {"type": "string"},
        "window": {"$ref": "#/$defs/Window"},
    }
    assert schema["additionalProperties"] is False
    definitions = schema["$defs"]
    assert isinstance(definitions, dict)
    assert set(definitions) == {"Window"}
    window = definitions["Window"]
    assert isinstance(window, dict)
    assert window["properties"] == {"start": {"type": "integer"}, "stop": {"type": "integer"}}
    assert window["required"] == ["start", "stop"]
    assert window["additionalProperties"] is False


def test_schema_of_a_struct_without_forbid_unknown_fields_does_not_forbid_additional_properties() -> None:
    tool = create_tool(
        name="lenient", description="", parameters=LenientParameters, execute=ignore_parameters
    )

    assert tool.input_schema is not None
    assert "additionalProperties" not in tool.input_schema
    assert tool.input_schema["required"] == ["query"]


def test_schema_without_any_nested_struct_has_no_defs() -> None:
    schema = search_tool().input_schema

    assert schema is not None
    assert "$defs" not in schema


@pytest.mark.parametrize(
    "parameters",
    [
        pytest.param(dict[str, object], id="dict-alias"),
        pytest.param(dict, id="dict"),
        pytest.param(int, id="int"),
        pytest.param(DataclassParameters, id="dataclass"),
        pytest.param(SearchParameters | None, id="optional-struct"),
        pytest.param(list[SearchParameters], id="list-of-structs"),
    ],
)
def test_schema_stays_none_for_parameters_that_are_not_a_struct_type(parameters: object) -> None:
    tool = create_tool(
        name="untyped",
        description="",
        parameters=cast(type[object], parameters),
        execute=ignore_parameters,
    )

    assert tool.input_schema is None


def test_schema_for_parameters_is_the_schema_create_tool_generates() -> None:
    assert schema_for_parameters(SearchParameters) == search_tool().input_schema
    assert schema_for_parameters(ExcerptParameters) is not None
    assert schema_for_parameters(dict[str, object]) is None
    assert schema_for_parameters(SearchParameters(pattern="x")) is None


def test_explicit_input_schema_is_kept_instead_of_generated() -> None:
    explicit: dict[str, JsonValue] = {"type": "object", "properties": {"pattern": {"type": "string"}}}

    tool = create_tool(
        name="search",
        description="",
        parameters=SearchParameters,
        execute=search,
        input_schema=explicit,
    )

    assert tool.input_schema == {"type": "object", "properties": {"pattern": {"type": "string"}}}


def test_explicit_input_schema_is_kept_for_non_struct_parameters() -> None:
    tool = create_tool(
        name="anything",
        description="",
        parameters=dict[str, object],
        execute=ignore_parameters,
        input_schema={"type": "object", "additionalProperties": True},
    )

    assert tool.input_schema == {"type": "object", "additionalProperties": True}


# ------------------------------------------------------------------ argument validation


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a", id="one-letter"),
        pytest.param("read_file", id="underscore"),
        pytest.param("fs.read", id="dotted"),
        pytest.param("git-diff", id="dash"),
        pytest.param("Tool2", id="digits-and-capitals"),
        pytest.param("a" + "b" * 63, id="64-characters"),
    ],
)
def test_valid_tool_names_are_accepted(name: str) -> None:
    assert search_tool(name).name == name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("1tool", id="leading-digit"),
        pytest.param("_tool", id="leading-underscore"),
        pytest.param(".tool", id="leading-dot"),
        pytest.param("-tool", id="leading-dash"),
        pytest.param("a" + "b" * 64, id="65-characters"),
        pytest.param("read file", id="space"),
        pytest.param("read_file\n", id="trailing-newline"),
        pytest.param("fs/read", id="slash"),
        pytest.param("outil_\u00e9", id="non-ascii-letter"),
        pytest.param("\u00e9tape", id="leading-non-ascii-letter"),
    ],
)
def test_invalid_tool_names_raise_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        search_tool(name)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(None, id="none"),
        pytest.param(b"search", id="bytes"),
        pytest.param(7, id="int"),
    ],
)
def test_non_string_tool_names_raise_value_error(name: object) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        search_tool(cast(str, name))


def test_string_subclass_tool_name_is_refused() -> None:
    class Name(str):
        pass

    with pytest.raises(ValueError, match="invalid tool name"):
        search_tool(Name("search"))


def test_non_string_description_raises_type_error() -> None:
    description: object = None

    with pytest.raises(TypeError, match="description"):
        create_tool(
            name="search",
            description=cast(str, description),
            parameters=SearchParameters,
            execute=search,
        )


@pytest.mark.parametrize(
    "execute",
    [
        pytest.param(None, id="none"),
        pytest.param("search", id="string"),
        pytest.param({"call": search}, id="dict"),
    ],
)
def test_non_callable_execute_raises_type_error(execute: object) -> None:
    with pytest.raises(TypeError, match="execute"):
        create_tool(
            name="search",
            description="",
            parameters=SearchParameters,
            execute=cast(ToolExecute[SearchParameters], execute),
        )


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param("fs.read", id="string"),
        pytest.param(ToolPermissionIntent(action="fs.read"), id="intent-instead-of-function"),
        pytest.param(False, id="false"),
    ],
)
def test_non_callable_authorization_raises_type_error(authorization: object) -> None:
    with pytest.raises(TypeError, match="authorization"):
        create_tool(
            name="search",
            description="",
            parameters=SearchParameters,
            execute=search,
            authorization=cast(Callable[[SearchParameters], ToolPermissionIntent], authorization),
        )


@pytest.mark.parametrize(
    "input_schema",
    [
        pytest.param(MappingProxyType({"type": "object"}), id="mappingproxy"),
        pytest.param([("type", "object")], id="list-of-pairs"),
        pytest.param('{"type": "object"}', id="json-text"),
        pytest.param(SchemaDict(type="object"), id="dict-subclass"),
    ],
)
def test_input_schema_that_is_not_an_exact_dict_raises_type_error(input_schema: object) -> None:
    with pytest.raises(TypeError, match="input_schema"):
        create_tool(
            name="search",
            description="",
            parameters=SearchParameters,
            execute=search,
            input_schema=cast(dict[str, JsonValue], input_schema),
        )
