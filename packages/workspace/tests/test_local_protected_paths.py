"""Protected paths of a host workspace: task manifests and ``.git`` are refused to writes, and
what a command changes there is put back and reported; ``read_committed_file`` reads a commit."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from workspace_git_repositories import commit_all, folder_state, git, init

from harness_workspace import CommandRequest
from harness_workspace.local import (
    PROTECTED_HOST_PATHS,
    WORKSPACE_DISPOSED,
    WORKSPACE_GIT_FAILED,
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_PATH_PROTECTED,
    WORKSPACE_PROTECTED_PATH_CHANGED,
    WORKSPACE_TOO_LARGE,
    LocalWorkspace,
    LocalWorkspaceError,
    read_committed_file,
)
from harness_workspace.local._protected import ProtectedPaths

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

MANIFEST = "id: x\n"
HOOK = "#!/bin/sh\necho pwned > PWNED\n"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = init(tmp_path / "repo")
    (root / "tasks").mkdir()
    (root / "tasks" / "x.yaml").write_text(MANIFEST)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    commit_all(root)
    return root


def protected_state(root: Path) -> dict[str, tuple[int, bytes]]:
    state = folder_state(root / "tasks")
    for name in ("config", "hooks", "info", "description"):
        path = root / ".git" / name
        if path.is_dir():
            state.update({f"{name}/{key}": value for key, value in folder_state(path).items()})
        elif path.exists():
            state[name] = (path.lstat().st_mode, path.read_bytes())
    state.pop("info/refs", None)  # written by ``git gc`` for dumb transports, and not guarded
    return state


async def shell(workspace: LocalWorkspace, script: str) -> None:
    result = await workspace.execute(CommandRequest(argv=("sh", "-c", script), timeout_ms=30_000))
    assert result.exit_code == 0, result


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/new-file",
        "tasks/x.yaml",
        "tasks/new.yaml",
        "./tasks/../tasks/x.yaml",
        "src/../.git/config",
        "src/.git",
        "src/.GIT/config",
        ".Git/hooks/post-checkout",
        "TASKS/x.yaml",
    ],
)
async def test_write_file_refuses_a_protected_path_and_changes_nothing(repository: Path, path: str) -> None:
    (repository / "src" / ".git").mkdir()
    before = folder_state(repository)
    workspace = LocalWorkspace(repository, protected_paths=PROTECTED_HOST_PATHS)
    try:
        with pytest.raises(LocalWorkspaceError) as refused:
            await workspace.write_file(path, "[core]\n\tfsmonitor = touch PWNED\n")
        assert refused.value.code == WORKSPACE_PATH_PROTECTED
        assert refused.value.operation == "write_file"
    finally:
        await workspace.dispose()
    assert folder_state(repository) == before


async def test_without_protected_paths_the_same_write_goes_through(repository: Path) -> None:
    workspace = LocalWorkspace(repository)
    try:
        await workspace.write_file(".git/hooks/pre-commit", HOOK)
    finally:
        await workspace.dispose()
    assert (repository / ".git" / "hooks" / "pre-commit").read_text() == HOOK


async def test_a_command_changing_hooks_config_and_manifests_is_undone_and_reported(repository: Path) -> None:
    (repository / ".git" / "hooks" / "kept").write_text("old\n")
    before = protected_state(repository)
    script = (
        "printf '#!/bin/sh\\n' > .git/hooks/x && chmod +x .git/hooks/x"
        " && echo 'id: y' > tasks/y.yaml && echo 'id: evil' > tasks/x.yaml"
        " && printf '[core]\\n\\tfsmonitor = touch PWNED\\n' >> .git/config"
        " && rm .git/hooks/kept && mkdir -p tasks/deep/er && echo z > tasks/deep/er/z"
        " && ln -s /etc/passwd .git/info/linked && chmod 700 tasks"
    )
    workspace = LocalWorkspace(repository, protected_paths=PROTECTED_HOST_PATHS)
    try:
        with pytest.raises(LocalWorkspaceError) as reported:
            await shell(workspace, script)
    finally:
        await workspace.dispose()
    assert reported.value.code == WORKSPACE_PROTECTED_PATH_CHANGED
    assert reported.value.operation == "execute"
    for path in (
        ".git/hooks/x",
        "tasks/y.yaml",
        "tasks/x.yaml",
        ".git/config",
        ".git/hooks/kept",
        "tasks/deep",
    ):
        assert path in reported.value.message
    assert protected_state(repository) == before
    assert (repository / "tasks").stat().st_mode & 0o777 == 0o755
    assert not (repository / "tasks" / "deep").exists()
    assert git(repository, "status", "--porcelain") == ""


async def test_git_commit_through_a_command_still_works_and_is_not_undone(repository: Path) -> None:
    (repository / "src" / "app.py").write_text("print('changed')\n")
    before = protected_state(repository)
    head = git(repository, "rev-parse", "HEAD").strip()
    workspace = LocalWorkspace(repository, protected_paths=PROTECTED_HOST_PATHS)
    try:
        await shell(
            workspace,
            "git -c user.name=t -c user.email=t@example.invalid commit -q -am change"
            " && git -c user.name=t -c user.email=t@example.invalid tag -a v1 -m v1"
            " && git checkout -q -b side && git gc -q",
        )
    finally:
        await workspace.dispose()
    assert git(repository, "rev-parse", "HEAD~1").strip() == head
    assert git(repository, "symbolic-ref", "HEAD").strip() == "refs/heads/side"
    assert git(repository, "status", "--porcelain") == ""
    assert git(repository, "fsck", "--no-progress") == ""
    assert protected_state(repository) == before


async def test_a_command_replacing_git_with_a_symlink_gets_the_guarded_files_back(
    repository: Path, tmp_path: Path
) -> None:
    hooks = repository / ".git" / "hooks"
    before = folder_state(hooks)
    workspace = LocalWorkspace(repository, protected_paths=PROTECTED_HOST_PATHS)
    try:
        with pytest.raises(LocalWorkspaceError) as reported:
            await shell(workspace, f"rm -rf .git/hooks && ln -s {tmp_path} .git/hooks")
    finally:
        await workspace.dispose()
    assert reported.value.code == WORKSPACE_PROTECTED_PATH_CHANGED
    assert not hooks.is_symlink()
    assert folder_state(hooks) == before


@pytest.mark.slow
async def test_a_tree_deeper_than_any_recursion_limit_made_by_a_command_is_removed(repository: Path) -> None:
    workspace = LocalWorkspace(repository, protected_paths=PROTECTED_HOST_PATHS)
    # 1100 levels, made in steps: one path of that depth is longer than PATH_MAX.
    script = "cd tasks && for i in $(seq 1100); do mkdir d && cd d || exit 1; done && touch leaf"
    try:
        with pytest.raises(LocalWorkspaceError) as reported:
            await shell(workspace, script)
    finally:
        await workspace.dispose()
    assert reported.value.code == WORKSPACE_PROTECTED_PATH_CHANGED
    assert sorted(os.listdir(repository / "tasks")) == ["x.yaml"]


@pytest.mark.slow
async def test_a_command_is_refused_before_it_runs_when_the_protected_files_are_too_many(
    repository: Path,
) -> None:
    runs = repository / "tasks" / "runs"
    runs.mkdir()
    for index in range(20_001):
        (runs / str(index)).touch()
    workspace = LocalWorkspace(repository, protected_paths=PROTECTED_HOST_PATHS)
    try:
        with pytest.raises(LocalWorkspaceError) as refused:
            await shell(workspace, "touch ran")
    finally:
        await workspace.dispose()
    assert refused.value.code == WORKSPACE_TOO_LARGE
    assert not (repository / "ran").exists()


async def test_an_unprotected_workspace_leaves_a_commands_changes_alone(repository: Path) -> None:
    workspace = LocalWorkspace(repository)
    try:
        await shell(workspace, "echo 'id: y' > tasks/y.yaml")
    finally:
        await workspace.dispose()
    assert (repository / "tasks" / "y.yaml").read_text() == "id: y\n"


@given(
    prefix=st.lists(st.sampled_from(["src", "a", "tasks", "x.git"]), max_size=3),
    spelling=st.sampled_from([".git", ".GIT", ".Git", ".gIt"]),
    suffix=st.lists(st.sampled_from(["config", "hooks", "b"]), max_size=3),
)
def test_a_git_folder_is_protected_at_any_depth_in_any_case(
    prefix: list[str], spelling: str, suffix: list[str]
) -> None:
    protected = ProtectedPaths(PROTECTED_HOST_PATHS)
    assert protected.covers((*prefix, spelling, *suffix))


@given(st.lists(st.sampled_from(["src", "task", "tasks.yaml", "git", "x.git", ".github", "b"]), min_size=1))
def test_paths_without_a_protected_name_are_not_covered(parts: list[str]) -> None:
    assert not ProtectedPaths(PROTECTED_HOST_PATHS).covers(tuple(parts))
    assert ProtectedPaths(PROTECTED_HOST_PATHS).covers(("tasks", *parts))


@pytest.mark.parametrize("entry", ["", "a/b", "**/", "**/a/b", "..", "."])
def test_a_protected_path_that_is_not_a_name_is_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="protected path"):
        LocalWorkspace("/", protected_paths=[entry])


def test_read_committed_file_reads_the_commit_never_the_work_tree(repository: Path) -> None:
    (repository / "tasks" / "x.yaml").write_text("id: edited\n")
    (repository / "tasks" / "new.yaml").write_text("id: new\n")
    assert read_committed_file(repository, "tasks/x.yaml") == MANIFEST.encode()
    first = git(repository, "rev-parse", "HEAD").strip()
    commit_all(repository, "second")
    assert read_committed_file(repository, "tasks/x.yaml") == b"id: edited\n"
    assert read_committed_file(repository, "tasks/x.yaml", revision=first) == MANIFEST.encode()
    assert read_committed_file(repository, "tasks/x.yaml", revision="main") == b"id: edited\n"
    assert read_committed_file(repository, "tasks/x.yaml", revision="refs/heads/main") == b"id: edited\n"
    with pytest.raises(LocalWorkspaceError) as missing:
        read_committed_file(repository, "tasks/new.yaml", revision=first)
    assert missing.value.code == WORKSPACE_NOT_FOUND
    with pytest.raises(LocalWorkspaceError) as no_branch:
        read_committed_file(repository, "tasks/x.yaml", revision="nope")
    assert no_branch.value.code == WORKSPACE_GIT_FAILED


def test_read_committed_file_refuses_what_is_not_a_regular_file_in_the_commit(repository: Path) -> None:
    (repository / "tasks" / "linked.yaml").symlink_to("x.yaml")
    commit_all(repository)
    for path in ("tasks/linked.yaml", "tasks", "tasks/x.yaml/below"):
        with pytest.raises(LocalWorkspaceError) as refused:
            read_committed_file(repository, path)
        assert refused.value.code in (WORKSPACE_NOT_A_FILE, WORKSPACE_NOT_FOUND), path
    with pytest.raises(LocalWorkspaceError) as too_large:
        read_committed_file(repository, "tasks/x.yaml", max_bytes=3)
    assert too_large.value.code == WORKSPACE_TOO_LARGE


async def test_a_command_killed_by_dispose_still_has_its_changes_put_back(repository: Path) -> None:
    workspace = LocalWorkspace(repository, protected_paths=PROTECTED_HOST_PATHS)
    hook = repository / ".git" / "hooks" / "post-checkout"
    request = CommandRequest(argv=("sh", "-c", f"echo x > {hook} && exec sleep 30"), timeout_ms=30_000)
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            with pytest.raises(LocalWorkspaceError) as stopped:
                await workspace.execute(request)
            assert stopped.value.code == WORKSPACE_DISPOSED

        nursery.start_soon(run)
        for _ in range(1000):  # the command writes its hook, then sleeps until killed
            if hook.exists():
                break
            await trio.sleep(0.01)
        assert hook.exists()
        await workspace.dispose()
    assert not hook.exists()
