"""The workspace conformance suite against ``SandboxWorkspace``: over the host test engine
(the workspace's own logic) and over each real engine (Docker on the busybox image).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sandbox_helpers import HostTestEngine, git_repository

from harness_sandbox import DockerEngine, SandboxEngine, SandboxLimits, SandboxWorkspace
from harness_workspace import Workspace
from harness_workspace.conformance import CHECKS, LOCAL_PROFILE, WorkspaceCheck, WorkspaceFactory


def sandbox_factory(tmp_path: Path, engine: SandboxEngine) -> WorkspaceFactory:
    """Sandbox workspaces over git sources holding the given files, on ``engine``."""
    names = itertools.count()

    @asynccontextmanager
    async def open_workspace(files: Mapping[str, bytes]) -> AsyncGenerator[Workspace]:
        number = next(names)
        source = git_repository(tmp_path / f"source{number}", files)
        parent = tmp_path / f"copies{number}"
        parent.mkdir()
        workspace = await SandboxWorkspace.create(
            source,
            engine=engine,
            parent=parent,
            limits=SandboxLimits(kill_grace_ms=200, max_timeout_ms=60_000),
        )
        try:
            yield workspace
        finally:
            await workspace.dispose()

    return open_workspace


@pytest.mark.parametrize("check", CHECKS, ids=str)
async def test_sandbox_workspace_conforms_over_the_host_test_engine(
    check: WorkspaceCheck, tmp_path: Path
) -> None:
    await check.run(sandbox_factory(tmp_path, HostTestEngine()), LOCAL_PROFILE)


@pytest.mark.slow
@pytest.mark.parametrize("check", CHECKS, ids=str)
async def test_sandbox_workspace_conforms_on_docker(
    check: WorkspaceCheck, tmp_path: Path, docker_engine: DockerEngine
) -> None:
    await check.run(sandbox_factory(tmp_path, docker_engine), LOCAL_PROFILE)
