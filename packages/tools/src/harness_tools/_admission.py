"""The one boundary admission table: what a host may do with a tool, by its reviewed boundary.

Every host consults this table and no other: the runtime (what it advertises, and rows 1-4 of
its decision table, kernel.md §8.3 and §8.7; ``run_agent``, kernel.md §9, runs on it), and the
agent server at ``session/new`` (agent-server.md §5.2).

- **pure**: always advertised; a call without a permission controller runs unpoliced, with
  one the controller decides; a server admits it.
- **workspace**: advertised when a workspace is injected; a call is refused without one
  (``workspace_required``) or without a controller (``permission_required``), else the
  controller decides; a server admits it only with a workspace adapter whose root is the
  boundary's root. A workspace tool whose boundary declares ``write`` or ``execute`` access
  (an *effect* tool) also needs the workspace to be declared isolated by trusted outer code
  (``harness_workspace.isolation_of``, issue #17): without that it is not advertised, a call
  is refused (``isolation_required``, code ``WORKSPACE_ISOLATION_REQUIRED``) before the
  controller is asked, and a server does not admit it. The declaration lives on the
  workspace object, never in data a model writes, so a model cannot forge it.
- **sandbox**: never advertised, every call refused (``reviewed_boundaries_only``), never
  admitted: no host runs sandbox-bound tools yet.
- **unreviewed** (no boundary): as sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from harness_tools._boundaries import (
    PureBoundary,
    SandboxBoundary,
    ToolExecutionBoundary,
    WorkspaceBoundary,
    get_tool_execution_boundary,
)
from harness_tools._model import Tool
from harness_workspace import WORKSPACE_ISOLATION_REQUIRED

__all__ = [
    "WORKSPACE_ADAPTER_REQUIRED",
    "CallRule",
    "ToolKind",
    "admission_refusal",
    "call_rule",
    "is_advertised",
    "is_effect_tool",
    "tool_kind",
]

ToolKind = Literal["pure", "workspace", "sandbox", "unreviewed"]
"""A tool's class in the admission table, from its reviewed boundary (or the lack of one)."""

_REVIEWED_ONLY: Final = "only reviewed pure or workspace tools may execute"
WORKSPACE_ADAPTER_REQUIRED: Final = (
    "an operational Workspace adapter is required; start the server with --workspace-adapter local or sandbox"
)
"""The server's refusal of a workspace tool without an adapter, word for word (agent-server.md §5.2)."""


def tool_kind(tool: Tool[Any]) -> ToolKind:
    """The admission-table class of ``tool``, read from its boundary by identity."""
    return _kind_of(get_tool_execution_boundary(tool))


def _kind_of(boundary: ToolExecutionBoundary | None) -> ToolKind:
    if type(boundary) is PureBoundary:
        return "pure"
    if type(boundary) is WorkspaceBoundary:
        return "workspace"
    if type(boundary) is SandboxBoundary:
        return "sandbox"
    return "unreviewed"


def is_effect_tool(tool: Tool[Any]) -> bool:
    """Whether ``tool`` is a workspace tool that writes or runs commands (``write``/``execute`` access)."""
    return _effectful(get_tool_execution_boundary(tool))


def _effectful(boundary: ToolExecutionBoundary | None) -> bool:
    return type(boundary) is WorkspaceBoundary and boundary.access != "read"


def is_advertised(
    tool: Tool[Any],
    *,
    workspace_injected: bool,
    effects_admitted: bool = False,
) -> bool:
    """Whether the model is shown ``tool``'s definition (a model may still name any tool).

    ``effects_admitted``: the injected workspace is declared isolated, so effect tools apply.
    """
    boundary = get_tool_execution_boundary(tool)
    kind = _kind_of(boundary)
    if kind == "workspace":
        return workspace_injected and (effects_admitted or not _effectful(boundary))
    return kind == "pure"


@dataclass(frozen=True, slots=True)
class CallRule:
    """How one call of a tool is treated before any policy is asked.

    Attributes:
        refusal: ``None``, or ``(rule, reason, code)`` for a call denied by the table itself:
            ``rule`` is the rule id's last part (hosts prefix it, ``runtime.`` or ``kernel.``),
            ``code`` the observation's error code.
        policed: Whether the permission controller decides (``False``: the call runs without
            one; only pure tools).
    """

    refusal: tuple[str, str, str] | None
    policed: bool


def call_rule(
    tool: Tool[Any],
    *,
    workspace_injected: bool,
    controller: bool,
    effects_admitted: bool = False,
) -> CallRule:
    """Rows 1-4 of the decision table (kernel.md §8.7) for ``tool`` in this host configuration.

    ``effects_admitted``: the injected workspace is declared isolated (row 1b).
    """
    boundary = get_tool_execution_boundary(tool)
    kind = _kind_of(boundary)
    if kind == "workspace":
        if not workspace_injected:
            reason = f"tool {tool.name} requires an injected workspace capability"
            return CallRule(("m8.workspace_required", reason, "WORKSPACE_OPERATION_REQUIRED"), policed=False)
        if _effectful(boundary) and not effects_admitted:
            assert type(boundary) is WorkspaceBoundary
            reason = (
                f"tool {tool.name} has {boundary.access} access and needs a workspace declared isolated;"
                " this workspace is not"
            )
            return CallRule(("isolation_required", reason, WORKSPACE_ISOLATION_REQUIRED), policed=False)
        if not controller:
            reason = "workspace effects require an injected permission controller"
            return CallRule(("m8.permission_required", reason, "TOOL_PERMISSION_REQUIRED"), policed=False)
        return CallRule(None, policed=True)
    if kind != "pure":
        return CallRule(("m8.reviewed_boundaries_only", _REVIEWED_ONLY, "TOOL_NOT_PURE"), policed=False)
    return CallRule(None, policed=controller)


def admission_refusal(
    tool: Tool[Any],
    *,
    session_root: str | None,
    resolve_root: Callable[[str], str | None],
    effects_admitted: bool = False,
) -> str | None:
    """Why a server may not offer ``tool`` in a session, or ``None`` when it may.

    Args:
        tool: The offered tool.
        session_root: The resolved root of the session's operational workspace adapter, or
            ``None`` without one.
        resolve_root: The host's resolution of a boundary root (``None`` when it does not
            exist); a workspace tool is admitted only when its root resolves to ``session_root``.
        effects_admitted: Whether the session's adapter is declared isolated (a sandbox), so
            that a tool with ``write`` or ``execute`` access may be admitted.

    Returns:
        ``None``, or the reason, as the server's refusal message states it (agent-server.md
        §5.2 pins the wording for a missing adapter).
    """
    boundary = get_tool_execution_boundary(tool)
    kind = _kind_of(boundary)
    if kind == "pure":
        return None
    if kind == "workspace":
        assert type(boundary) is WorkspaceBoundary
        if session_root is None:
            return WORKSPACE_ADAPTER_REQUIRED
        resolved = resolve_root(boundary.root)
        if resolved is None:
            return "workspace boundary does not exist"
        if resolved != session_root:
            return "workspace boundary does not match this session"
        if _effectful(boundary) and not effects_admitted:
            return f"a tool with {boundary.access} access needs an isolated workspace (a sandbox adapter)"
        return None
    if kind == "sandbox":
        return "sandbox-bound tools need a sandbox host, which this server does not have"
    return "no reviewed execution boundary"
