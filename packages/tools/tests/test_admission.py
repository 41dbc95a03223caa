"""The one boundary admission table: every host configuration, every kind."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest

from harness_tools import (
    WORKSPACE_ADAPTER_REQUIRED,
    CallRule,
    PureBoundary,
    SandboxBoundary,
    Tool,
    WorkspaceBoundary,
    admission_refusal,
    call_rule,
    create_bounded_tool,
    create_tool,
    is_advertised,
    is_effect_tool,
    tool_kind,
)


class _Nothing(msgspec.Struct, frozen=True):
    pass


async def _nothing(params: _Nothing, context: object = None) -> dict[str, object]:
    return {}


def _tool(kind: str) -> Tool[Any]:
    name = "workspace-tool" if kind in ("write", "execute") else f"{kind}-tool"
    bare = create_tool(name=name, description="d", parameters=_Nothing, execute=_nothing)
    boundaries: dict[str, object] = {
        "pure": PureBoundary(),
        "workspace": WorkspaceBoundary(capability="read_file", root="/srv/ws"),
        "write": WorkspaceBoundary(capability="write_file", access="write", root="/srv/ws"),
        "execute": WorkspaceBoundary(capability="execute", access="execute", root="/srv/ws"),
        "sandbox": SandboxBoundary(root="/srv/ws"),
    }
    return create_bounded_tool(bare, boundaries[kind]) if kind in boundaries else bare


# "write" and "execute" are workspace tools with that access: the effect tools.
KINDS = ("pure", "workspace", "write", "execute", "sandbox", "unreviewed")
EFFECTS = ("write", "execute")
WORKSPACE_REQUIRED = (
    "m8.workspace_required",
    "tool workspace-tool requires an injected workspace capability",
)
REVIEWED_ONLY = (
    "m8.reviewed_boundaries_only",
    "only reviewed pure or workspace tools may execute",
    "TOOL_NOT_PURE",
)


def _expected(kind: str, workspace: bool, controller: bool, isolated: bool) -> CallRule:
    """The table as the docstring states it, written out independently."""
    if kind in ("workspace", *EFFECTS):
        if not workspace:
            return CallRule((*WORKSPACE_REQUIRED, "WORKSPACE_OPERATION_REQUIRED"), policed=False)
        if kind in EFFECTS and not isolated:
            reason = (
                f"tool workspace-tool has {kind} access and needs a workspace declared isolated;"
                " this workspace is not"
            )
            return CallRule(("isolation_required", reason, "WORKSPACE_ISOLATION_REQUIRED"), policed=False)
        if not controller:
            reason = "workspace effects require an injected permission controller"
            return CallRule(("m8.permission_required", reason, "TOOL_PERMISSION_REQUIRED"), policed=False)
        return CallRule(None, policed=True)
    if kind == "pure":
        return CallRule(None, policed=controller)
    return CallRule(REVIEWED_ONLY, policed=False)


@pytest.mark.parametrize(
    ("kind", "workspace", "controller", "isolated"),
    list(itertools.product(KINDS, (False, True), (False, True), (False, True))),
)
def test_every_cell_of_the_call_table(kind: str, workspace: bool, controller: bool, isolated: bool) -> None:
    tool = _tool(kind)
    assert tool_kind(tool) == ("workspace" if kind in EFFECTS else kind)
    assert is_effect_tool(tool) == (kind in EFFECTS)
    rule = call_rule(
        tool,
        workspace_injected=workspace,
        controller=controller,
        effects_admitted=isolated,
    )
    assert rule == _expected(kind, workspace, controller, isolated)
    # A call runs only when the table refuses nothing; a workspace effect never runs unpoliced,
    # and a write or a command never runs on a workspace nobody declared isolated.
    if kind in ("workspace", *EFFECTS) and rule.refusal is None:
        assert rule.policed
    if kind in EFFECTS and rule.refusal is None:
        assert isolated


def test_isolation_is_checked_after_the_workspace_and_before_the_controller() -> None:
    no_workspace = call_rule(_tool("execute"), workspace_injected=False, controller=False)
    assert no_workspace.refusal is not None
    assert no_workspace.refusal[2] == "WORKSPACE_OPERATION_REQUIRED"
    not_isolated = call_rule(_tool("execute"), workspace_injected=True, controller=False)
    assert not_isolated.refusal is not None
    assert not_isolated.refusal[2] == "WORKSPACE_ISOLATION_REQUIRED"


@pytest.mark.parametrize(
    ("kind", "workspace", "isolated"), list(itertools.product(KINDS, (False, True), (False, True)))
)
def test_the_runtime_advertises_what_this_workspace_can_run(
    kind: str, workspace: bool, isolated: bool
) -> None:
    tool = _tool(kind)
    shown = is_advertised(tool, workspace_injected=workspace, effects_admitted=isolated)
    assert shown == (
        kind == "pure" or (kind == "workspace" and workspace) or (kind in EFFECTS and workspace and isolated)
    )


def test_the_server_admits_pure_tools_and_workspace_tools_rooted_at_its_adapter() -> None:
    roots = {"/srv/ws": "/real/ws", "/srv/other": "/real/other"}

    def resolve(root: str) -> str | None:
        return roots.get(root)

    def refusal(tool: Tool[Any], session_root: str | None) -> str | None:
        return admission_refusal(tool, session_root=session_root, resolve_root=resolve)

    assert refusal(_tool("pure"), None) is None
    assert refusal(_tool("workspace"), None) == WORKSPACE_ADAPTER_REQUIRED
    assert refusal(_tool("workspace"), "/real/ws") is None
    assert refusal(_tool("workspace"), "/real/other") == "workspace boundary does not match this session"
    gone = create_bounded_tool(
        create_tool(name="gone", description="d", parameters=_Nothing, execute=_nothing),
        WorkspaceBoundary(capability="read_file", root="/srv/gone"),
    )
    assert refusal(gone, "/real/ws") == "workspace boundary does not exist"
    for effect in EFFECTS:
        assert refusal(_tool(effect), None) == WORKSPACE_ADAPTER_REQUIRED
        assert refusal(_tool(effect), "/real/ws") == (
            f"a tool with {effect} access needs an isolated workspace (a sandbox adapter)"
        )
        isolated = admission_refusal(
            _tool(effect), session_root="/real/ws", resolve_root=resolve, effects_admitted=True
        )
        assert isolated is None
        elsewhere = admission_refusal(
            _tool(effect), session_root="/real/other", resolve_root=resolve, effects_admitted=True
        )
        assert elsewhere == "workspace boundary does not match this session"
    for session_root in (None, "/real/ws"):
        assert refusal(_tool("sandbox"), session_root) == (
            "sandbox-bound tools need a sandbox host, which this server does not have"
        )
        assert refusal(_tool("unreviewed"), session_root) == "no reviewed execution boundary"


def test_a_copy_of_a_bounded_tool_is_unreviewed() -> None:
    """The boundary binds to the tool's identity: an equal-looking copy has none."""
    tool = _tool("pure")
    copy = msgspec.structs.replace(tool)
    assert tool_kind(copy) == "unreviewed"
    assert call_rule(copy, workspace_injected=True, controller=True).refusal == REVIEWED_ONLY
