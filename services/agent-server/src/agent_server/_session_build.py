"""Building an admitted session (spec §5.1, §5.2): its workspace, its manifest, its tools by the
boundary admission table of harness-tools, its workspace adapter.

The table itself (``harness_tools.admission_refusal``) decides; this module resolves boundary
roots on the host, refuses duplicates and builds the session's registry. ``session/new`` and
``session/continue`` build a session with the same functions (``agent_server._admission``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any, Final

import trio

from agent_server._config import ServerConfig, ToolProviderContext
from agent_server._conversation import Session
from agent_server._errors import InvalidParamsError, SandboxUnavailableError
from agent_server._manifests import read_task_manifest
from harness_exit_gate.manifest import TaskManifest
from harness_sandbox import SANDBOX_SOURCE_INVALID, SandboxError, SandboxWorkspace
from harness_tools import Tool, ToolRegistry, admission_refusal
from harness_workspace import WorkspaceEscapesRootError, declare_isolation, open_workspace
from harness_workspace.local import (
    PROTECTED_HOST_PATHS,
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_NOT_FOUND,
    LocalWorkspace,
    LocalWorkspaceError,
)

__all__ = ["admit_tools", "build_session", "load_manifest", "open_adapter", "resolve_workspace"]

_log: Final = logging.getLogger("agent_server")
_WORKSPACE_MISSING: Final = "workspace must exist inside the configured root"


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


def resolve_workspace(root: str, requested: str) -> str:
    """The canonical path of the existing directory ``requested`` names inside ``root``.

    Blocking; the server calls it in a worker thread.

    Raises:
        AcpError: ``-32602`` when it escapes the root, is missing, or is not a directory.
    """
    try:
        lexical = open_workspace(root).resolve_path(requested)
        real = os.path.realpath(lexical, strict=True)
    except (WorkspaceEscapesRootError, OSError, ValueError):
        raise InvalidParamsError(_WORKSPACE_MISSING) from None
    inside = real == root or real.startswith(root.rstrip(os.sep) + os.sep)
    if not inside or not os.path.isdir(real):
        raise InvalidParamsError(_WORKSPACE_MISSING)
    return real


async def open_adapter(config: ServerConfig, workspace: str) -> LocalWorkspace | SandboxWorkspace | None:
    """The session's own adapter (``workspace_adapter`` ``"local"`` or ``"sandbox"``), else ``None``.

    Raises:
        AcpError: ``-32602`` when the workspace vanished since it was resolved;
            ``-32017`` when the sandbox cannot be made (its engine is unavailable, the
            image is not pinned, the copy is over the disk limit …; the message says why).
        LocalWorkspaceError: any other failure to open a local adapter (answered ``-32603``).
    """
    if config.workspace.workspace_adapter is None:
        return None
    if config.workspace.workspace_adapter == "sandbox":
        assert config.workspace.sandbox_engine is not None
        try:
            return await SandboxWorkspace.create(
                workspace, engine=config.workspace.sandbox_engine, limits=config.limits.sandbox_limits
            )
        except SandboxError as error:
            if error.code == SANDBOX_SOURCE_INVALID:
                raise InvalidParamsError(_WORKSPACE_MISSING) from None
            _log.warning("session sandbox refused: %s (%s)", error.message, error.code)
            raise SandboxUnavailableError(f"{error.code}: {error.message}") from None
    try:
        # The constructor opens the directory: blocking, so in a worker thread. Task manifests
        # and .git are protected on the host whatever the session's policy says (spec §5.2).
        local = await trio.to_thread.run_sync(
            lambda: LocalWorkspace(workspace, protected_paths=PROTECTED_HOST_PATHS)
        )
    except LocalWorkspaceError as error:
        if error.code in (WORKSPACE_NOT_FOUND, WORKSPACE_NOT_A_DIRECTORY):
            raise InvalidParamsError(_WORKSPACE_MISSING) from None
        raise
    if config.workspace.allow_host_effects:
        # The operator's explicit, unsafe opt-in: writes and commands act on the host.
        declare_isolation(local, "unsafe-host")
    return local


def load_manifest(config: ServerConfig, workspace: str, task_id: str) -> TaskManifest:
    """The session's manifest from the configured trusted source (blocking; spec §5.1 step 4).

    Raises:
        AcpError: ``-32602`` (``ManifestRefusedError`` from the default reader).
    """
    if config.workspace.load_manifest is not None:
        return config.workspace.load_manifest(workspace, task_id)
    return read_task_manifest(
        workspace, task_id, tasks_dir=config.workspace.tasks_dir, task_base=config.workspace.task_base
    )


async def build_session(
    config: ServerConfig, session_id: str, workspace: str, model_name: str, task_id: str | None
) -> Session:
    """The session's manifest, admitted tools and adapter (steps 4 and 6 of §5.1).

    The adapter is opened last, before any row is created or taken, so a failure before it
    leaves nothing to dispose; whoever fails after it disposes it.
    """
    manifest = None
    if task_id is not None:
        manifest = await trio.to_thread.run_sync(load_manifest, config, workspace, task_id)
    context = ToolProviderContext(
        session_id=session_id, workspace=workspace, task_id=task_id, model=model_name
    )
    offered: list[Tool[Any]] = list(config.workspace.tools(context))
    local = config.workspace.workspace_adapter is not None
    # The same rule that makes the session's workspace declared isolated (open_adapter).
    isolated = config.workspace.effects_admitted
    tools = await trio.to_thread.run_sync(
        lambda: admit_tools(offered, workspace, workspace_adapter=local, effects_admitted=isolated)
    )
    return Session(
        id=session_id,
        workspace=workspace,
        model_name=model_name,
        task_id=task_id,
        manifest=manifest,
        tools=tools,
        adapter=await open_adapter(config, workspace),
    )
