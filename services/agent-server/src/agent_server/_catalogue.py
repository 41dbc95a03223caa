"""The CLI's built-in tool catalogue (spec §5.2): ``echo`` and ``read_file``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from agent_server._config import ToolProvider, ToolProviderContext
from harness_tools import Tool, create_echo_tool, create_read_file_tool

__all__ = ["TOOL_CATALOGUE", "catalogue_provider"]

TOOL_CATALOGUE: Final[dict[str, Callable[[ToolProviderContext], Tool[Any]]]] = {
    "echo": lambda context: create_echo_tool(),
    "read_file": lambda context: create_read_file_tool(context.workspace),
}


def catalogue_provider(names: Sequence[str]) -> ToolProvider:
    """A provider building the named catalogue tools afresh for each session.

    Raises:
        ValueError: a name is not in the catalogue, or is given twice.
    """
    chosen = tuple(names)
    for name in chosen:
        if name not in TOOL_CATALOGUE:
            raise ValueError(f"unknown tool {name!r}; choose from {', '.join(TOOL_CATALOGUE)}")
    if len(set(chosen)) != len(chosen):
        raise ValueError("a tool is named twice in --tools")

    def provide(context: ToolProviderContext) -> Iterable[Tool[Any]]:
        return [TOOL_CATALOGUE[name](context) for name in chosen]

    return provide
