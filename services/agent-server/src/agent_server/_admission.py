"""Tool admission at ``session/new``: the M8 rule and its M9 opt-in (spec §5.2)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Final

from agent_server._errors import InvalidParamsError
from harness_tools import (
    PureBoundary,
    SandboxBoundary,
    Tool,
    ToolRegistry,
    WorkspaceBoundary,
    get_tool_execution_boundary,
)

__all__ = ["WORKSPACE_ADAPTER_REQUIRED", "admit_tools"]

WORKSPACE_ADAPTER_REQUIRED: Final = (
    "an operational Workspace adapter is required; agent-server wiring arrives in M9"
)


def _root_refusal(root: str, workspace: str, prefix: str) -> str | None:
    real = os.path.realpath(root)
    if not os.path.isdir(real):
        return f"{prefix}workspace boundary does not exist"
    if real != workspace:
        return f"{prefix}workspace boundary does not match this session"
    return None


def _refusal(tool: Tool[Any], workspace: str, *, workspace_adapter: bool) -> str | None:
    """Why ``tool`` may not run in this session, or ``None`` when it is admitted."""
    boundary = get_tool_execution_boundary(tool)
    if boundary is None:
        return "no reviewed execution boundary"
    if type(boundary) is PureBoundary:
        return None
    if type(boundary) is WorkspaceBoundary:
        if not workspace_adapter:
            return WORKSPACE_ADAPTER_REQUIRED
        # harness_tools only attaches read capabilities (read_file, list_files, diff, snapshot).
        return _root_refusal(boundary.root, workspace, "")
    if type(boundary) is SandboxBoundary:
        return _root_refusal(boundary.root, workspace, "sandbox ")
    return "unknown execution boundary"


def admit_tools(
    tools: Iterable[Tool[Any]], workspace: str, *, workspace_adapter: bool = False
) -> ToolRegistry:
    """Admit every offered tool or refuse the whole session.

    Blocking (sandbox and workspace roots are resolved on the host); the server calls it in a
    worker thread.

    Args:
        tools: The provider's tools; the same objects go into the registry.
        workspace: The session workspace's canonical path.
        workspace_adapter: Whether the session gets an operational workspace adapter over
            ``workspace``; only then are workspace-read tools rooted there admitted.

    Raises:
        AcpError: ``-32602`` for a duplicate name or a refused tool.
    """
    admitted: list[Tool[Any]] = []
    names: set[str] = set()
    for tool in tools:
        if tool.name in names:
            raise InvalidParamsError(f'tool "{tool.name}" is offered twice')
        names.add(tool.name)
        reason = _refusal(tool, workspace, workspace_adapter=workspace_adapter)
        if reason is not None:
            raise InvalidParamsError(
                f'tool "{tool.name}" is not safe for agent-server host execution: {reason}'
            )
        admitted.append(tool)
    return ToolRegistry(admitted)
