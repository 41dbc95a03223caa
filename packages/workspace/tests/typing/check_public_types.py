"""Typed usage of the public surface, checked by pyright strict in CI (never executed).

Like msgspec's typing tests: if a public type stops being usable the way downstream code
uses it, pyright fails here before any user notices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_type

import trio

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    AbortController,
    AbortSignal,
    CommandRequest,
    CommandResult,
    JsonValue,
    MemoryWorkspace,
    Workspace,
    WorkspaceCapability,
    WorkspaceOperationError,
    WorkspacePathScope,
    WorkspaceSnapshot,
    bind_workspace,
    invoke_workspace_operation,
    move_on_abort,
    open_workspace,
    restrict_workspace,
)


class ThirdPartyAdapter:
    """A downstream adapter satisfies the protocol structurally, without inheriting."""

    async def read_file(self, path: str) -> str:
        return path

    async def write_file(self, path: str, contents: str) -> None:
        return None

    async def list_files(self, path: str) -> list[str]:
        return [path]

    async def execute(self, command: CommandRequest) -> CommandResult:
        return CommandResult(exit_code=0, stdout="", stderr="")

    async def diff(self) -> str:
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        return WorkspaceSnapshot(id="x", created_at="now", metadata={"nested": [1, 2.5, "a", None]})

    async def dispose(self) -> None:
        return None


async def typed_usage() -> None:
    adapter: Workspace = ThirdPartyAdapter()
    fake: Workspace = MemoryWorkspace({"a": "b"})
    facade = bind_workspace(adapter)
    assert_type(facade, Workspace)
    view = restrict_workspace(fake, "read_file")
    assert_type(await view.read_file("a"), str)

    assert_type(await invoke_workspace_operation(facade, {"operation": "read_file", "path": "a"}), str)
    assert_type(await invoke_workspace_operation(facade, {"operation": "list_files", "path": "."}), list[str])
    assert_type(
        await invoke_workspace_operation(facade, {"operation": "write_file", "path": "a", "contents": ""}),
        None,
    )
    assert_type(await invoke_workspace_operation(facade, {"operation": "diff"}), str)
    assert_type(await invoke_workspace_operation(facade, {"operation": "snapshot"}), WorkspaceSnapshot)
    assert_type(await invoke_workspace_operation(facade, {"operation": "dispose"}), None)

    controller = AbortController()
    result = await invoke_workspace_operation(
        facade,
        {"operation": "execute", "command": {"argv": ["make", "test"], "signal": controller.signal}},
    )
    assert_type(result, CommandResult)
    assert_type(result.exit_code, int | None)
    request = CommandRequest(argv=("ls",), timeout_ms=1_000)
    executed = await invoke_workspace_operation(facade, {"operation": "execute", "command": request})
    assert_type(executed, CommandResult)

    untyped: object = {"operation": "read_file", "path": "a"}
    assert_type(await invoke_workspace_operation(facade, untyped), object)

    signal = AbortSignal.any([controller.signal, AbortSignal.aborted_with("done")])
    assert_type(signal.aborted, bool)
    assert_type(signal.reason, object)
    with move_on_abort(signal) as scope:
        await signal.wait()
    assert_type(scope, trio.CancelScope)

    snapshot = await facade.snapshot()
    metadata = snapshot.metadata
    if metadata is not None:
        assert_type(metadata, Mapping[str, JsonValue])

    capability: WorkspaceCapability = WORKSPACE_CAPABILITIES[0]
    restrict_workspace(fake, capability)

    scope_of_paths = open_workspace("/srv/checkout")
    assert_type(scope_of_paths, WorkspacePathScope)
    assert_type(scope_of_paths.resolve_path("a"), str)

    try:
        await facade.read_file("a")
    except WorkspaceOperationError as error:
        assert_type(error.code, str)
        assert_type(error.operation, str | None)
