"""Tool admission at ``session/new`` (spec §5.2): the boundary admission table of harness-tools.

The table itself (``harness_tools.admission_refusal``) decides; this module resolves boundary
roots on the host, refuses duplicates and builds the session's registry.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from agent_server._errors import InvalidParamsError
from harness_tools import Tool, ToolRegistry, admission_refusal

__all__ = ["admit_tools"]


def _resolved_root(root: str) -> str | None:
    real = os.path.realpath(root)
    return real if os.path.isdir(real) else None


def admit_tools(
    tools: Iterable[Tool[Any]],
    workspace: str,
    *,
    workspace_adapter: bool = False,
    effects_admitted: bool = False,
) -> ToolRegistry:
    """Admit every offered tool or refuse the whole session.

    Blocking (boundary roots are resolved on the host); the server calls it in a worker thread.

    Args:
        tools: The provider's tools; the same objects go into the registry.
        workspace: The session workspace's canonical path.
        workspace_adapter: Whether the session gets an operational workspace adapter over
            ``workspace``; only then are workspace tools rooted there admitted.
        effects_admitted: Whether that adapter is declared isolated (a sandbox on a shipped
            engine, or a local adapter with the operator's ``allow_host_effects``); only then
            are tools with ``write`` or ``execute`` access admitted.

    Raises:
        AcpError: ``-32602`` for a duplicate name or a refused tool.
    """
    admitted: list[Tool[Any]] = []
    names: set[str] = set()
    session_root = workspace if workspace_adapter else None
    for tool in tools:
        if tool.name in names:
            raise InvalidParamsError(f'tool "{tool.name}" is offered twice')
        names.add(tool.name)
        reason = admission_refusal(
            tool, session_root=session_root, resolve_root=_resolved_root, effects_admitted=effects_admitted
        )
        if reason is not None:
            message = f'tool "{tool.name}" is not safe for agent-server host execution: {reason}'
            raise InvalidParamsError(message)
        admitted.append(tool)
    return ToolRegistry(admitted)
