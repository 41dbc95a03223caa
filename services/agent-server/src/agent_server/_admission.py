"""Tool admission at ``session/new``: the M8 rule (spec §5.2)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from agent_server._errors import invalid_params
from harness_tools import (
    PureBoundary,
    SandboxBoundary,
    Tool,
    ToolRegistry,
    WorkspaceBoundary,
    get_tool_execution_boundary,
)

__all__ = ["WORKSPACE_ADAPTER_REQUIRED", "admit_tools"]

WORKSPACE_ADAPTER_REQUIRED = "an operational Workspace adapter is required; agent-server wiring arrives in M9"


def _refusal(tool: Tool[Any], workspace: str) -> str | None:
    """Why ``tool`` may not run in this session, or ``None`` when it is admitted."""
    boundary = get_tool_execution_boundary(tool)
    if boundary is None:
        return "no reviewed execution boundary"
    if type(boundary) is PureBoundary:
        return None
    if type(boundary) is WorkspaceBoundary:
        return WORKSPACE_ADAPTER_REQUIRED
    if type(boundary) is SandboxBoundary:
        root = os.path.realpath(boundary.root)
        if not os.path.isdir(root):
            return "sandbox workspace boundary does not exist"
        if root != workspace:
            return "sandbox workspace boundary does not match this session"
        return None
    return "unknown execution boundary"


def admit_tools(tools: Iterable[Tool[Any]], workspace: str) -> ToolRegistry:
    """Admit every offered tool or refuse the whole session.

    Blocking (a sandbox root is resolved on the host); the server calls it in a worker thread.

    Args:
        tools: The provider's tools; the same objects go into the registry.
        workspace: The session workspace's canonical path.

    Raises:
        AcpError: ``-32602`` for a duplicate name or a refused tool.
    """
    admitted: list[Tool[Any]] = []
    names: set[str] = set()
    for tool in tools:
        if tool.name in names:
            raise invalid_params(f'tool "{tool.name}" is offered twice')
        names.add(tool.name)
        reason = _refusal(tool, workspace)
        if reason is not None:
            raise invalid_params(f'tool "{tool.name}" is not safe for agent-server host execution: {reason}')
        admitted.append(tool)
    return ToolRegistry(admitted)
