"""The local workspace's git helpers: diff and snapshot on real repositories, hostile ones included."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness_workspace import _local_git as local_git_module
from harness_workspace._local_errors import (
    WORKSPACE_GIT_UNAVAILABLE,
    WORKSPACE_NOT_A_REPOSITORY,
    WORKSPACE_OUTPUT_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace._local_git import git_diff, git_snapshot
from harness_workspace._local_process import ProcessLimits

LIMITS = ProcessLimits(default_timeout_ms=10_000, kill_grace_ms=200)
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# The test's own git runs isolated from the machine's configuration, with a fixed identity.
GIT_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}

OpenRoot = Callable[[Path], int]
"""Opens a directory as a descriptor that the fixture closes after the test."""


def git(repository: Path, *arguments: str) -> str:
    completed = subprocess.run(
        ["git", *arguments], cwd=repository, env=GIT_ENVIRONMENT, capture_output=True, text=True, check=True
    )
    return completed.stdout


def init(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    return path


def commit_all(repository: Path) -> str:
    git(repository, "add", "--all")
    git(repository, "commit", "--quiet", "--no-verify", "-m", "commit")
    return git(repository, "rev-parse", "HEAD").strip()


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A repository with one commit: ``a.txt`` and ``sub/b.txt``."""
    root = init(tmp_path / "repo")
    (root / "a.txt").write_text("one\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("bee\n")
    commit_all(root)
    return root


@pytest.fixture
def open_root() -> Iterator[OpenRoot]:
    """Open directories as descriptors, all closed after the test."""
    descriptors: list[int] = []

    def open_directory(path: Path) -> int:
        descriptors.append(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
        return descriptors[-1]

    yield open_directory
    for descriptor in descriptors:
        os.close(descriptor)


def work_tree_files(repository: Path) -> list[tuple[str, bytes]]:
    return sorted(
        (str(path.relative_to(repository)), path.read_bytes())
        for path in repository.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(repository).parts
    )


async def snapshot_id(root_fd: int) -> str:
    return (await git_snapshot(root_fd, limits=LIMITS)).id


async def refused(root_fd: int) -> list[LocalWorkspaceError]:
    errors: list[LocalWorkspaceError] = []
    for operation in (git_diff, git_snapshot):
        with pytest.raises(LocalWorkspaceError) as caught:
            await operation(root_fd, limits=LIMITS)
        errors.append(caught.value)
    return errors


# -- what counts as a repository ----------------------------------------------------


async def test_directory_without_git_is_not_a_repository(tmp_path: Path, open_root: OpenRoot) -> None:
    errors = await refused(open_root(tmp_path))

    assert [(error.code, error.operation) for error in errors] == [
        (WORKSPACE_NOT_A_REPOSITORY, "diff"),
        (WORKSPACE_NOT_A_REPOSITORY, "snapshot"),
    ]


async def test_directory_inside_a_repository_is_not_one_itself(repository: Path, open_root: OpenRoot) -> None:
    errors = await refused(open_root(repository / "sub"))

    assert {error.code for error in errors} == {WORKSPACE_NOT_A_REPOSITORY}


async def test_gitfile_pointing_elsewhere_is_refused(
    repository: Path, tmp_path: Path, open_root: OpenRoot
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / ".git").write_text(f"gitdir: {repository / '.git'}\n")

    errors = await refused(open_root(tmp_path / "elsewhere"))

    assert {error.code for error in errors} == {WORKSPACE_NOT_A_REPOSITORY}


async def test_broken_git_directory_is_not_a_repository(tmp_path: Path, open_root: OpenRoot) -> None:
    (tmp_path / ".git").mkdir()

    errors = await refused(open_root(tmp_path))

    assert {error.code for error in errors} == {WORKSPACE_NOT_A_REPOSITORY}


async def test_missing_git_is_reported_as_unavailable(
    repository: Path, open_root: OpenRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_git_module, "_GIT_PROGRAM", "harness-no-such-git")

    errors = await refused(open_root(repository))

    assert {error.code for error in errors} == {WORKSPACE_GIT_UNAVAILABLE}


# -- diff ---------------------------------------------------------------------------


async def test_empty_repository_has_an_empty_diff_and_the_empty_tree(
    tmp_path: Path, open_root: OpenRoot
) -> None:
    root_fd = open_root(init(tmp_path / "repo"))

    snapshot = await git_snapshot(root_fd, limits=LIMITS)

    assert await git_diff(root_fd, limits=LIMITS) == ""
    assert snapshot.id == f"git-tree-{EMPTY_TREE}"
    assert snapshot.metadata == {"adapter": "local", "head": None, "tree": EMPTY_TREE, "dirty": False}


async def test_before_the_first_commit_every_file_is_new(tmp_path: Path, open_root: OpenRoot) -> None:
    root = init(tmp_path / "repo")
    (root / "hello.txt").write_text("hello\n")
    root_fd = open_root(root)

    diff = await git_diff(root_fd, limits=LIMITS)
    snapshot = await git_snapshot(root_fd, limits=LIMITS)

    assert diff.startswith("diff --git a/hello.txt b/hello.txt\nnew file mode 100644\n")
    assert diff.endswith("--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+hello\n")
    assert snapshot.metadata is not None
    assert snapshot.metadata["head"] is None
    assert snapshot.metadata["dirty"] is True


async def test_clean_work_tree_has_an_empty_diff_and_head_tree(repository: Path, open_root: OpenRoot) -> None:
    root_fd = open_root(repository)

    snapshot = await git_snapshot(root_fd, limits=LIMITS)

    assert await git_diff(root_fd, limits=LIMITS) == ""
    tree = git(repository, "rev-parse", "HEAD^{tree}").strip()
    assert snapshot.id == f"git-tree-{tree}"
    assert snapshot.metadata == {
        "adapter": "local",
        "head": git(repository, "rev-parse", "HEAD").strip(),
        "tree": tree,
        "dirty": False,
    }


async def test_diff_shows_modified_deleted_and_untracked_files_but_not_ignored_ones(
    repository: Path, open_root: OpenRoot
) -> None:
    (repository / "a.txt").write_text("one\ntwo\n")
    (repository / "sub" / "b.txt").unlink()
    (repository / "new").mkdir()
    (repository / "new" / "c.txt").write_text("sea\n")
    (repository / ".gitignore").write_text("*.log\n")
    (repository / "noise.log").write_text("ignored\n")

    diff = await git_diff(open_root(repository), limits=LIMITS)

    headers = re.findall(r"^diff --git a/(\S+) b/", diff, flags=re.MULTILINE)
    assert headers == [".gitignore", "a.txt", "new/c.txt", "sub/b.txt"]
    assert "+two\n" in diff
    assert "deleted file mode 100644" in diff
    assert "+sea\n" in diff
    assert "noise.log" not in diff


async def test_diff_larger_than_the_cap_is_an_error_not_a_truncation(
    repository: Path, open_root: OpenRoot
) -> None:
    (repository / "big.txt").write_text("line\n" * 2000)

    with pytest.raises(LocalWorkspaceError) as caught:
        await git_diff(open_root(repository), limits=ProcessLimits(max_output_bytes=4096))

    assert caught.value.code == WORKSPACE_OUTPUT_TOO_LARGE
    assert caught.value.operation == "diff"


# -- snapshot -----------------------------------------------------------------------


async def test_same_content_gives_the_same_id_and_any_change_another(
    repository: Path, open_root: OpenRoot
) -> None:
    root_fd = open_root(repository)
    clean = await snapshot_id(root_fd)
    assert await snapshot_id(root_fd) == clean

    os.utime(repository / "a.txt", (0, 0))  # metadata only: same content
    assert await snapshot_id(root_fd) == clean

    (repository / "a.txt").write_text("changed\n")
    changed = await snapshot_id(root_fd)
    (repository / "a.txt").write_text("one\n")
    assert await snapshot_id(root_fd) == clean

    (repository / "untracked.txt").write_text("")
    untracked = await snapshot_id(root_fd)
    (repository / "untracked.txt").chmod(0o755)
    executable = await snapshot_id(root_fd)

    assert len({clean, changed, untracked, executable}) == 4


async def test_created_at_is_utc_iso8601_like_the_memory_workspace(
    repository: Path, open_root: OpenRoot
) -> None:
    snapshot = await git_snapshot(open_root(repository), limits=LIMITS)

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", snapshot.created_at)


async def test_repository_index_head_and_work_tree_are_never_modified(
    repository: Path, open_root: OpenRoot
) -> None:
    (repository / "a.txt").write_text("staged\n")
    git(repository, "add", "a.txt")
    (repository / "a.txt").write_text("staged, then changed again\n")
    (repository / "untracked.txt").write_text("u\n")
    status = git(repository, "status", "--porcelain")
    index = (repository / ".git" / "index").read_bytes()
    head = git(repository, "rev-parse", "HEAD")
    files = work_tree_files(repository)

    root_fd = open_root(repository)
    await git_diff(root_fd, limits=LIMITS)
    await git_snapshot(root_fd, limits=LIMITS)

    assert (repository / ".git" / "index").read_bytes() == index
    assert git(repository, "status", "--porcelain") == status
    assert git(repository, "rev-parse", "HEAD") == head
    assert work_tree_files(repository) == files


# -- hostile repositories -----------------------------------------------------------


async def test_hostile_configuration_and_hooks_run_no_program(
    repository: Path, tmp_path: Path, open_root: OpenRoot
) -> None:
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.sh"
    evil.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    evil.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in (hooks / "post-index-change", repository / ".git" / "hooks" / "post-index-change"):
        hook.write_text(f"#!/bin/sh\necho hook >> {marker}\n")
        hook.chmod(0o755)
    with (repository / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {evil}\n\thooksPath = {hooks}\n"
            f"[diff]\n\texternal = {evil}\n"
            f'[diff "evil"]\n\ttextconv = {evil}\n\tcommand = {evil}\n'
            f'[filter "evil"]\n\tclean = {evil}\n\tsmudge = {evil}\n\trequired = true\n'
            f'[filter "evil.process"]\n\tprocess = {evil}\n'
        )
    (repository / ".gitattributes").write_text("*.txt filter=evil diff=evil\n*.dat filter=evil.process\n")
    (repository / "a.txt").write_text("one\nmore\n")
    (repository / "x.dat").write_text("data\n")

    root_fd = open_root(repository)
    diff = await git_diff(root_fd, limits=LIMITS)
    first = await git_snapshot(root_fd, limits=LIMITS)
    second = await git_snapshot(root_fd, limits=LIMITS)

    assert not marker.exists()
    assert "+more\n" in diff
    assert first.id == second.id
    # The trap is live: plain git in the same repository does run it.
    git(repository, "diff")
    assert marker.exists()
