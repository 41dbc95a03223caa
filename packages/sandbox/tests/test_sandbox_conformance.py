"""The workspace conformance suite against ``SandboxWorkspace``: over the host test engine
(the workspace's own logic) and over each real engine (Docker on the busybox image).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_helpers import HostTestEngine, sandbox_factory

from harness_sandbox import DockerEngine
from harness_workspace.conformance import CHECKS, LOCAL_PROFILE, WorkspaceCheck


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
