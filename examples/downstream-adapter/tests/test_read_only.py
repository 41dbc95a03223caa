"""The adapter, driven through the published contract's own dispatcher."""

from __future__ import annotations

import harness_workspace
import pytest
from harness_workspace import (
    WORKSPACE_OPERATION_UNSUPPORTED,
    Workspace,
    WorkspaceOperationUnsupportedError,
    bind_workspace,
    invoke_workspace_operation,
    restrict_workspace,
)

from downstream_adapter import ReadOnlyWorkspace

FILES = {"README.md": "hello\n", "src/app.py": "print('hi')\n", "src/lib/util.py": "X = 1\n"}


def test_the_installed_contract_is_the_pinned_one() -> None:
    assert harness_workspace.WORKSPACE_CONTRACT_VERSION == "0.8"
    assert harness_workspace.__version__.startswith("0.8.")


def test_it_is_a_workspace_statically_and_binds_at_run_time() -> None:
    adapter: Workspace = ReadOnlyWorkspace(FILES)  # pyright checks the protocol here
    bind_workspace(adapter)


async def test_reads_cross_the_dispatcher() -> None:
    workspace = bind_workspace(ReadOnlyWorkspace(FILES))
    text = await invoke_workspace_operation(workspace, {"operation": "read_file", "path": "src/app.py"})
    assert text == "print('hi')\n"
    listed = await invoke_workspace_operation(workspace, {"operation": "list_files", "path": "src"})
    assert listed == ["src/app.py", "src/lib/util.py"]
    assert await invoke_workspace_operation(workspace, {"operation": "diff"}) == ""
    snapshot = await invoke_workspace_operation(workspace, {"operation": "snapshot"})
    assert snapshot.id.startswith("ro-")
    assert snapshot.metadata is not None
    assert snapshot.metadata["files"] == 3


async def test_a_missing_file_is_file_not_found() -> None:
    with pytest.raises(FileNotFoundError):
        await invoke_workspace_operation(
            ReadOnlyWorkspace(FILES), {"operation": "read_file", "path": "nope.txt"}
        )


async def test_writes_are_refused_with_the_typed_error() -> None:
    adapter = ReadOnlyWorkspace(FILES)
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await invoke_workspace_operation(
            adapter, {"operation": "write_file", "path": "README.md", "contents": "changed"}
        )
    assert caught.value.code == WORKSPACE_OPERATION_UNSUPPORTED
    assert caught.value.operation == "write_file"
    assert await adapter.read_file("README.md") == "hello\n"


async def test_commands_are_refused_with_the_typed_error() -> None:
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await invoke_workspace_operation(
            ReadOnlyWorkspace(FILES), {"operation": "execute", "command": {"argv": ["ls"]}}
        )
    assert caught.value.operation == "execute"


async def test_a_restricted_view_offers_only_its_operation() -> None:
    view = restrict_workspace(ReadOnlyWorkspace(FILES), "read_file")
    assert await view.read_file("README.md") == "hello\n"
    with pytest.raises(WorkspaceOperationUnsupportedError):
        await view.list_files("")


async def test_everything_is_refused_after_dispose() -> None:
    adapter = ReadOnlyWorkspace(FILES)
    await invoke_workspace_operation(adapter, {"operation": "dispose"})
    with pytest.raises(WorkspaceOperationUnsupportedError, match="disposed"):
        await adapter.read_file("README.md")
    await adapter.dispose()  # idempotent
