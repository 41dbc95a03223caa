"""``echo``: a pure, fixed-response tool for tests and demos."""

from __future__ import annotations

from harness_tools._boundaries import PureBoundary, create_bounded_tool
from harness_tools._model import Tool, ToolExecutionContext, create_tool

__all__ = ["create_echo_tool"]


def create_echo_tool(name: str = "echo", fixed: str = "ok") -> Tool[dict[str, object]]:
    """Create a bounded **pure** tool that answers ``{"echo": fixed, "received": params}``.

    It accepts any JSON object, has no authorization step and never touches a workspace.

    Raises:
        ValueError: ``name`` is not a valid tool name.
    """

    async def echo(
        params: dict[str, object], context: ToolExecutionContext | None = None
    ) -> dict[str, object]:
        return {"echo": fixed, "received": params}

    tool = create_tool(
        name=name,
        description=f"Fixed-response test tool: {name}",
        parameters=dict[str, object],
        input_schema={"type": "object", "additionalProperties": True},
        execute=echo,
    )
    return create_bounded_tool(tool, PureBoundary())
