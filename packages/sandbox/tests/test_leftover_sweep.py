"""What a killed owner leaves of a bubblewrap sandbox is swept by the next creation; a live owner's is not.

Two child processes each create a ``SandboxWorkspace`` on bubblewrap and start a long command
in it; one is killed with SIGKILL, the other lives on. The next ``SandboxWorkspace.create``
(in this process) removes the dead owner's copy, its file system and loop device, its
lease, its command's processes and its cgroups, and leaves the live owner's sandbox as it is.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from sandbox_helpers import HostTestEngine, git_repository, sleep_processes

from harness_sandbox import BubblewrapEngine, SandboxLimits, SandboxWorkspace
from harness_workspace import CommandRequest

ROOT = os.geteuid() == 0
REGISTRY = Path("/run/harness-sandbox") if ROOT else None

# The test reads /proc, /sys and the copies directly: small, local, and the point.
# ruff: noqa: ASYNC240

_OWNER = """
import os
import sys
import trio
from harness_sandbox import BubblewrapEngine, SandboxLimits, SandboxWorkspace
from harness_workspace import CommandRequest


async def main() -> None:
    limits = SandboxLimits(kill_grace_ms=200, max_timeout_ms=120_000)
    workspace = await SandboxWorkspace.create(
        sys.argv[1], engine=BubblewrapEngine(), parent=sys.argv[2], limits=limits
    )
    print(workspace.copy_path, os.stat(workspace.copy_path).st_uid, flush=True)
    async with trio.open_nursery() as nursery:
        command = CommandRequest(argv=("sleep", sys.argv[3]), timeout_ms=100_000)
        nursery.start_soon(workspace.execute, command)
        await trio.to_thread.run_sync(sys.stdin.read)  # until the test closes it
        nursery.cancel_scope.cancel()
    await workspace.dispose()


trio.run(main)
"""


@dataclass
class Owner:
    """A child process that owns one sandbox and runs ``sleep <marker>`` in it."""

    process: subprocess.Popen[str]
    copy: Path
    uid: int
    marker: str

    @property
    def home(self) -> Path:
        return self.copy.parent


@pytest.fixture
def parent() -> Iterator[Path]:
    """Where the copies go: not pytest's tmp_path, whose parents the sandbox's uid cannot pass."""
    made = Path(tempfile.mkdtemp(prefix="harness-sweep-"))
    made.chmod(0o711)
    yield made
    shutil.rmtree(made)


@pytest.fixture
def owners(tmp_path: Path, bubblewrap_available: None) -> Iterator[list[Owner]]:
    started: list[Owner] = []
    yield started
    for owner in started:
        if owner.process.poll() is None:
            owner.process.kill()
        owner.process.wait()
        for stream in (owner.process.stdin, owner.process.stdout):
            if stream is not None:
                stream.close()


def start_owner(source: Path, parent: Path) -> Owner:
    marker = f"8{secrets.randbelow(10**6):06d}"
    process = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(source), str(parent), marker],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().split()
    assert len(line) == 2, line
    return Owner(process, Path(line[0]), int(line[1]), marker)


def cgroups_of(pid: int) -> list[str]:
    """The command cgroups named for owner ``pid``, anywhere in the memory, pids and cpu hierarchies."""
    found: list[str] = []
    for controller in ("memory", "pids", "cpu"):
        for directory, children, _ in os.walk(f"/sys/fs/cgroup/{controller}"):
            found += [
                os.path.join(directory, name) for name in children if name.startswith(f"harness-sbx-{pid}-")
            ]
    return found


def loop_device(mountpoint: Path) -> str | None:
    """The loop device mounted at ``mountpoint``, if any."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        device, where = line.split()[:2]
        if where == str(mountpoint) and device.startswith("/dev/loop"):
            return device
    return None


def attached(device: str) -> bool:
    return Path(f"/sys/block/{os.path.basename(device)}/loop/backing_file").exists()


def leftovers(owner: Owner) -> dict[str, object]:
    """What of the owner's sandbox exists now."""
    found: dict[str, object] = {"home": owner.home.exists(), "mounted": os.path.ismount(owner.copy)}
    if REGISTRY is not None:
        found["lease"] = (REGISTRY / f"{owner.uid}.lease").exists()
        found["processes"] = bool(sleep_processes(owner.marker))
        found["cgroups"] = bool(cgroups_of(owner.process.pid))
    return found


async def wait_until_sleeping(owner: Owner) -> None:
    with trio.fail_after(30):
        while not sleep_processes(owner.marker):  # noqa: ASYNC110
            await trio.sleep(0.05)


@pytest.mark.slow
async def test_a_killed_owners_sandbox_is_swept_by_the_next_creation_and_a_live_owners_is_kept(
    tmp_path: Path, parent: Path, owners: list[Owner]
) -> None:
    source = git_repository(tmp_path / "source", {"private.txt": "root's private source\n"})
    dead = start_owner(source, parent)
    owners.append(dead)
    live = start_owner(source, parent)
    owners.append(live)
    await wait_until_sleeping(dead)
    await wait_until_sleeping(live)
    device = loop_device(dead.copy)
    dead.process.kill()
    dead.process.wait()

    present = leftovers(dead)
    assert present["home"]
    if REGISTRY is not None:
        assert present == {"home": True, "mounted": True, "lease": True, "processes": True, "cgroups": True}
        assert device is not None
        assert attached(device)
    kept = leftovers(live)

    fresh = await SandboxWorkspace.create(source, engine=BubblewrapEngine(), parent=parent)
    try:
        ran = await fresh.execute(CommandRequest(argv=("cat", "private.txt")))
        assert ran.stdout == "root's private source\n"
    finally:
        await fresh.dispose()

    assert not any(leftovers(dead).values()), leftovers(dead)
    assert not (device is not None and attached(device))
    assert leftovers(live) == kept  # the live owner's copy, lease, command and cgroups
    assert (live.copy / "private.txt").read_text() == "root's private source\n"
    assert live.process.stdin is not None
    live.process.stdin.close()
    assert live.process.wait(timeout=60) == 0
    assert not any(leftovers(live).values()), leftovers(live)
    assert sorted(path.name for path in parent.iterdir()) == []


async def test_a_sweep_never_touches_the_sandboxes_of_its_own_process(tmp_path: Path) -> None:
    source = git_repository(tmp_path / "source", {"a.txt": "a\n"})
    parent = tmp_path / "copies"
    parent.mkdir()
    limits = SandboxLimits(kill_grace_ms=200)

    first = await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, limits=limits)
    second = await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, limits=limits)
    try:
        assert Path(first.copy_path, "a.txt").read_text() == "a\n"
        assert first.ids != second.ids or not ROOT
    finally:
        await second.dispose()
        await first.dispose()
    assert list(parent.iterdir()) == []
