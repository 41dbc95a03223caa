"""End-to-end ``execute``, ``diff`` and ``snapshot`` through ``LocalWorkspace`` (and the dispatcher)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from harness_workspace import CommandRequest, CommandResult, bind_workspace, invoke_workspace_operation
from harness_workspace.local import (
    WORKSPACE_DISPOSED,
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_PATH_INVALID,
    WORKSPACE_SYMLINK_REFUSED,
    LocalWorkspace,
    LocalWorkspaceError,
    ProcessLimits,
    ResolverChoice,
)

GIT = shutil.which("git")


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> ResolverChoice:
    return request.param


@pytest.fixture
async def workspace(tmp_path: Path, resolver: ResolverChoice) -> AsyncIterator[LocalWorkspace]:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "out").symlink_to(tmp_path / "outside")
    ws = LocalWorkspace(root, resolver=resolver, process_limits=ProcessLimits(kill_grace_ms=200))
    yield ws
    await ws.dispose()


async def test_execute_runs_in_the_resolved_working_directory(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    result = await workspace.execute(CommandRequest(argv=("pwd",), cwd="sub"))
    assert result.exit_code == 0
    assert result.stdout.strip() == str((tmp_path / "root" / "sub").resolve())
    result = await workspace.execute(CommandRequest(argv=("pwd",)))
    assert result.stdout.strip() == str((tmp_path / "root").resolve())


async def test_execute_through_the_dispatcher_returns_a_command_result(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    ws = bind_workspace(workspace)
    result = await invoke_workspace_operation(
        ws, {"operation": "execute", "command": {"argv": ["sh", "-c", "echo hi > made.txt; echo done"]}}
    )
    assert isinstance(result, CommandResult)
    assert result.stdout == "done\n"
    assert await invoke_workspace_operation(ws, {"operation": "read_file", "path": "made.txt"}) == "hi\n"


@pytest.mark.parametrize(
    ("cwd", "codes"),
    [
        ("..", {WORKSPACE_PATH_ESCAPES_ROOT}),
        ("/tmp", {WORKSPACE_PATH_INVALID}),
        ("out", {WORKSPACE_PATH_ESCAPES_ROOT}),
        ("sub/../../..", {WORKSPACE_PATH_ESCAPES_ROOT}),
        ("missing/../../x", {WORKSPACE_PATH_ESCAPES_ROOT}),
    ],
)
async def test_execute_refuses_a_working_directory_outside_the_root(
    tmp_path: Path, workspace: LocalWorkspace, cwd: str, codes: set[str]
) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.execute(CommandRequest(argv=("touch", "escaped"), cwd=cwd))
    assert caught.value.code in codes
    assert caught.value.operation == "execute"
    assert os.listdir(tmp_path / "outside") == []


async def test_execute_refuses_a_file_as_working_directory(tmp_path: Path, workspace: LocalWorkspace) -> None:
    (tmp_path / "root" / "file").write_text("x")
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.execute(CommandRequest(argv=("true",), cwd="file"))
    assert caught.value.code == WORKSPACE_NOT_A_DIRECTORY


async def test_execute_refuses_a_symlinked_working_directory_inside_the_root(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    # Both resolvers: the working directory is a path like any other, and links are refused.
    (tmp_path / "root" / "alias").symlink_to("sub")
    for cwd in ("alias", "alias/."):
        with pytest.raises(LocalWorkspaceError) as caught:
            await workspace.execute(CommandRequest(argv=("pwd",), cwd=cwd))
        assert caught.value.code == WORKSPACE_SYMLINK_REFUSED
        assert "'alias' is a symlink" in str(caught.value)


async def test_dispose_kills_running_commands(tmp_path: Path, workspace: LocalWorkspace) -> None:
    outcomes: list[object] = []

    async def run() -> None:
        try:
            outcomes.append(
                await workspace.execute(CommandRequest(argv=("sh", "-c", "echo $$ > pid; exec sleep 30")))
            )
        except LocalWorkspaceError as error:
            outcomes.append(error.code)

    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(5):
            # Polls a file that the child writes; there is no event to wait on.
            while not (tmp_path / "root" / "pid").exists() or not (tmp_path / "root" / "pid").read_text():  # noqa: ASYNC110
                await trio.sleep(0.01)
        await workspace.dispose()
    assert time.monotonic() - started < 5
    assert outcomes == [WORKSPACE_DISPOSED]
    pid = int((tmp_path / "root" / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def init_repository(root: Path) -> None:
    assert GIT is not None
    environment = {"PATH": os.environ.get("PATH", ""), "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (
        ["init", "-q"],
        [
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ):
        await trio.run_process(
            [GIT, *argv], cwd=root, env=environment, capture_stdout=True, capture_stderr=True
        )


@pytest.mark.skipif(GIT is None, reason="git is not installed")
async def test_diff_and_snapshot_see_changes_made_through_the_workspace(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    root = tmp_path / "root"
    (root / "tracked.txt").write_text("one\n")
    await init_repository(root)
    assert GIT is not None
    await trio.run_process([GIT, "add", "tracked.txt"], cwd=root, capture_stdout=True, capture_stderr=True)
    first = await workspace.snapshot()
    await workspace.write_file("tracked.txt", "two\n")
    diff = await invoke_workspace_operation(bind_workspace(workspace), {"operation": "diff"})
    assert "tracked.txt" in diff
    assert "+two" in diff
    second = await workspace.snapshot()
    assert first.id != second.id
