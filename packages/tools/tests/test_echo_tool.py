"""``echo``: the pure, fixed-response test tool (spec §4.5)."""

from __future__ import annotations

import pytest

from harness_tools import (
    PureBoundary,
    ToolExecutionContext,
    create_echo_tool,
    get_tool_execution_boundary,
    parse_tool_arguments,
)
from harness_workspace import MemoryWorkspace, restrict_workspace


def test_echo_tool_defaults_to_the_name_echo() -> None:
    tool = create_echo_tool()

    assert tool.name == "echo"
    assert tool.description == "Fixed-response test tool: echo"


def test_echo_tool_description_names_the_given_name() -> None:
    tool = create_echo_tool("ping")

    assert tool.name == "ping"
    assert tool.description == "Fixed-response test tool: ping"


def test_echo_tool_takes_any_json_object() -> None:
    tool = create_echo_tool()

    assert tool.parameters == dict[str, object]
    assert tool.input_schema == {"type": "object", "additionalProperties": True}
    assert tool.input_schema is not None
    assert tool.input_schema["additionalProperties"] is True


def test_echo_tool_has_no_authorization_step() -> None:
    assert create_echo_tool().authorization is None


def test_echo_tool_is_bounded_pure() -> None:
    boundary = get_tool_execution_boundary(create_echo_tool())

    assert boundary == PureBoundary()
    assert boundary is not None
    assert boundary.kind == "pure"


def test_each_echo_tool_is_a_distinct_bounded_object() -> None:
    first = create_echo_tool()
    second = create_echo_tool()

    assert first is not second
    assert first != second
    assert get_tool_execution_boundary(first) == PureBoundary()
    assert get_tool_execution_boundary(second) == PureBoundary()


async def test_echo_answers_the_fixed_value_and_the_received_params() -> None:
    tool = create_echo_tool()
    params: dict[str, object] = {"message": "hello", "count": 2, "nested": {"items": [1, None, True]}}

    out = await tool.execute(params, None)

    assert out == {
        "echo": "ok",
        "received": {"message": "hello", "count": 2, "nested": {"items": [1, None, True]}},
    }


async def test_echo_answers_a_custom_fixed_value() -> None:
    tool = create_echo_tool("ping", fixed="pong")

    assert await tool.execute({}, None) == {"echo": "pong", "received": {}}


async def test_echo_context_defaults_to_none() -> None:
    tool = create_echo_tool()

    assert await tool.execute({"a": 1}) == {"echo": "ok", "received": {"a": 1}}  # pyright: ignore[reportCallIssue]


async def test_echo_never_touches_a_workspace_in_its_context() -> None:
    adapter = MemoryWorkspace({"a.txt": "alpha"})
    tool = create_echo_tool()
    context = ToolExecutionContext(workspace=restrict_workspace(adapter, "read_file"))

    out = await tool.execute({"path": "a.txt"}, context)
    direct = await tool.execute({"path": "a.txt"}, ToolExecutionContext(workspace=adapter))

    assert out == direct == {"echo": "ok", "received": {"path": "a.txt"}}
    assert adapter.calls == []


async def test_echo_accepts_parsed_model_arguments() -> None:
    tool = create_echo_tool()
    params = parse_tool_arguments(tool, {"text": "hi", "values": [1, 2.5, None]})

    assert await tool.execute(params, None) == {
        "echo": "ok",
        "received": {"text": "hi", "values": [1, 2.5, None]},
    }


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("2echo", id="leading-digit"),
        pytest.param("echo tool", id="space"),
        pytest.param("e" * 65, id="too-long"),
    ],
)
def test_echo_tool_with_an_invalid_name_raises_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        create_echo_tool(name)
