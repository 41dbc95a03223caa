"""``LocalWorkspace.resolve_directory``: a directory's checked spelling, as ``execute`` resolves ``cwd``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness_workspace import CommandRequest
from harness_workspace.local import (
    WORKSPACE_DISPOSED,
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_PATH_INVALID,
    WORKSPACE_SYMLINK_REFUSED,
    LocalWorkspace,
    LocalWorkspaceError,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "file.txt").write_text("x")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "out")
    os.symlink("src", root / "inner")
    return root


@pytest.mark.parametrize(
    ("path", "canonical"),
    [("", ""), ("/", ""), (".", ""), ("src", "src"), ("src/./pkg/", "src/pkg"), ("src/pkg/..", "src")],
)
async def test_a_directory_gets_its_canonical_spelling(tree: Path, path: str, canonical: str) -> None:
    workspace = LocalWorkspace(tree)
    assert await workspace.resolve_directory(path) == canonical
    await workspace.dispose()


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("file.txt", WORKSPACE_NOT_A_DIRECTORY),
        ("missing", WORKSPACE_NOT_FOUND),
        ("..", WORKSPACE_PATH_ESCAPES_ROOT),
        ("/etc", WORKSPACE_PATH_INVALID),
        ("src\x00", WORKSPACE_PATH_INVALID),
        ("out", WORKSPACE_PATH_ESCAPES_ROOT),
        ("inner", WORKSPACE_SYMLINK_REFUSED),
    ],
)
async def test_what_execute_would_refuse_is_refused_with_the_same_code(
    tree: Path, path: str, code: str
) -> None:
    workspace = LocalWorkspace(tree)
    with pytest.raises(LocalWorkspaceError) as resolved:
        await workspace.resolve_directory(path)
    with pytest.raises(LocalWorkspaceError) as executed:
        await workspace.execute(CommandRequest(argv=("true",), cwd=path))
    assert (resolved.value.code, executed.value.code) == (code, code)
    assert resolved.value.operation == "execute"
    await workspace.dispose()


async def test_after_dispose_it_is_refused(tree: Path) -> None:
    workspace = LocalWorkspace(tree)
    await workspace.dispose()
    with pytest.raises(LocalWorkspaceError) as refused:
        await workspace.resolve_directory("src", "create")
    assert (refused.value.code, refused.value.operation) == (WORKSPACE_DISPOSED, "create")
