"""The workspace conformance suite against ``SandboxWorkspace``: over the host test engine
(the workspace's own logic) and over each real engine (Docker on the busybox image).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_helpers import HostTestEngine, sandbox_factory

from harness_sandbox import BubblewrapEngine, DockerEngine, is_isolating_engine
from harness_workspace import WorkspaceIsolation, isolation_of
from harness_workspace.conformance import CHECKS, LOCAL_PROFILE, WorkspaceCheck, WorkspaceFactory


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


# ---------------------------------------------------------------- isolation attestation


async def _declared(factory: WorkspaceFactory) -> WorkspaceIsolation | None:
    async with factory({"a.txt": b"x"}) as workspace:
        return isolation_of(workspace)


async def test_over_the_host_test_engine_nothing_is_declared(tmp_path: Path) -> None:
    # It runs commands on the host: the tool layer must not admit writes or commands on it.
    assert await _declared(sandbox_factory(tmp_path, HostTestEngine())) is None


async def test_on_docker_the_workspace_declares_itself_sandboxed(
    tmp_path: Path, docker_engine: DockerEngine
) -> None:
    assert await _declared(sandbox_factory(tmp_path, docker_engine)) == "sandboxed"


class _Weakened(BubblewrapEngine):
    """A subclass may drop fences: the package does not vouch for it."""


def test_only_the_shipped_engines_are_vouched_for_by_exact_type() -> None:
    assert is_isolating_engine(BubblewrapEngine())
    assert is_isolating_engine(DockerEngine("sha256:" + "a" * 64))
    assert not is_isolating_engine(_Weakened())
    assert not is_isolating_engine(HostTestEngine())
    assert not is_isolating_engine(None)
