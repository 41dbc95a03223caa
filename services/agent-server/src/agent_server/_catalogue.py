"""The CLI's built-in tool catalogue (spec §5.2): ``echo``, ``read_file`` and the five
development tools (``fs.read``, ``fs.list``, ``fs.write``, ``process.exec``, ``git.diff``;
``dev`` names all five)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from agent_server._config import ToolProvider, ToolProviderContext
from harness_tools import (
    DEVELOPMENT_TOOL_NAMES,
    Tool,
    create_development_tools,
    create_echo_tool,
    create_read_file_tool,
    is_effect_tool,
)

__all__ = ["DEV_TOOLS", "EFFECT_TOOL_NAMES", "TOOL_CATALOGUE", "catalogue_provider", "expand_tool_names"]

DEV_TOOLS: Final = "dev"
"""The catalogue name that stands for the five development tools, in their order."""


def _development_tool(index: int) -> Callable[[ToolProviderContext], Tool[Any]]:
    return lambda context: create_development_tools(context.workspace)[index]


TOOL_CATALOGUE: Final[dict[str, Callable[[ToolProviderContext], Tool[Any]]]] = {
    "echo": lambda context: create_echo_tool(),
    "read_file": lambda context: create_read_file_tool(context.workspace),
    **{name: _development_tool(index) for index, name in enumerate(DEVELOPMENT_TOOL_NAMES)},
}

EFFECT_TOOL_NAMES: Final = frozenset(
    tool.name for tool in create_development_tools("/") if is_effect_tool(tool)
)
"""The catalogue tools that write or run commands: they need an isolated workspace."""


def expand_tool_names(names: Sequence[str]) -> tuple[str, ...]:
    """``--tools`` names with ``dev`` replaced by the five development tools."""
    expanded: list[str] = []
    for name in names:
        expanded.extend(DEVELOPMENT_TOOL_NAMES if name == DEV_TOOLS else (name,))
    return tuple(expanded)


def catalogue_provider(names: Sequence[str]) -> ToolProvider:
    """A provider building the named catalogue tools afresh for each session.

    Raises:
        ValueError: a name is not in the catalogue, or is given twice.
    """
    chosen = expand_tool_names(names)
    for name in chosen:
        if name not in TOOL_CATALOGUE:
            raise ValueError(f"unknown tool {name!r}; choose from {', '.join([*TOOL_CATALOGUE, DEV_TOOLS])}")
    if len(set(chosen)) != len(chosen):
        raise ValueError("a tool is named twice in --tools")

    def provide(context: ToolProviderContext) -> Iterable[Tool[Any]]:
        return [TOOL_CATALOGUE[name](context) for name in chosen]

    return provide
