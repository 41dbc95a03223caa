"""Fixtures for the sandbox engines: a Docker engine over real images, or one skip line saying how.

With ``HARNESS_REQUIRE_SANDBOX=1`` (CI) a missing engine or image is a failure, not a skip.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import NoReturn

import pytest
import trio
from sandbox_helpers import engine_unavailable_reason, load_build_script

from harness_sandbox import SANDBOX_ID_RANGE, BubblewrapEngine, DockerEngine, EnvironmentSpec, SandboxLimits
from harness_sandbox._docker import DockerEnvironment
from harness_sandbox._docker_cli import this_host

TEST_LIMITS = SandboxLimits(
    memory_bytes=64 * 1024 * 1024,
    pids=32,
    file_bytes=1_000_000,
    max_output_bytes=4096,
    kill_grace_ms=200,
)
"""Small limits, so that hitting them is quick."""


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("HARNESS_REQUIRE_SANDBOX") == "1":
        pytest.fail(f"HARNESS_REQUIRE_SANDBOX=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_available() -> None:
    """Skip (or fail under ``HARNESS_REQUIRE_SANDBOX=1``) unless a Docker daemon answers."""
    if shutil.which("docker") is None:
        _unavailable("docker CLI not found: `apt-get install docker.io` (CI installs it)")
    version = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if version.returncode != 0:
        _unavailable("docker daemon not reachable: run `dockerd > /tmp/dockerd.log 2>&1 &` (CI starts it)")


@pytest.fixture(scope="session")
def bubblewrap_available() -> None:
    """Skip (or fail under ``HARNESS_REQUIRE_SANDBOX=1``) unless the bubblewrap engine can run."""
    reason = trio.run(engine_unavailable_reason, BubblewrapEngine())
    if reason is not None:
        _unavailable(f"bubblewrap engine unavailable: {reason} (CI installs it)")


@pytest.fixture(scope="session")
def busybox_image(docker_available: None) -> str:
    """The busybox test image (built here in well under a second, or found in the cache)."""
    if not os.path.isfile("/bin/busybox"):
        _unavailable("/bin/busybox missing: `apt-get install busybox-static` (CI installs it)")
    image: str = load_build_script().build_busybox_image()
    return image


@pytest.fixture(scope="session")
def debian_image(docker_available: None) -> str:
    """The default image (``HARNESS_SANDBOX_IMAGE``, else the cached build); never built here.

    Building it runs ``debootstrap``, which downloads from the Debian mirror: not in tests.
    """
    image: str | None = os.environ.get("HARNESS_SANDBOX_IMAGE")
    if not image:
        build = load_build_script()
        image = build.cached_image(build.recipe_hash("debian"))
    if image is None:
        _unavailable("default sandbox image not built: run `python3 packages/sandbox/scripts/build_image.py`")
    return image


def _sandbox_ids() -> tuple[int, int]:
    """The uid and gid commands run as: as root, an id just above the sandbox range (no host
    account's, no workspace's lease, and by this process's pid no other test process's);
    else the caller's.
    """
    if os.geteuid() == 0:
        uid = SANDBOX_ID_RANGE.stop + 2 * (os.getpid() % 4096)
        return uid, uid
    return os.getuid(), os.getgid()


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[[], EnvironmentSpec]:
    """Makes specs with :data:`TEST_LIMITS`, each over a new empty copy owned by the sandbox's uid."""

    def make() -> EnvironmentSpec:
        uid, gid = _sandbox_ids()
        copy = tmp_path / f"copy-{secrets.token_hex(4)}"
        copy.mkdir()
        if os.geteuid() == 0:
            os.chown(copy, uid, gid)
        return EnvironmentSpec(
            name=f"harness-sbx-test-{secrets.token_hex(6)}",
            copy_path=str(copy),
            uid=uid,
            gid=gid,
            limits=TEST_LIMITS,
            owner=f"{this_host()}:{os.getpid()}",
        )

    return make


@pytest.fixture
def docker_engine(busybox_image: str) -> DockerEngine:
    """A Docker engine over the busybox image."""
    return DockerEngine(busybox_image)


@pytest.fixture
async def started() -> AsyncIterator[list[DockerEnvironment]]:
    """Environments a test started; all are stopped (and checked gone) at its end."""
    environments: list[DockerEnvironment] = []
    yield environments
    with trio.CancelScope(shield=True):
        for environment in environments:
            await environment.stop()


@pytest.fixture
async def busybox_environment(
    docker_engine: DockerEngine, make_spec: Callable[[], EnvironmentSpec], started: list[DockerEnvironment]
) -> DockerEnvironment:
    """A started environment over an empty copy, with :data:`TEST_LIMITS`."""
    environment = await docker_engine.start(make_spec())
    started.append(environment)
    return environment
