"""``ToolRegistry``: unique names, insertion order, the tool objects themselves (spec §4.3)."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from harness_tools import (
    PureBoundary,
    Tool,
    ToolRegistry,
    WorkspaceBoundary,
    create_echo_tool,
    create_read_file_tool,
    get_tool_execution_boundary,
)


def names(registry: ToolRegistry) -> list[str]:
    return [tool.name for tool in registry.list()]


def test_empty_registry_has_no_tools() -> None:
    registry = ToolRegistry()

    assert len(registry) == 0
    assert registry.list() == []
    assert registry.get("echo") is None
    assert not registry.has("echo")


def test_add_returns_the_registry_so_calls_chain() -> None:
    registry = ToolRegistry()

    returned = registry.add(create_echo_tool("first")).add(create_echo_tool("second"))

    assert returned is registry
    assert names(registry) == ["first", "second"]


def test_constructor_adds_the_given_tools_in_order() -> None:
    tools = [create_echo_tool("charlie"), create_echo_tool("alpha"), create_echo_tool("bravo")]

    registry = ToolRegistry(tools)

    assert names(registry) == ["charlie", "alpha", "bravo"]
    assert len(registry) == 3


def test_constructor_accepts_any_iterable_of_tools() -> None:
    registry = ToolRegistry(create_echo_tool(name) for name in ("one", "two"))

    assert names(registry) == ["one", "two"]


def test_get_returns_the_stored_object_itself() -> None:
    echo = create_echo_tool()
    reader = create_read_file_tool("/srv/checkout")
    registry = ToolRegistry([echo, reader])

    assert registry.get("echo") is echo
    assert registry.get("read_file") is reader


def test_get_returns_none_for_an_unknown_name() -> None:
    registry = ToolRegistry([create_echo_tool()])

    assert registry.get("Echo") is None
    assert registry.get("read_file") is None
    assert registry.get("") is None


def test_has_reports_whether_a_name_is_registered() -> None:
    registry = ToolRegistry([create_echo_tool()])

    assert registry.has("echo")
    assert not registry.has("echo ")
    assert not registry.has("read_file")


def test_list_returns_the_tools_themselves_in_insertion_order() -> None:
    first = create_echo_tool("first")
    second = create_read_file_tool("/srv")
    third = create_echo_tool("third")
    registry = ToolRegistry([first]).add(second).add(third)

    listed = registry.list()

    assert len(listed) == 3
    assert all(tool is expected for tool, expected in zip(listed, [first, second, third], strict=True))


def test_list_returns_a_fresh_list_each_time() -> None:
    registry = ToolRegistry([create_echo_tool()])

    listed = registry.list()
    listed.clear()
    listed.append(create_echo_tool("intruder"))

    assert registry.list() is not listed
    assert names(registry) == ["echo"]
    assert not registry.has("intruder")
    assert len(registry) == 1


def test_registered_tools_keep_their_boundaries() -> None:
    registry = ToolRegistry([create_echo_tool(), create_read_file_tool("/srv/checkout")])

    echo = registry.get("echo")
    reader = registry.get("read_file")

    assert get_tool_execution_boundary(echo) == PureBoundary()
    assert get_tool_execution_boundary(reader) == WorkspaceBoundary(
        capability="read_file", root="/srv/checkout"
    )


def test_duplicate_name_is_refused_and_the_registry_is_unchanged() -> None:
    original = create_echo_tool("echo", fixed="first")
    registry = ToolRegistry([original, create_read_file_tool("/srv")])

    with pytest.raises(ValueError, match="duplicate tool name: echo") as caught:
        registry.add(create_echo_tool("echo", fixed="second"))

    assert str(caught.value) == "duplicate tool name: echo"
    assert names(registry) == ["echo", "read_file"]
    assert registry.get("echo") is original
    assert len(registry) == 2


def test_adding_the_same_tool_twice_is_a_duplicate() -> None:
    echo = create_echo_tool()
    registry = ToolRegistry([echo])

    with pytest.raises(ValueError, match="duplicate tool name: echo"):
        registry.add(echo)

    assert len(registry) == 1


def test_copy_of_a_registered_tool_is_a_duplicate_name() -> None:
    echo = create_echo_tool()
    registry = ToolRegistry([echo])

    with pytest.raises(ValueError, match="duplicate tool name: echo"):
        registry.add(copy.copy(echo))

    assert registry.get("echo") is echo


def test_constructor_refuses_duplicate_names() -> None:
    with pytest.raises(ValueError, match="duplicate tool name: read_file") as caught:
        ToolRegistry([create_read_file_tool("/a"), create_echo_tool(), create_read_file_tool("/b")])

    assert str(caught.value) == "duplicate tool name: read_file"


@pytest.mark.parametrize(
    "not_a_tool",
    [
        pytest.param(None, id="none"),
        pytest.param("echo", id="name"),
        pytest.param({"name": "echo"}, id="dict"),
        pytest.param(PureBoundary(), id="boundary"),
        pytest.param(create_echo_tool, id="tool-factory"),
    ],
)
def test_add_refuses_a_non_tool_and_leaves_the_registry_unchanged(not_a_tool: object) -> None:
    echo = create_echo_tool()
    registry = ToolRegistry([echo])

    with pytest.raises(TypeError):
        registry.add(cast(Tool[Any], not_a_tool))

    assert registry.list() == [echo]


def test_constructor_refuses_a_non_tool() -> None:
    items: list[object] = [create_echo_tool(), "read_file"]

    with pytest.raises(TypeError):
        ToolRegistry(cast(list[Tool[Any]], items))


def test_registries_do_not_share_state() -> None:
    first = ToolRegistry()
    second = ToolRegistry()

    first.add(create_echo_tool())

    assert len(first) == 1
    assert len(second) == 0
    assert not second.has("echo")
