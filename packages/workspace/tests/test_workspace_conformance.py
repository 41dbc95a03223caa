"""The shipped conformance suite against ``MemoryWorkspace`` and ``LocalWorkspace``.

``harness-sandbox`` runs the same checks against ``SandboxWorkspace`` on each engine.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from workspace_git_repositories import git

from harness_workspace import MemoryWorkspace, Workspace
from harness_workspace.conformance import (
    CHECKS,
    LOCAL_PROFILE,
    MEMORY_PROFILE,
    WorkspaceCheck,
    WorkspaceFactory,
)
from harness_workspace.local import LocalWorkspace, ProcessLimits


def local_factory(tmp_path: Path) -> WorkspaceFactory:
    names = itertools.count()

    @asynccontextmanager
    async def open_workspace(files: Mapping[str, bytes]) -> AsyncGenerator[Workspace]:
        root = tmp_path / f"ws{next(names)}"
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "start")
        workspace = LocalWorkspace(root, process_limits=ProcessLimits(kill_grace_ms=200))
        try:
            yield workspace
        finally:
            await workspace.dispose()

    return open_workspace


@asynccontextmanager
async def memory_workspace(files: Mapping[str, bytes]) -> AsyncGenerator[Workspace]:
    texts = {name: data.decode("utf-8", errors="strict") for name, data in files.items() if _is_text(data)}
    workspace = MemoryWorkspace(texts)
    try:
        yield workspace
    finally:
        await workspace.dispose()


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("check", CHECKS, ids=str)
async def test_local_workspace_conforms(check: WorkspaceCheck, tmp_path: Path) -> None:
    await check.run(local_factory(tmp_path), LOCAL_PROFILE)


@pytest.mark.parametrize("check", CHECKS, ids=str)
async def test_memory_workspace_conforms(check: WorkspaceCheck) -> None:
    await check.run(memory_workspace, MEMORY_PROFILE)
