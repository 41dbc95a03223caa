"""The sandbox's copy: the shared credential deny list, ``.git/config`` scrubbed, a depth bound.

``copy_tree`` is called directly (no engine needed) and through ``SandboxWorkspace.create``
over the host test engine: the copy is made before any engine starts.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_helpers import HostTestEngine, git_repository

from harness_sandbox import DEFAULT_DENY, SANDBOX_SOURCE_INVALID, SandboxError, SandboxWorkspace
from harness_sandbox._copy import MAX_COPY_DEPTH, copy_tree, remove_tree, tree_bytes
from harness_workspace.credentials import CREDENTIAL_PATTERNS

SECRET = "FAKE-SECRET-0123456789"
# Names that used to reach the copy: in a denied directory, in another letter case, or
# not on the list at all.
MISSED_NAMES = (
    ".aws/credentials",
    ".aws/config",
    ".docker/config.json",
    "ID_RSA",
    "keys/Id_Ed25519",
    "service-account.json",
    "deploy/prod-service-account.json",
    "terraform.tfstate",
    "infra/terraform.tfstate.backup",
    ".ssh/config",
    ".ssh/known_hosts",
    ".kube/config",
    ".gnupg/pubring.kbx",
    ".config/gcloud/application_default_credentials.json",
    "SERVER.PEM",
    ".Env",
)


def _source(tmp_path: Path) -> Path:
    repo = git_repository(tmp_path / "src", {"README.md": "hello\n"})
    for name in MISSED_NAMES:
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(SECRET)
    (repo / ".git" / "credentials").write_text(f"https://u:{SECRET}@h.invalid\n")
    config = repo / ".git" / "config"
    config.write_text(
        config.read_text()
        + f'[url "https://tok:{SECRET}@github.invalid/"]\n\tinsteadOf = https://github.invalid/\n'
        + f'[remote "origin"]\n\turl = https://github.invalid/o/r.git\n\tpushurl = https://x:{SECRET}@h.invalid/r\n'
    )
    return repo


def _copied_text(copy: Path) -> str:
    texts: list[str] = []
    for directory, _, files in os.walk(copy):
        texts.extend(Path(directory, name).read_text(errors="replace") for name in files)
    return "\n".join(texts)


def test_the_copy_uses_the_shared_list() -> None:
    assert DEFAULT_DENY is CREDENTIAL_PATTERNS


def test_no_credential_the_old_list_missed_reaches_the_copy(tmp_path: Path) -> None:
    source = _source(tmp_path)
    report = copy_tree(str(source), str(tmp_path / "copy"), max_bytes=10_000_000, owner=None)
    copy = tmp_path / "copy"
    for name in MISSED_NAMES:
        assert not (copy / name).exists(), name
    assert not (copy / ".git" / "credentials").exists()
    assert SECRET not in _copied_text(copy)
    denied = {".aws", ".docker", ".ssh", ".kube", ".gnupg", ".config/gcloud", "ID_RSA", ".git/credentials"}
    assert denied <= set(report.skipped)
    config = (copy / ".git" / "config").read_text()
    assert '[url "https://github.invalid/"]\n\tinsteadOf = https://github.invalid/\n' in config
    assert "pushurl = https://h.invalid/r" in config
    assert (copy / "README.md").read_text() == "hello\n"


# Every configuration file git reads from a repository directory: a submodule's, a linked
# worktree's, the worktree extension, and a nested repository's (a vendored checkout).
OTHER_GIT_CONFIGS = (
    ".git/modules/vendor/lib/config",
    ".git/worktrees/feature/config.worktree",
    ".git/config.worktree",
    "vendor/lib/.git/config",
)


def test_every_git_configuration_in_the_tree_is_copied_without_credentials(tmp_path: Path) -> None:
    source = git_repository(tmp_path / "source", {"README.md": "hello\n"})
    for relative in OTHER_GIT_CONFIGS:
        target = source / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f'[remote "origin"]\n\turl = https://bot:{SECRET}@git.invalid/lib.git\n')
    report = copy_tree(str(source), str(tmp_path / "copy"), max_bytes=10_000_000, owner=None)
    for relative in OTHER_GIT_CONFIGS:
        copied = (tmp_path / "copy" / relative).read_text()
        assert copied == '[remote "origin"]\n\turl = https://git.invalid/lib.git\n', relative
    assert set(OTHER_GIT_CONFIGS) <= set(report.sanitized)


def _deep_tree(root: Path, depth: int) -> None:
    """``root/d/d/…/d/leaf`` ``depth`` directories deep, made relative to descriptors (past PATH_MAX)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(leaf, b"12345")
        os.close(leaf)
    finally:
        os.close(fd)


@pytest.mark.parametrize("depth", [600, pytest.param(5000, marks=pytest.mark.slow)])
def test_a_tree_too_deep_is_a_typed_error_and_nothing_is_left(tmp_path: Path, depth: int) -> None:
    source = tmp_path / "deep"
    _deep_tree(source, depth)
    with pytest.raises(SandboxError) as refused:
        copy_tree(str(source), str(tmp_path / "copy"), max_bytes=10_000_000, owner=None)
    assert refused.value.code == SANDBOX_SOURCE_INVALID
    assert f"deeper than {MAX_COPY_DEPTH} directories" in str(refused.value)
    assert not (tmp_path / "copy").exists()
    # Measuring and removing a tree (one a sandbox made, say) has no depth limit.
    assert tree_bytes(str(source)) == 5
    remove_tree(str(source))
    assert not source.exists()


def test_a_tree_at_the_depth_bound_is_copied(tmp_path: Path) -> None:
    source = tmp_path / "deep"
    _deep_tree(source, MAX_COPY_DEPTH)
    copy_tree(str(source), str(tmp_path / "copy"), max_bytes=10_000_000, owner=None)
    assert (tmp_path / "copy" / "/".join(["d"] * MAX_COPY_DEPTH) / "leaf").exists()
    _deep_tree(tmp_path / "deeper", MAX_COPY_DEPTH + 1)
    with pytest.raises(SandboxError):
        copy_tree(str(tmp_path / "deeper"), str(tmp_path / "copy2"), max_bytes=10_000_000, owner=None)
    remove_tree(str(tmp_path / "copy"))
    assert not (tmp_path / "copy").exists()


async def test_sandbox_creation_over_a_deep_tree_fails_typed_and_leaves_nothing(tmp_path: Path) -> None:
    source = tmp_path / "deep"
    await _in_thread(_deep_tree, source, 600)
    parent = tmp_path / "copies"
    parent.mkdir()
    with pytest.raises(SandboxError) as refused:
        await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, disk_ceiling=False)
    assert refused.value.code == SANDBOX_SOURCE_INVALID
    assert list(parent.iterdir()) == []
    await _in_thread(remove_tree, str(source))


async def test_a_sandbox_copy_withholds_nothing_it_wrote_itself_and_exports_no_denied_path(
    tmp_path: Path,
) -> None:
    source = _source(tmp_path)
    parent = tmp_path / "copies"
    parent.mkdir()
    engine = HostTestEngine()
    workspace = await SandboxWorkspace.create(source, engine=engine, parent=parent, disk_ceiling=False)
    try:
        # Its own files: its commands could read them anyway.
        await workspace.write_file(".env", "MINE=1\n")
        assert await workspace.read_file(".env") == "MINE=1\n"
        assert SECRET not in await workspace.read_file(".git/config")
        await workspace.write_file(".Env", "NOT EXPORTED\n")
        # A path the copy left out (.Env, .aws/…) is not the sandbox's to export, even rewritten.
        patch = await workspace.diff()
        assert "+MINE=1" in patch
        assert ".Env" not in patch
        assert ".aws" not in patch
        assert SECRET not in patch
    finally:
        await workspace.dispose()


async def _in_thread(function: object, *arguments: object) -> None:
    import trio  # noqa: PLC0415

    await trio.to_thread.run_sync(function, *arguments)  # pyright: ignore[reportArgumentType]
