"""The bubblewrap engine through the engine port, for real: bwrap, a copy owned by the sandbox's uid.

Run as root, the sandbox uses a uid of its own (no other process on the host has it), so
"no process of that uid is left" is an exact check. Without bubblewrap the tests skip with
one line; with ``HARNESS_REQUIRE_SANDBOX=1`` (CI) a missing engine fails them instead.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal as signals
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from sandbox_helpers import live_processes, sandbox_factory

from harness_sandbox import (
    SANDBOX_ENGINE_UNAVAILABLE,
    SANDBOX_START_FAILED,
    BubblewrapEngine,
    CommandOutcome,
    CommandSpec,
    EnvironmentSpec,
    SandboxEnvironment,
    SandboxError,
    SandboxLimits,
)
from harness_sandbox._cgroups import cgroup_parents
from harness_workspace import AbortController, AbortSignal, isolation_of
from harness_workspace.conformance import CHECKS, LOCAL_PROFILE, WorkspaceCheck
from harness_workspace.local import (
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    LocalWorkspaceError,
)

REQUIRED = os.environ.get("HARNESS_REQUIRE_SANDBOX") == "1"
ROOT = os.geteuid() == 0
# A uid no other process has, when we may choose one.
SANDBOX_UID = 200_000 + os.getpid() % 100_000 if ROOT else os.getuid()
SANDBOX_GID = SANDBOX_UID if ROOT else os.getgid()
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
PYTHON = "/usr/bin/python3"
HAS_PYTHON = os.path.exists(PYTHON)
needs_python = pytest.mark.skipif(not HAS_PYTHON, reason="no /usr/bin/python3 to run inside")
# Where this process may create cgroups (as root on cgroup v1), the engine adds them to the rlimits.
CGROUPS = cgroup_parents()


@dataclass
class Sandbox:
    """A started environment and the host side of its copy."""

    environment: SandboxEnvironment
    copy: Path

    async def run(
        self,
        *argv: str,
        cwd: str = "",
        budget_ms: int = 10_000,
        environment: Mapping[str, str] = ENVIRONMENT,
        signal: AbortSignal | None = None,
    ) -> CommandOutcome:
        command = CommandSpec(argv=argv, cwd=cwd, budget_ms=budget_ms, environment=environment, signal=signal)
        return await self.environment.run(command)


def _command_processes(marker: str) -> list[int]:
    """Live processes naming ``marker`` that are not a ``bwrap`` (the command and its helpers)."""
    found: list[int] = []
    for pid in live_processes(marker=marker):
        try:
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if not program.endswith(b"/bwrap"):
            found.append(pid)
    return found


async def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll ``condition`` (a look at /proc: nothing to wait on) until true or ``seconds`` pass."""
    with trio.move_on_after(seconds):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.02)
    return condition()


def existing(paths: Iterable[str]) -> list[str]:
    return [path for path in paths if os.path.lexists(path)]


def our_cgroups() -> list[str]:
    """The command cgroups this process has made and not removed."""
    prefix = f"harness-sbx-{os.getpid()}-"
    return [
        os.path.join(parent, name)
        for parent in CGROUPS.values()
        for name in os.listdir(parent)
        if name.startswith(prefix)
    ]


def make_copy_directory() -> Path:
    # Not pytest's tmp_path: its parents are private to root, and bwrap runs as the sandbox's uid.
    base = Path(tempfile.mkdtemp(prefix="harness-bwrap-"))
    base.chmod(0o711)
    copy = base / "copy"
    copy.mkdir()
    os.chown(copy, SANDBOX_UID, SANDBOX_GID)
    return copy


@pytest.fixture
def copy_directory() -> Iterator[Path]:
    copy = make_copy_directory()
    yield copy
    shutil.rmtree(copy.parent)


def make_spec(copy: Path, limits: SandboxLimits | None = None, *, uid: int = SANDBOX_UID) -> EnvironmentSpec:
    return EnvironmentSpec(
        name=f"harness-sbx-{secrets.token_hex(4)}",
        copy_path=str(copy),
        uid=uid,
        gid=SANDBOX_GID,
        limits=limits or SandboxLimits(kill_grace_ms=200),
        owner=f"test:{os.getpid()}",
    )


async def start(spec: EnvironmentSpec) -> SandboxEnvironment:
    return await BubblewrapEngine().start(spec)


async def unavailable_reason() -> str | None:
    copy = make_copy_directory()
    try:
        environment = await start(make_spec(copy))
        await environment.stop()
    except SandboxError as error:
        if error.code != SANDBOX_ENGINE_UNAVAILABLE:
            raise
        return " ".join(error.message.split())
    finally:
        shutil.rmtree(copy.parent)
    return None


@pytest.fixture(scope="session")
def bubblewrap_engine() -> None:
    """Skip (one line), or fail under HARNESS_REQUIRE_SANDBOX=1, when the engine cannot run here.

    A sync fixture: pytest-trio loses the reason of a skip raised in an async test or fixture.
    """
    reason = trio.run(unavailable_reason)
    if reason is None:
        return
    if REQUIRED:
        pytest.fail(f"HARNESS_REQUIRE_SANDBOX=1 and the bubblewrap engine is unavailable: {reason}")
    pytest.skip(
        f"bubblewrap engine unavailable: {reason} (CI installs it and sets HARNESS_REQUIRE_SANDBOX=1)"
    )


@pytest.fixture
def engine_copy(bubblewrap_engine: None, copy_directory: Path) -> Path:
    """A copy directory, on a machine where the engine runs."""
    return copy_directory


@pytest.fixture
async def sandbox(engine_copy: Path) -> AsyncIterator[Sandbox]:
    environment = await start(make_spec(engine_copy))
    yield Sandbox(environment, engine_copy)
    await environment.stop()
    if ROOT:
        assert live_processes(uid=SANDBOX_UID) == []
    assert our_cgroups() == []


def write_owned(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    path.chmod(mode)
    os.chown(path, SANDBOX_UID, SANDBOX_GID)


# ---------------------------------------------------------------- commands


async def test_exit_codes_are_reported_and_a_signal_inside_is_128_plus_its_number(sandbox: Sandbox) -> None:
    assert (await sandbox.run("true")).exit_code == 0
    assert (await sandbox.run("false")).exit_code == 1
    assert (await sandbox.run("sh", "-c", "exit 7")).exit_code == 7
    killed = await sandbox.run("sh", "-c", "kill -KILL $$")
    assert (killed.exit_code, killed.timed_out, killed.aborted) == (137, False, False)


async def test_arguments_reach_the_program_verbatim_without_a_shell(sandbox: Sandbox) -> None:
    arguments = ["a b", "'single'", '"double"', "$HOME", "*", "", "tab\there", "ünï", "--", "-n"]
    outcome = await sandbox.run("printf", "[%s]\\n", *arguments)
    assert outcome.exit_code == 0
    assert outcome.stdout == "".join(f"[{argument}]\n" for argument in arguments)
    assert (await sandbox.run("echo", "hello", "world")).stdout == "hello world\n"


async def test_the_command_runs_in_its_working_directory_below_the_workspace(sandbox: Sandbox) -> None:
    sub = sandbox.copy / "sub" / "dir"
    sub.mkdir(parents=True)
    for directory in (sub.parent, sub):
        os.chown(directory, SANDBOX_UID, SANDBOX_GID)
    write_owned(sub / "tool.sh", "#!/bin/sh\necho tool ran in $(pwd)\n", 0o755)
    assert (await sandbox.run("pwd")).stdout == "/workspace\n"
    assert (await sandbox.run("pwd", cwd="sub/dir")).stdout == "/workspace/sub/dir\n"
    assert (await sandbox.run("./tool.sh", cwd="sub/dir")).stdout == "tool ran in /workspace/sub/dir\n"


async def test_the_environment_is_exactly_the_given_one_plus_the_working_directory(sandbox: Sandbox) -> None:
    given = {"PATH": "/usr/bin:/bin", "EMPTY": "", "WITH_EQUALS": "a=b=c", "SPACES": " x  y "}
    outcome = await sandbox.run("env", "-0", cwd="", environment=given)
    seen = dict(entry.split("=", 1) for entry in outcome.stdout.split("\0") if entry)
    # bwrap sets PWD, as a shell would; nothing else of the host arrives.
    assert seen == {**given, "PWD": "/workspace"}


async def test_a_missing_program_or_interpreter_is_not_found_and_nothing_ran(sandbox: Sandbox) -> None:
    write_owned(sandbox.copy / "orphan.sh", "#!/nonexistent/interpreter\n", 0o755)
    for argv in (("no-such-program-here",), ("/usr/bin/no-such-program",), ("./orphan.sh",)):
        with pytest.raises(LocalWorkspaceError) as caught:
            await sandbox.run(*argv)
        assert caught.value.code == WORKSPACE_COMMAND_NOT_FOUND, argv


async def test_a_program_that_cannot_be_executed_or_an_invalid_command_fails_to_start(
    sandbox: Sandbox,
) -> None:
    write_owned(sandbox.copy / "data.txt", "not a program\n", 0o644)
    failing: list[tuple[tuple[str, ...], Mapping[str, str]]] = [
        (("./data.txt",), ENVIRONMENT),
        (("/usr/share",), ENVIRONMENT),
        (("echo", "nul\x00inside"), ENVIRONMENT),
        (("true",), {"BAD=NAME": "x"}),
        (("true",), {"": "x"}),
        (("true",), {"VALUE": "nul\x00"}),
    ]
    for argv, environment in failing:
        with pytest.raises(LocalWorkspaceError) as caught:
            await sandbox.run(*argv, environment=environment)
        assert caught.value.code == WORKSPACE_COMMAND_FAILED_TO_START, argv


async def test_output_keeps_head_and_tail_within_the_bound(engine_copy: Path) -> None:
    limits = SandboxLimits(max_output_bytes=1000, kill_grace_ms=200)
    environment = await start(make_spec(engine_copy, limits))
    script = "echo FIRST; yes middle-of-stdout | head -c 100000; echo LAST; yes err | head -c 5000 >&2"
    outcome = await environment.run(
        CommandSpec(argv=("sh", "-c", script), cwd="", budget_ms=10_000, environment=ENVIRONMENT, signal=None)
    )
    assert outcome.exit_code == 0
    assert outcome.stdout.startswith("FIRST\n")
    assert outcome.stdout.endswith("LAST\n")
    assert "[stdout truncated:" in outcome.stdout
    assert len(outcome.stdout.encode()) < 1200
    assert "[stderr truncated:" in outcome.stderr
    await environment.stop()


# ---------------------------------------------------------------- stopping


async def test_a_timeout_stops_the_command_even_when_it_ignores_sigterm(sandbox: Sandbox) -> None:
    marker = f"1000.{secrets.randbelow(10**6)}"
    started = time.monotonic()
    outcome = await sandbox.run(
        "sh", "-c", f"trap '' TERM; sleep {marker} & echo started; sleep 30", budget_ms=400
    )
    assert time.monotonic() - started < 5
    assert (outcome.exit_code, outcome.timed_out, outcome.aborted) == (None, True, False)
    assert outcome.stdout == "started\n"
    assert live_processes(marker=marker) == []


async def test_an_abort_stops_the_command(sandbox: Sandbox) -> None:
    controller = AbortController()
    outcome: list[CommandOutcome] = []

    async def run() -> None:
        outcome.append(await sandbox.run("sleep", "30", signal=controller.signal))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(0.3)
        controller.abort("enough")
    assert (outcome[0].exit_code, outcome[0].timed_out, outcome[0].aborted) == (None, False, True)
    already = AbortController()
    already.abort()
    skipped = await sandbox.run("touch", "should-not-exist", signal=already.signal)
    assert skipped.aborted
    assert not (sandbox.copy / "should-not-exist").exists()


async def test_a_background_process_is_gone_when_the_command_returns(sandbox: Sandbox) -> None:
    marker = f"1000.{secrets.randbelow(10**6)}"
    outcome = await sandbox.run("sh", "-c", f"sleep {marker} > /dev/null 2>&1 & echo $!")
    assert outcome.exit_code == 0
    assert outcome.stdout.strip().isdigit()  # it did start, inside
    assert live_processes(marker=marker) == []
    if ROOT:
        assert live_processes(uid=SANDBOX_UID) == []


async def test_stop_ends_a_running_command_and_refuses_new_ones(sandbox: Sandbox) -> None:
    marker = f"1000.{secrets.randbelow(10**6)}"
    errors: list[SandboxError] = []

    async def run() -> None:
        with pytest.raises(SandboxError) as caught:
            await sandbox.run("sleep", marker)
        errors.append(caught.value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        assert await wait_for(lambda: bool(live_processes(marker=marker)), 10)
        await sandbox.environment.stop()
    assert errors[0].code == SANDBOX_START_FAILED
    assert live_processes(marker=marker) == []
    with pytest.raises(SandboxError) as caught:
        await sandbox.run("true")
    assert caught.value.code == SANDBOX_START_FAILED
    await sandbox.environment.stop()  # idempotent


async def test_cancelling_the_caller_leaves_no_process(sandbox: Sandbox) -> None:
    marker = f"1000.{secrets.randbelow(10**6)}"
    with trio.move_on_after(0.3):
        await sandbox.run("sh", "-c", f"sleep {marker} & sleep {marker}")
    assert live_processes(marker=marker) == []


@pytest.mark.slow
async def test_a_command_may_outlive_the_worker_thread_that_started_it(sandbox: Sandbox) -> None:
    # trio's worker threads exit after 10 s idle; bwrap's --die-with-parent follows the
    # forking thread, so without a parent of its own the command would die at 10 s.
    outcome = await sandbox.run("sh", "-c", "sleep 11.5; echo survived", budget_ms=30_000)
    assert (outcome.exit_code, outcome.stdout) == (0, "survived\n")


@pytest.mark.slow
async def test_a_sandbox_dies_within_its_backstop_when_the_harness_is_killed(engine_copy: Path) -> None:
    marker = f"1000.{secrets.randbelow(10**6)}"
    script = f"""
import sys, trio
from harness_sandbox import BubblewrapEngine, CommandSpec, EnvironmentSpec, SandboxLimits
async def main():
    spec = EnvironmentSpec(name="harness-sbx-orphan", copy_path={str(engine_copy)!r}, uid={SANDBOX_UID},
                           gid={SANDBOX_GID}, limits=SandboxLimits(kill_grace_ms=0), owner="test")
    environment = await BubblewrapEngine().start(spec)
    print("started", flush=True)
    await environment.run(CommandSpec(argv=("sleep", "{marker}"), cwd="", budget_ms=3000,
                                      environment={{"PATH": "/usr/bin"}}, signal=None))
trio.run(main)
"""
    harness = await trio.lowlevel.open_process([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert harness.stdout is not None
        announced = b""
        while not announced.endswith(b"\n"):
            chunk = await harness.stdout.receive_some(100)
            assert chunk, announced
            announced += chunk
        assert announced == b"started\n"
        assert await wait_for(lambda: bool(live_processes(marker=marker)), 10)
    finally:
        harness.kill()
        await harness.wait()
    killed_at = time.monotonic()
    try:
        # Nothing of the command (the program, the inner backstop, prlimit) outlives the backstop.
        assert await wait_for(lambda: not _command_processes(marker), 15)
        assert time.monotonic() - killed_at < 3 + 5 + 2  # budget + backstop slack + scheduling
    finally:
        # Known leak (decision 037): under load, the emptied namespace's bwrap pid 1 can stay
        # (no child, nothing of the command) after the harness was killed. Whatever is left is
        # removed here, pass or fail, so that later tests, which count the sandbox uid's
        # processes, never see it (a failure here once cascaded into six others).
        for pid in live_processes(marker=marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signals.SIGKILL)
        await harness.stdout.aclose()


# ---------------------------------------------------------------- escape and abuse


async def test_host_secrets_and_host_processes_are_not_visible(sandbox: Sandbox) -> None:
    for path in (
        "/etc/shadow",
        "/root",
        "/proc/1/root/etc/shadow",
        "/proc/self/root/../../etc/shadow",
        "/home",
    ):
        outcome = await sandbox.run("ls", "-la", path)
        assert outcome.exit_code != 0, path
        assert "No such file or directory" in outcome.stderr
    processes = await sandbox.run("sh", "-c", "ls -d /proc/[0-9]*; tr '\\0' ' ' < /proc/1/cmdline")
    pids = [line for line in processes.stdout.splitlines() if line.startswith("/proc/")]
    assert len(pids) <= 4  # bwrap's init, the shell, ls (and tr): nothing of the host
    assert "/proc/1" in pids
    assert os.path.basename(processes.stdout.splitlines()[-1].split()[0]) == "bwrap"  # the sandbox's init
    assert (await sandbox.run("cat", "/proc/1/root/etc/passwd")).stdout.startswith("root:x:0:0:root:/root:")


async def test_writes_outside_the_workspace_fail_and_leave_the_host_unchanged(sandbox: Sandbox) -> None:
    name = f"harness-probe-{secrets.token_hex(4)}"
    targets = [
        f"/usr/{name}",
        f"/etc/{name}",
        f"/{name}",
        f"/dev/{name}",
        "/etc/passwd",
        "/proc/sys/kernel/hostname",
    ]
    for target in targets:
        outcome = await sandbox.run("sh", "-c", f'echo owned > "{target}"')
        assert outcome.exit_code != 0, target
    inside = await sandbox.run(
        "sh", "-c", f"echo private > /tmp/{name} && echo shared > {name} && cat /tmp/{name}"
    )
    assert inside.stdout == "private\n"
    assert existing([f"/usr/{name}", f"/etc/{name}", f"/{name}", f"/dev/{name}", f"/tmp/{name}"]) == []
    assert "owned" not in await trio.Path("/etc/passwd").read_text()
    assert socket.gethostname() != "owned"
    assert (sandbox.copy / name).read_text() == "shared\n"
    assert (sandbox.copy / name).stat().st_uid == SANDBOX_UID


@needs_python
async def test_the_host_network_and_the_outside_are_unreachable(sandbox: Sandbox) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted: list[object] = []

    async def accept() -> None:
        async with listeners[0]:
            accepted.append(await listeners[0].accept())

    probe = (
        "import socket, sys\n"
        "for address in (('127.0.0.1', int(sys.argv[1])), ('192.0.2.1', 80)):\n"
        "    try:\n"
        "        socket.create_connection(address, timeout=1).close()\n"
        "        print(address[0], 'connected')\n"
        "    except OSError as error:\n"
        "        print(address[0], type(error).__name__, error.errno)\n"
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        outcome = await sandbox.run(PYTHON, "-c", probe, str(port))
        nursery.cancel_scope.cancel()
    assert outcome.stdout.splitlines() == ["127.0.0.1 ConnectionRefusedError 111", "192.0.2.1 OSError 101"]
    assert accepted == []


@needs_python
async def test_a_fork_bomb_stops_at_the_process_limit_and_the_host_is_fine(engine_copy: Path) -> None:
    limits = SandboxLimits(pids=16, kill_grace_ms=200)
    environment = await start(make_spec(engine_copy, limits))
    counter = (
        "import os, time\n"
        "forked = 0\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    except OSError as error:\n"
        "        print(forked, error.errno)\n"
        "        break\n"
        "    forked += 1\n"
    )
    counted = await environment.run(
        CommandSpec(
            argv=(PYTHON, "-c", counter), cwd="", budget_ms=10_000, environment=ENVIRONMENT, signal=None
        )
    )
    # 16 processes of the sandbox's uid in its namespace: bwrap's init, the inner backstop
    # (timeout), python, 13 children.
    assert counted.stdout == "13 11\n"
    bomb = await environment.run(
        CommandSpec(
            argv=("sh", "-c", "f() { f | f & }; f; wait"),
            cwd="",
            budget_ms=2_000,
            environment=ENVIRONMENT,
            signal=None,
        )
    )
    assert bomb.exit_code is not None or bomb.timed_out
    assert "Cannot fork" in bomb.stderr or bomb.timed_out
    assert (await trio.run_process(["true"], check=False)).returncode == 0  # the host still forks
    if ROOT:
        assert live_processes(uid=SANDBOX_UID) == []
    await environment.stop()


@needs_python
async def test_allocating_past_the_memory_limit_fails_inside(engine_copy: Path) -> None:
    limits = SandboxLimits(memory_bytes=128 * 1024 * 1024, kill_grace_ms=200)
    environment = await start(make_spec(engine_copy, limits))
    outcome = await environment.run(
        CommandSpec(
            argv=(PYTHON, "-c", "bytearray(256 * 1024 * 1024)"),
            cwd="",
            budget_ms=10_000,
            environment=ENVIRONMENT,
            signal=None,
        )
    )
    # RLIMIT_AS makes the allocation fail (ENOMEM): Python raises MemoryError and exits 1;
    # nothing is killed, so the exit code is the program's own, not 137.
    assert outcome.exit_code == 1
    assert "MemoryError" in outcome.stderr
    fits = await environment.run(
        CommandSpec(
            argv=(PYTHON, "-c", "print(len(bytearray(32 * 1024 * 1024)))"),
            cwd="",
            budget_ms=10_000,
            environment=ENVIRONMENT,
            signal=None,
        )
    )
    assert fits.stdout == f"{32 * 1024 * 1024}\n"
    await environment.stop()


@needs_python
async def test_processes_together_stay_within_the_memory_limit_where_cgroups_are_available(
    engine_copy: Path,
) -> None:
    limits = SandboxLimits(memory_bytes=192 * 1024 * 1024, kill_grace_ms=200)
    environment = await start(make_spec(engine_copy, limits))
    # Three processes of 96 MiB each: every one is within RLIMIT_AS, together they are not.
    hog = "import time; b = b'x' * (96 * 1024 * 1024); time.sleep(0.6); print('kept')"
    script = f'for i in 1 2 3; do {PYTHON} -c "{hog}" & done; wait'
    outcome = await environment.run(
        CommandSpec(argv=("sh", "-c", script), cwd="", budget_ms=20_000, environment=ENVIRONMENT, signal=None)
    )
    assert outcome.exit_code == 0
    if CGROUPS.get("memory"):
        assert outcome.stdout.count("kept") < 3  # the memory cgroup's OOM killer took at least one
    else:
        assert outcome.stdout.count("kept") == 3  # rlimits alone bound each process, not the sum
    assert our_cgroups() == []
    await environment.stop()


@pytest.mark.slow
@needs_python
@pytest.mark.skipif(not CGROUPS.get("cpu"), reason="no writable cpu cgroup (needs root and cgroup v1)")
async def test_the_cpu_cgroup_throttles_to_the_cpus_limit(engine_copy: Path) -> None:
    limits = SandboxLimits(cpus=0.25, kill_grace_ms=200)
    environment = await start(make_spec(engine_copy, limits))
    spin = "import time\nend = time.monotonic() + 1\nwhile time.monotonic() < end: pass\nprint(time.process_time())"  # noqa: E501
    outcome = await environment.run(
        CommandSpec(argv=(PYTHON, "-c", spin), cwd="", budget_ms=10_000, environment=ENVIRONMENT, signal=None)
    )
    assert float(outcome.stdout) < 0.5  # a quarter of a CPU for one second, give or take a period
    await environment.stop()


async def test_a_file_larger_than_the_file_limit_is_cut_at_the_limit(engine_copy: Path) -> None:
    limits = SandboxLimits(file_bytes=1024 * 1024, kill_grace_ms=200)
    environment = await start(make_spec(engine_copy, limits))

    async def run(*argv: str) -> CommandOutcome:
        command = CommandSpec(argv=argv, cwd="", budget_ms=10_000, environment=ENVIRONMENT, signal=None)
        return await environment.run(command)

    killed = await run("sh", "-c", "exec head -c 3000000 /dev/zero > big")
    assert killed.exit_code == 128 + signals.SIGXFSZ  # killed by SIGXFSZ
    assert (engine_copy / "big").stat().st_size == 1024 * 1024
    if HAS_PYTHON:
        refused = await run(PYTHON, "-c", "open('big2', 'wb').write(b'x' * 3_000_000)")
        assert refused.exit_code == 1  # Python ignores SIGXFSZ: the write fails with EFBIG
        assert "File too large" in refused.stderr
    await environment.stop()


@pytest.mark.slow
async def test_cpu_time_is_bounded_by_the_budget_times_cpus(engine_copy: Path) -> None:
    limits = SandboxLimits(cpus=0.5, kill_grace_ms=200)
    environment = await start(make_spec(engine_copy, limits))
    outcome = await environment.run(
        CommandSpec(
            argv=("sh", "-c", "while :; do :; done"),
            cwd="",
            budget_ms=2_000,
            environment=ENVIRONMENT,
            signal=None,
        )
    )
    # 2 s x 0.5 CPU = 1 s of CPU time, then SIGXCPU; unless the machine is too busy to give it.
    assert outcome.exit_code == 128 + signals.SIGXCPU or outcome.timed_out
    await environment.stop()


@needs_python
async def test_the_seccomp_filter_refuses_what_the_host_allows(sandbox: Sandbox) -> None:
    probe = (
        "import ctypes, os, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(number, *args):\n"
        "    pid = os.fork()\n"  # in a child, so that nothing here changes the prober itself
        "    if pid == 0:\n"
        "        result = libc.syscall(number, *[ctypes.c_ulong(a) for a in args])\n"
        "        os._exit(0 if result != -1 else ctypes.get_errno())\n"
        "    return os.waitpid(pid, 0)[1] >> 8\n"
        "print('ptrace', call(101, 0, 0, 0, 0))\n"  # PTRACE_TRACEME
        "print('personality', call(135, 0x0040000))\n"  # ADDR_NO_RANDOMIZE
        "print('x32', call(0x40000000 + 39))\n"  # getpid through the x32 ABI
        "print('clone3', call(435, 0, 0))\n"
        "print('unshare', call(272, 0x10000000))\n"  # CLONE_NEWUSER
        "print('keyctl', call(250, 0, 0xFFFFFFFD, 0))\n"  # KEYCTL_GET_KEYRING_ID, session keyring
        "print('mount', call(165, 0, 0, 0, 0, 0))\n"
        "thread = threading.Thread(target=lambda: None)\n"
        "thread.start()\n"
        "thread.join()\n"
        "print('fork and threads', call(39))\n"
    )
    inside = await sandbox.run(PYTHON, "-c", probe)
    results = dict(line.rsplit(" ", 1) for line in inside.stdout.splitlines())
    assert results == {
        "ptrace": "1",
        "personality": "1",
        "x32": "1",
        "clone3": "38",
        "unshare": "1",
        "keyctl": "1",
        "mount": "1",
        "fork and threads": "0",
    }
    # The control: on the host (no filter of ours) the same probes succeed, so each EPERM
    # above is the filter's. A host that itself filters (a Docker host refuses keyctl and
    # this personality) still leaves ptrace, which Docker allows.
    host = await trio.run_process([PYTHON, "-c", probe], capture_stdout=True, env=ENVIRONMENT)
    on_host = dict(line.rsplit(" ", 1) for line in host.stdout.decode().splitlines())
    succeeded_on_host = {name for name in ("ptrace", "personality", "keyctl") if on_host[name] == "0"}
    assert succeeded_on_host, f"no probe succeeds on this host, so none tells the filter apart: {on_host}"


async def test_no_capability_no_new_privileges_and_no_new_user_namespace(sandbox: Sandbox) -> None:
    status = (await sandbox.run("cat", "/proc/self/status")).stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[capabilities], 16) == 0, capabilities
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"
    assert fields["Uid"].split()[0] == str(SANDBOX_UID)
    nested = await sandbox.run("unshare", "--user", "--map-root-user", "true")
    assert nested.exit_code != 0
    assert "Operation not permitted" in nested.stderr


# ---------------------------------------------------------------- start


async def test_start_names_a_missing_program_and_refuses_uid_0(copy_directory: Path) -> None:
    with pytest.raises(SandboxError) as caught:
        await BubblewrapEngine(bwrap="/nonexistent/bwrap").start(make_spec(copy_directory))
    assert caught.value.code == SANDBOX_ENGINE_UNAVAILABLE
    assert "bwrap not found: apt-get install bubblewrap" in caught.value.message
    with pytest.raises(SandboxError) as caught:
        await BubblewrapEngine().start(make_spec(copy_directory, uid=0))
    assert caught.value.code == SANDBOX_START_FAILED
    assert "non-root" in caught.value.message


async def test_start_refuses_a_copy_that_is_missing_or_not_the_sandbox_users(engine_copy: Path) -> None:
    with pytest.raises(SandboxError) as caught:
        await BubblewrapEngine().start(make_spec(engine_copy / "missing"))
    assert caught.value.code == SANDBOX_START_FAILED
    if ROOT:
        stranger = engine_copy / "stranger"
        stranger.mkdir()  # owned by root, not by the sandbox's uid
        with pytest.raises(SandboxError) as caught:
            await BubblewrapEngine().start(make_spec(stranger))
        assert caught.value.code == SANDBOX_START_FAILED
        assert "belongs to uid 0" in caught.value.message
    else:
        with pytest.raises(SandboxError) as caught:
            await BubblewrapEngine().start(make_spec(engine_copy, uid=os.getuid() + 1))
        assert caught.value.code == SANDBOX_ENGINE_UNAVAILABLE


@pytest.mark.skipif(not ROOT, reason="needs root to make a directory the sandbox's uid cannot reach")
async def test_start_fails_when_the_sandbox_uid_cannot_reach_the_copy(engine_copy: Path) -> None:
    hidden = engine_copy.parent / "hidden"
    hidden.mkdir(mode=0o700)
    unreachable = hidden / "copy"
    unreachable.mkdir()
    os.chown(unreachable, SANDBOX_UID, SANDBOX_GID)
    with pytest.raises(SandboxError) as caught:
        await BubblewrapEngine().start(make_spec(unreachable))
    assert caught.value.code == SANDBOX_START_FAILED
    assert "Permission denied" in caught.value.message


# ---------------------------------------------------------------- the workspace contract


@pytest.mark.parametrize("check", CHECKS, ids=str)
async def test_sandbox_workspace_conforms_on_bubblewrap(
    check: WorkspaceCheck, tmp_path: Path, engine_copy: Path
) -> None:
    # The copies go next to engine_copy: its parent is reachable by the sandbox's uid.
    await check.run(sandbox_factory(tmp_path, BubblewrapEngine(), engine_copy.parent), LOCAL_PROFILE)


async def test_a_sandbox_workspace_on_bubblewrap_declares_itself_sandboxed(
    tmp_path: Path, engine_copy: Path
) -> None:
    factory = sandbox_factory(tmp_path, BubblewrapEngine(), engine_copy.parent)
    async with factory({"a.txt": b"x"}) as workspace:
        assert isolation_of(workspace) == "sandboxed"
