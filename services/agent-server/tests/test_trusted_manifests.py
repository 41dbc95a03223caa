"""A session's policy comes from where the model cannot write (spec §5.1 step 4, §5.2).

The task manifest is read from the workspace repository's trusted base commit (or the
operator's tasks folder), never from the working tree; on a host workspace ``tasks/**`` and
``.git/**`` are protected paths whatever the manifest's globs say.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sandbox_helpers import git_repository

from agent_server import ServerConfig, WorkspaceConfig
from agent_server._catalogue import catalogue_provider
from agent_server._cli import _parser as parser  # pyright: ignore[reportPrivateUsage]
from agent_server._cli import build_config
from agent_server.client import AcpClient, AcpClientError, JsonObject
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall

if TYPE_CHECKING:
    from conftest import ServerFactory

TASK = "locked-0001"


def manifest(task_id: str, *, exec_rule: str) -> str:
    """A manifest that lets the model write any file (globs say ``*``) and runs commands by ``exec_rule``."""
    return "\n".join(
        [
            f"id: {task_id}",
            "title: A task whose commands are refused",
            "goal: Prove the policy cannot be widened from inside the workspace.",
            "acceptance:",
            "  - the session keeps the trusted policy",
            "allowed_paths:",
            '  - "src/**"',
            "permissions:",
            "  fs.write:",
            '    "*": allow',
            "  process.exec:",
            f'    "*": {exec_rule}',
            "delivery:",
            "  type: none",
            "",
        ]
    )


TRUSTED = manifest(TASK, exec_rule="deny")
WIDENED = manifest(TASK, exec_rule="allow")
HOOK = "#!/bin/sh\ntouch PWNED\n"
FSMONITOR = "[core]\n\tfsmonitor = touch PWNED\n"


def scripts(*turns: list[ScriptedTurn]) -> Callable[[], FakeModel]:
    """One scripted model per session, in order."""
    pending = list(turns)
    return lambda: FakeModel(pending.pop(0))


def call(index: int, name: str, arguments: dict[str, Any]) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ToolCall(f"call-{index}", name, arguments)])


def tool_results(notes: list[JsonObject]) -> list[JsonObject]:
    events = [note["params"]["event"] for note in notes]
    return [event["data"] for event in events if event["type"] == "tool.result"]


@pytest.fixture
def repository(running: ServerFactory) -> Path:
    shutil.rmtree(running.workspace)
    return git_repository(running.workspace, {"src/app.py": "print('hi')\n", f"tasks/{TASK}.yaml": TRUSTED})


async def session(client: AcpClient, task_id: str = TASK) -> str:
    return (await client.request("session/new", {"workspace": "ws", "taskId": task_id}))["sessionId"]


async def refusal(client: AcpClient, task_id: str = TASK) -> AcpClientError:
    with pytest.raises(AcpClientError) as refused:
        await session(client, task_id)
    assert refused.value.code == -32602
    assert refused.value.data_code == "ACP_INVALID_PARAMS"
    return refused.value


def host_options(model: Callable[[], FakeModel]) -> dict[str, Any]:
    return {
        "models": {"fake-model/v1": model},
        "tools": catalogue_provider(["fs.write", "process.exec"]),
        "workspace_adapter": "local",
        "allow_host_effects": True,
    }


async def test_a_model_cannot_widen_the_next_sessions_policy_by_writing_the_manifest(
    running: ServerFactory, repository: Path
) -> None:
    widen = [
        call(0, "fs.write", {"path": f"tasks/{TASK}.yaml", "contents": WIDENED}),
        call(1, "fs.write", {"path": ".git/config", "contents": FSMONITOR}),
        call(2, "fs.write", {"path": ".git/hooks/pre-commit", "contents": HOOK}),
        ScriptedTurn(content="widened"),
    ]
    run = [call(0, "process.exec", {"argv": ["touch", "PWNED"]}), ScriptedTurn(content="ran")]
    async with running(**host_options(scripts(widen, run))) as handle, handle.connect() as client:
        await client.initialize()
        widened, widen_notes = await client.prompt(await session(client), "widen your permissions")
        ran, run_notes = await client.prompt(await session(client), "run a command")
    # The next session of the task kept the trusted policy: its command was denied, never run.
    assert not (repository / "PWNED").exists()
    (executed,) = tool_results(run_notes)
    assert (executed["ok"], executed["error"]["code"]) == (False, "TOOL_POLICY_DENIED")
    assert ran["status"] == "completed"
    # The writes were refused by the host workspace, whatever the manifest's globs said.
    assert (repository / "tasks" / f"{TASK}.yaml").read_text() == TRUSTED
    assert not (repository / ".git" / "hooks" / "pre-commit").exists()
    assert "fsmonitor" not in (repository / ".git" / "config").read_text()
    writes = tool_results(widen_notes)
    assert [(write["ok"], write["error"]["code"]) for write in writes] == [
        (False, "WORKSPACE_PATH_PROTECTED")
    ] * 3
    assert widened["status"] == "completed"


async def test_a_command_changing_protected_paths_is_undone_and_reported_and_git_commit_works(
    running: ServerFactory, repository: Path
) -> None:
    allowed = manifest("exec-0001", exec_rule="allow")
    (repository / "tasks" / "exec-0001.yaml").write_text(allowed)
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "a task that may run commands")
    identity = "git -c user.name=t -c user.email=t@example.invalid"
    commands = [
        call(
            0, "process.exec", {"argv": ["sh", "-c", "echo x > .git/hooks/x && echo 'id: y' > tasks/y.yaml"]}
        ),
        call(
            1,
            "process.exec",
            {"argv": ["sh", "-c", f"echo changed > src/app.py && {identity} commit -qam c"]},
        ),
        ScriptedTurn(content="done"),
    ]
    async with running(**host_options(scripts(commands))) as handle, handle.connect() as client:
        await client.initialize()
        result, notes = await client.prompt(await session(client, "exec-0001"), "change things")
    assert result["status"] == "completed"
    guarded, committed = tool_results(notes)
    assert guarded["ok"] is False
    assert guarded["error"]["code"] == "WORKSPACE_PROTECTED_PATH_CHANGED"
    assert ".git/hooks/x" in guarded["error"]["message"]
    assert "tasks/y.yaml" in guarded["error"]["message"]
    assert not (repository / ".git" / "hooks" / "x").exists()
    assert not (repository / "tasks" / "y.yaml").exists()
    assert committed["ok"] is True, committed
    assert git(repository, "log", "-1", "--format=%s") == "c\n"
    assert git(repository, "status", "--porcelain") == ""


async def test_a_manifest_only_in_the_working_tree_is_refused(
    running: ServerFactory, repository: Path
) -> None:
    (repository / "tasks" / "shipped-0001.yaml").write_text(manifest("shipped-0001", exec_rule="allow"))
    async with running() as handle, handle.connect() as client:
        await client.initialize()
        refused = await refusal(client, "shipped-0001")
        assert refused.message.startswith("MANIFEST_NOT_COMMITTED: tasks/shipped-0001.yaml exists only")
        assert await session(client)  # the committed one loads


async def test_a_manifest_modified_or_deleted_in_the_working_tree_is_refused(
    running: ServerFactory, repository: Path
) -> None:
    path = repository / "tasks" / f"{TASK}.yaml"
    async with running() as handle, handle.connect() as client:
        await client.initialize()
        path.write_text(WIDENED)
        assert (await refusal(client)).message.startswith("MANIFEST_MODIFIED: ")
        path.unlink()
        assert (await refusal(client)).message.startswith("MANIFEST_MODIFIED: ")
        path.symlink_to(repository / "src" / "app.py")
        assert (await refusal(client)).message.startswith("MANIFEST_MODIFIED: ")


async def test_a_commit_behind_the_working_trees_back_is_refused(
    running: ServerFactory, repository: Path
) -> None:
    # What a command can do without touching tasks/: write a blob and commit it through the index.
    blob = git(repository, "hash-object", "-w", "--stdin", stdin=WIDENED).strip()
    git(repository, "update-index", "--cacheinfo", f"100644,{blob},tasks/{TASK}.yaml")
    git(repository, "commit", "-q", "-m", "widen")
    async with running() as handle, handle.connect() as client:
        await client.initialize()
        assert (await refusal(client)).message.startswith("MANIFEST_MODIFIED: ")


async def test_a_workspace_that_is_not_a_repository_has_no_trusted_manifest(running: ServerFactory) -> None:
    (running.workspace / "tasks").mkdir()
    (running.workspace / "tasks" / f"{TASK}.yaml").write_text(TRUSTED)
    async with running() as handle, handle.connect() as client:
        await client.initialize()
        for task_id in (TASK, "missing-0001"):
            refused = await refusal(client, task_id)
            assert refused.message.startswith("MANIFEST_BASE_UNAVAILABLE: "), task_id
            assert "WORKSPACE_NOT_A_REPOSITORY" in refused.message


async def test_the_task_base_names_the_commit_manifests_come_from(
    running: ServerFactory, repository: Path
) -> None:
    base = git(repository, "rev-parse", "HEAD").strip()
    (repository / "tasks" / "later-0001.yaml").write_text(manifest("later-0001", exec_rule="deny"))
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "later")
    async with running(task_base=base) as handle, handle.connect() as client:
        await client.initialize()
        assert await session(client)
        assert (await refusal(client, "later-0001")).message.startswith("MANIFEST_NOT_COMMITTED: ")
    async with running(task_base="no-such-branch") as handle, handle.connect() as client:
        await client.initialize()
        assert (await refusal(client)).message.startswith("MANIFEST_BASE_UNAVAILABLE: ")


async def test_an_operator_tasks_folder_is_the_only_source_when_configured(
    running: ServerFactory, repository: Path, tmp_path: Path
) -> None:
    tasks = tmp_path / "operator-tasks"
    tasks.mkdir()
    (tasks / "operator-0001.yaml").write_text(manifest("operator-0001", exec_rule="deny"))
    (tasks / "other-0001.yaml").write_text(manifest("another-id", exec_rule="deny"))
    (tasks / "broken-0001.yaml").write_text("id: [unclosed\n")
    (tasks / "linked-0001.yaml").symlink_to(tasks / "operator-0001.yaml")
    async with running(tasks_dir=str(tasks)) as handle, handle.connect() as client:
        await client.initialize()
        assert await session(client, "operator-0001")
        # The workspace's committed manifest is not a source any more.
        assert (await refusal(client)).message.startswith("MANIFEST_MISSING: ")
        assert (await refusal(client, "linked-0001")).message.startswith("MANIFEST_MISSING: ")
        assert (await refusal(client, "other-0001")).message.startswith("MANIFEST_ID_MISMATCH: ")
        assert (await refusal(client, "broken-0001")).message.startswith("MANIFEST_INVALID: ")


def test_a_tasks_folder_inside_the_workspace_root_or_missing_is_refused_at_start_up(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    with pytest.raises(ValueError, match="outside the workspace root"):
        ServerConfig(
            workspace=WorkspaceConfig(workspace_root=str(tmp_path), tasks_dir=str(tmp_path / "tasks"))
        ).check_serving()
    with pytest.raises(ValueError, match="must be an existing directory"):
        ServerConfig(
            workspace=WorkspaceConfig(workspace_root=str(tmp_path), tasks_dir=str(tmp_path / "missing"))
        ).check_serving()
    for base in ("", "-c", "a\x00b"):
        with pytest.raises(ValueError, match="task_base"):
            ServerConfig(workspace=WorkspaceConfig(task_base=base))


def git(repository: Path, *arguments: str, stdin: str | None = None) -> str:
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(repository), "GIT_CONFIG_NOSYSTEM": "1"}
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    identity |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    completed = subprocess.run(
        ["git", *arguments],
        cwd=repository,
        env=environment | identity,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout


def test_serve_flags_name_the_manifest_source(tmp_path: Path) -> None:
    root, tasks = tmp_path / "root", tmp_path / "tasks"
    root.mkdir()
    tasks.mkdir()

    def config(*flags: str) -> ServerConfig:
        arguments = parser().parse_args(["serve", "--no-db", "--workspace-root", str(root), *flags])
        return build_config(arguments, {})

    default = config()
    assert (default.workspace.tasks_dir, default.workspace.task_base, default.workspace.load_manifest) == (
        None,
        "HEAD",
        None,
    )
    chosen = config("--tasks-dir", str(tasks), "--task-base", "refs/heads/main")
    assert (chosen.workspace.tasks_dir, chosen.workspace.task_base) == (str(tasks), "refs/heads/main")
    with pytest.raises(ValueError, match="outside the workspace root"):
        config("--tasks-dir", str(root))
