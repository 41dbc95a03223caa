"""``ToolRegistry``: the tools a runtime may advertise, by unique name, in insertion order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from harness_tools._model import Tool

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """An insertion-ordered set of tools with unique names.

    The registry stores the given objects themselves, so their execution boundaries (which
    are bound to object identity) stay attached. Duplicate names are refused because they
    would make the model's choice of tool ambiguous.

    Args:
        tools: Initial tools, added in order; a duplicate or a non-tool refuses them all.

    Raises:
        ValueError: two tools share a name.
        TypeError: an item is not a :class:`Tool`.
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool[Any]) -> ToolRegistry:
        """Add ``tool`` and return the registry; on error the registry is unchanged.

        Raises:
            ValueError: a tool with the same name is already registered.
            TypeError: ``tool`` is not a :class:`Tool`.
        """
        if type(tool) is not Tool:
            raise TypeError(f"ToolRegistry accepts Tool objects, got {type(tool).__name__}")
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name: {tool.name}")
        self._tools[tool.name] = tool
        return self

    def get(self, name: str) -> Tool[Any] | None:
        """Return the tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def has(self, name: str) -> bool:
        """Whether a tool called ``name`` is registered."""
        return name in self._tools

    def list(self) -> list[Tool[Any]]:
        """Return a fresh list of the tools in insertion order."""
        return list(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(list(self._tools.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"
