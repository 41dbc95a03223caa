"""Real git repositories for the tests of the local workspace's git reader.

The tests build repositories with the real ``git`` binary, isolated from the machine's
configuration, then read them with ``LocalWorkspace``; real git, run on a *clean copy*
(no repository configuration), is the reference for patches and tree ids.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness_workspace import WorkspaceSnapshot
from harness_workspace.local import LocalWorkspace

GIT_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/nonexistent",
    "LANG": "C.UTF-8",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}
EMPTY_TREE = {
    "sha1": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "sha256": "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}


def git(repository: Path, *arguments: str, stdin: bytes | None = None) -> str:
    """Run real git in ``repository`` and return its output; any failure raises."""
    completed = subprocess.run(
        ["git", *arguments], cwd=repository, env=GIT_ENVIRONMENT, capture_output=True, input=stdin, check=True
    )
    return completed.stdout.decode("utf-8", "surrogateescape")


def init(path: Path, object_format: str = "sha1") -> Path:
    """Create a repository at ``path`` (branch ``main``)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", "--initial-branch=main", f"--object-format={object_format}")
    return path


def commit_all(repository: Path, message: str = "commit") -> str:
    """Commit everything in the work tree and return the commit id."""
    git(repository, "add", "--all")
    git(repository, "commit", "--quiet", "--no-verify", "--allow-empty", "-m", message)
    return git(repository, "rev-parse", "HEAD").strip()


def clean_copy(repository: Path, destination: Path) -> Path:
    """Copy a repository without its configuration beyond the format, for reference runs of git."""
    shutil.copytree(repository, destination, symlinks=True)
    object_format = (
        "sha256" if "sha256" in (repository / ".git" / "config").read_text(errors="replace") else "sha1"
    )
    config = "[core]\n\trepositoryformatversion = 0\n"
    if object_format == "sha256":
        config = "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n"
    (destination / ".git" / "config").write_text(config)
    for attributes in destination.rglob(".gitattributes"):
        attributes.unlink()
    return destination


def reference_diff(repository: Path, scratch: Path) -> str:
    """What real git shows, on a clean copy: the whole work tree staged, against HEAD."""
    copy = clean_copy(repository, scratch)
    git(copy, "add", "--all")
    head = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", "HEAD"],
        cwd=copy,
        env=GIT_ENVIRONMENT,
        capture_output=True,
        check=False,
    )
    base = (
        head.stdout.decode().strip()
        if head.returncode == 0
        else git(copy, "hash-object", "-t", "tree", "/dev/null").strip()
    )
    return git(copy, "diff-index", "--cached", "--patch", "--no-renames", base)


def reference_tree(repository: Path, scratch: Path) -> str:
    """The tree id ``git add --all && git write-tree`` gives on a clean copy."""
    copy = clean_copy(repository, scratch)
    git(copy, "add", "--all")
    return git(copy, "write-tree").strip()


async def workspace_diff(root: Path) -> str:
    """``LocalWorkspace(root).diff()``, the workspace disposed afterwards."""
    workspace = LocalWorkspace(root)
    try:
        return await workspace.diff()
    finally:
        await workspace.dispose()


async def workspace_snapshot(root: Path) -> WorkspaceSnapshot:
    """``LocalWorkspace(root).snapshot()``, the workspace disposed afterwards."""
    workspace = LocalWorkspace(root)
    try:
        return await workspace.snapshot()
    finally:
        await workspace.dispose()


def folder_state(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry below ``folder`` (without following links): its mode and content or target."""
    state: dict[str, tuple[int, bytes]] = {}
    for directory, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(directory) / name
            info = path.lstat()
            if path.is_symlink():
                data = os.readlink(path).encode()
            elif path.is_file():
                data = path.read_bytes()
            else:
                data = b""
            state[str(path.relative_to(folder))] = (info.st_mode, data)
    return state
