"""Whose the sandbox is: its copy and its processes belong to ids no host account has.

The attacker here is a real second host account, made by ``useradd`` for the test and
removed after: one with the first human account's uid (1000, which the copies and commands
of every sandbox used to have) and one with a fresh uid. As that account (``setpriv``), the
test tries to read and write the copy and to signal a command running in the sandbox, on
both engines. Needs root (to add an account and to lease ids); otherwise each test skips
with one line.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from sandbox_helpers import HostTestEngine, git_repository, sleep_processes

from harness_sandbox import (
    SANDBOX_ID_RANGE,
    SANDBOX_IDS_UNAVAILABLE,
    BubblewrapEngine,
    DockerEngine,
    SandboxEngine,
    SandboxError,
    SandboxLimits,
    SandboxWorkspace,
)
from harness_workspace import AbortController, CommandRequest
from harness_workspace.local import WORKSPACE_COMMAND_ABORTED, LocalWorkspaceError

ROOT = os.geteuid() == 0
REQUIRED = os.environ.get("HARNESS_REQUIRE_SANDBOX") == "1"
LIMITS = SandboxLimits(kill_grace_ms=200, max_timeout_ms=120_000)
SECRET = "root's private source\n"
REGISTRY = Path("/run/harness-sandbox")

# The tests read /proc and run short host programs directly: small, local, and the point.
# ruff: noqa: ASYNC240


@dataclass(frozen=True)
class Account:
    """A real host account made for one test."""

    name: str
    uid: int
    gid: int

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as this account: its uid and gid, no supplementary group."""
        return subprocess.run(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *argv],
            capture_output=True,
            text=True,
            errors="replace",  # a file read may be binary (a disk image)
            check=False,
            timeout=30,
            env={"PATH": "/usr/bin:/bin", "LANG": "C"},
        )


def _needs_root_tools() -> None:
    if not ROOT:
        pytest.skip("needs root: the test adds a host account and the sandbox leases ids")
    missing = [tool for tool in ("useradd", "userdel", "setpriv") if shutil.which(tool) is None]
    if missing:
        reason = f"{', '.join(missing)} not found: apt-get install passwd util-linux"
        if REQUIRED:
            pytest.fail(f"HARNESS_REQUIRE_SANDBOX=1 but {reason}", pytrace=False)
        pytest.skip(reason)


def _add_account(uid: int | None) -> Account:
    name = f"harness-probe-{secrets.token_hex(4)}"
    argv = ["useradd", "--create-home", "--shell", "/bin/sh"]
    if uid is not None:
        argv += ["--uid", str(uid), "--non-unique"]
    if uid is not None and uid in _host_ids("/etc/group", 2):
        argv += ["--no-user-group", "--gid", str(uid)]
    else:
        argv += ["--user-group"]
    made = subprocess.run([*argv, name], capture_output=True, text=True, check=False, timeout=30)
    for _ in range(50):  # another process may hold the account files' lock for a moment
        if made.returncode != 10:  # 10: cannot lock
            break
        time.sleep(0.1)
        made = subprocess.run([*argv, name], capture_output=True, text=True, check=False, timeout=30)
    assert made.returncode == 0, made.stderr
    entry = pwd.getpwnam(name)
    return Account(name, entry.pw_uid, entry.pw_gid)


@pytest.fixture(params=["uid 1000", "a fresh uid"])
def probe(request: pytest.FixtureRequest) -> Iterator[Account]:
    """A real second host account: one with the first human account's uid, or a new one."""
    _needs_root_tools()
    account = _add_account(1000 if request.param == "uid 1000" else None)
    try:
        yield account
    finally:
        # --force: with uid 1000 the account shares its uid with a user who may be logged in.
        subprocess.run(
            ["userdel", "--force", "--remove", account.name], capture_output=True, check=False, timeout=30
        )
        assert account.name not in Path("/etc/passwd").read_text()


@pytest.fixture(params=["bubblewrap", "docker"])
def engine(request: pytest.FixtureRequest) -> SandboxEngine:
    if request.param == "docker":
        return DockerEngine(request.getfixturevalue("busybox_image"))
    request.getfixturevalue("bubblewrap_available")
    return BubblewrapEngine()


@pytest.fixture
async def workspace(engine: SandboxEngine, tmp_path: Path) -> AsyncIterator[SandboxWorkspace]:
    source = git_repository(tmp_path / "source", {"private.txt": SECRET})
    created = await SandboxWorkspace.create(source, engine=engine, limits=LIMITS)
    try:
        yield created
    finally:
        await created.dispose()


def _host_ids(path: str, field: int) -> set[int]:
    return {
        int(line.split(":")[field]) for line in Path(path).read_text().splitlines() if line.count(":") >= 3
    }


def _state(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line.split()[1] for line in status.splitlines() if line.startswith("State:"))


_SIGNAL = """import os, sys
try:
    os.kill(int(sys.argv[1]), int(sys.argv[2]))
except OSError as error:
    sys.exit(error.strerror)
"""


async def test_another_account_can_neither_read_nor_write_the_copy_nor_signal_a_command(
    workspace: SandboxWorkspace, probe: Account
) -> None:
    # The ids as the sandbox itself reports them.
    uid, gid = map(
        int, (await workspace.execute(CommandRequest(argv=("sh", "-c", "id -u; id -g")))).stdout.split()
    )
    copy = workspace.copy_path
    home = os.path.dirname(copy)

    # Read: neither the copy's files nor the home's listing.
    for argv in (("cat", f"{copy}/private.txt"), ("ls", home), ("ls", copy), ("cat", f"{home}/disk.img")):
        denied = probe.run(*argv)
        assert denied.returncode != 0, argv
        assert "Permission denied" in denied.stderr, (argv, denied.stderr)
        assert SECRET.strip() not in denied.stdout

    # Write: neither an existing file (a poisoned patch) nor a new one.
    for script in (f"echo poisoned > {copy}/private.txt", f"echo planted > {copy}/planted.txt"):
        denied = probe.run("sh", "-c", script)
        assert denied.returncode != 0, script
        assert "Permission denied" in denied.stderr
    assert await workspace.read_file("private.txt") == SECRET
    assert "planted.txt" not in await workspace.list_files("")

    # Signal: a command running in the sandbox, found by its host pid.
    marker = f"7{secrets.randbelow(10**6):06d}"
    stop = AbortController()
    outcome: list[BaseException] = []

    async def run_sleep() -> None:
        try:
            await workspace.execute(
                CommandRequest(argv=("sleep", marker), timeout_ms=100_000, signal=stop.signal)
            )
        except LocalWorkspaceError as error:
            outcome.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_sleep)
        with trio.fail_after(30):
            while not (pids := sleep_processes(marker, uid=uid)):  # noqa: ASYNC110
                await trio.sleep(0.05)
        (pid,) = pids
        for number, name in ((0, "kill -0"), (19, "SIGSTOP"), (9, "SIGKILL")):
            refused = probe.run("python3", "-c", _SIGNAL, str(pid), str(number))
            assert (refused.returncode, refused.stderr.strip()) == (1, "Operation not permitted"), name
        denied = probe.run("cat", f"/proc/{pid}/environ")  # what ptrace would need
        assert denied.returncode != 0
        assert _state(pid) == "S"  # still sleeping: not stopped, not killed
        # The negative control: the same account may signal a process of its own.
        own = await trio.lowlevel.open_process(
            ["setpriv", f"--reuid={probe.uid}", f"--regid={probe.gid}", "--clear-groups", "sleep", "60"]
        )
        try:
            assert probe.run("python3", "-c", _SIGNAL, str(own.pid), "0").returncode == 0
        finally:
            own.kill()
            await own.wait()
        stop.abort("done")
    (error,) = outcome
    assert isinstance(error, LocalWorkspaceError)
    assert error.code == WORKSPACE_COMMAND_ABORTED
    assert (uid, gid) == workspace.ids
    assert probe.uid not in (uid, uid + 1)
    assert probe.gid not in (gid, gid + 1)
    info = os.stat(home)
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (0, gid, 0o710)


async def test_the_sandbox_runs_as_an_id_of_its_own_that_no_host_account_has(
    workspace: SandboxWorkspace, engine: SandboxEngine, tmp_path: Path
) -> None:
    if not ROOT:
        pytest.skip("needs root: not root, the sandbox runs as the caller")
    uid, gid = workspace.ids
    ran = await workspace.execute(CommandRequest(argv=("sh", "-c", "id -u; id -g; id -G")))
    assert ran.stdout.split() == [str(uid), str(gid), str(gid)]
    assert uid in SANDBOX_ID_RANGE
    assert uid not in _host_ids("/etc/passwd", 2)
    assert gid not in _host_ids("/etc/group", 2)
    with pytest.raises(KeyError):
        pwd.getpwuid(uid)
    assert os.stat(workspace.copy_path).st_uid == uid
    assert (REGISTRY / f"{uid}.lease").exists()
    # A second live sandbox has ids of its own: neither can signal the other's processes.
    source = git_repository(tmp_path / "other", {"a.txt": "a\n"})
    other = await SandboxWorkspace.create(source, engine=engine, limits=LIMITS)
    try:
        assert other.ids[0] not in (uid, uid + 1)
        assert uid not in (other.ids[0], other.ids[0] + 1)
    finally:
        await other.dispose()
    assert not (REGISTRY / f"{other.ids[0]}.lease").exists()


async def test_a_range_that_holds_a_host_account_is_refused_and_nothing_is_made(
    probe: Account, tmp_path: Path
) -> None:
    source = git_repository(tmp_path / "source", {"a.txt": "a\n"})
    parent = tmp_path / "copies"
    parent.mkdir()
    before: set[str] = set(os.listdir(REGISTRY)) if REGISTRY.exists() else set()
    for ids in (range(probe.uid - 4, probe.uid + 4), range(probe.uid, probe.uid + 2)):
        with pytest.raises(SandboxError) as caught:
            await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, ids=ids)
        assert caught.value.code == SANDBOX_IDS_UNAVAILABLE
        assert "/etc/passwd" in caught.value.message or "/etc/group" in caught.value.message
    assert list(parent.iterdir()) == []
    assert set(os.listdir(REGISTRY)) == before


async def test_when_every_id_of_the_range_is_leased_creation_is_refused_until_one_is_free(
    tmp_path: Path,
) -> None:
    _needs_root_tools()
    source = git_repository(tmp_path / "source", {"a.txt": "a\n"})
    parent = tmp_path / "copies"
    parent.mkdir()
    base = SANDBOX_ID_RANGE.stop + 2 * (os.getpid() % 4096) + 10_000
    ids = range(base, base + 2)  # one sandbox's pair
    first = await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, ids=ids)
    assert first.ids == (base, base)
    with pytest.raises(SandboxError) as caught:
        await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, ids=ids)
    assert caught.value.code == SANDBOX_IDS_UNAVAILABLE
    assert "taken by a live sandbox" in caught.value.message
    assert len(list(parent.iterdir())) == 1
    await first.dispose()
    second = await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, ids=ids)
    assert second.ids == (base, base)
    await second.dispose()
    for bad in (range(base, base + 1), range(2), range(base, base + 4, 2)):
        with pytest.raises(SandboxError) as caught:
            await SandboxWorkspace.create(source, engine=HostTestEngine(), parent=parent, ids=bad)
        assert caught.value.code == SANDBOX_IDS_UNAVAILABLE
    assert list(parent.iterdir()) == []
