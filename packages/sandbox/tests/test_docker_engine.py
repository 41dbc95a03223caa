"""The Docker engine through the engine port, against a real daemon and real images.

Escape and abuse attempts run inside a real container; each asserts both what the command
saw and that the host is unchanged. "Nothing left" is checked independently of the engine's
own bookkeeping: ``docker top`` must list no process of the commands' uid.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal as signals
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_sandbox import (
    SANDBOX_DISPOSE_FAILED,
    SANDBOX_ENGINE_UNAVAILABLE,
    SANDBOX_IMAGE_NOT_PINNED,
    SANDBOX_START_FAILED,
    CommandOutcome,
    CommandSpec,
    DockerEngine,
    EnvironmentSpec,
    SandboxError,
    SandboxLimits,
    sweep_leftovers,
)
from harness_sandbox._docker import DockerEnvironment
from harness_sandbox._docker_cli import this_host
from harness_workspace import AbortController, AbortSignal
from harness_workspace.local import (
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    LocalWorkspaceError,
)

PATH = "/usr/local/bin:/usr/bin:/bin"
MakeSpec = Callable[[], EnvironmentSpec]
BUSYBOX = "/bin/busybox"


async def run(
    environment: DockerEnvironment,
    *argv: str,
    cwd: str = "",
    budget_ms: int = 20_000,
    variables: dict[str, str] | None = None,
    signal: AbortSignal | None = None,
) -> CommandOutcome:
    return await environment.run(
        CommandSpec(
            argv=argv,
            cwd=cwd,
            budget_ms=budget_ms,
            environment={"PATH": PATH} if variables is None else variables,
            signal=signal,
        )
    )


async def docker(*args: str) -> str:
    completed = await trio.run_process(["docker", *args], capture_stdout=True, capture_stderr=True)
    return completed.stdout.decode()


async def command_processes(environment: DockerEnvironment) -> list[str]:
    """Live processes of the commands' uid in the container, as ``docker top`` lists them."""
    uid = str(environment.spec.uid)
    listing = await docker("top", environment.container, "-o", "uid,stat,pid,args")
    return [
        line
        for line in listing.splitlines()[1:]
        if line.split()[0] == uid and not line.split()[1].startswith("Z")
    ]


async def wait_until_a_command_runs(environment: DockerEnvironment) -> None:
    while not await command_processes(environment):  # noqa: ASYNC110
        await trio.sleep(0.05)


def exists(path: str) -> bool:
    return os.path.lexists(path)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


async def labelled_containers(*filters: str) -> list[str]:
    """Names of the containers, running or not, with the sandbox label and every other filter."""
    options = [f"--filter={one}" for one in ("label=io.harness.sandbox=1", *filters)]
    return (await docker("ps", "--all", *options, "--format", "{{.Names}}")).split()


# -- commands -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_exit_codes_come_through(busybox_environment: DockerEnvironment) -> None:
    assert (await run(busybox_environment, "true")).exit_code == 0
    assert (await run(busybox_environment, "false")).exit_code == 1
    assert (await run(busybox_environment, "sh", "-c", "exit 42")).exit_code == 42
    # A command's own 126 and 127 are results, not start failures.
    assert (await run(busybox_environment, "sh", "-c", "exit 126")).exit_code == 126
    assert (await run(busybox_environment, "sh", "-c", "exit 127")).exit_code == 127
    assert (await run(busybox_environment, "sh", "-c", "kill -9 $$")).exit_code == 137


async def test_argv_reaches_the_program_unchanged(busybox_environment: DockerEnvironment) -> None:
    arguments = ("a b", '"double"', "'single'", "$HOME", "*", "", "--user=0", "-e", "x;y|z", "é ☃")
    outcome = await run(busybox_environment, "printf", "%s\\0", *arguments)
    assert outcome.exit_code == 0
    assert tuple(outcome.stdout.split("\0")[:-1]) == arguments


async def test_a_program_named_like_a_docker_option_is_a_program(
    busybox_environment: DockerEnvironment,
) -> None:
    for program in ("--privileged", "--user=0", "-u"):
        with pytest.raises(LocalWorkspaceError) as caught:
            await run(busybox_environment, program, "id")
        assert caught.value.code == WORKSPACE_COMMAND_NOT_FOUND


_ARGUMENT_CHARACTERS = st.characters(blacklist_categories=["Cs"], blacklist_characters="\0")


@pytest.fixture
def environment_outside_trio(docker_engine: DockerEngine, make_spec: MakeSpec) -> Iterator[DockerEnvironment]:
    """An environment for a synchronous test that runs each hypothesis example in ``trio.run``."""
    environment = trio.run(docker_engine.start, make_spec())
    yield environment
    trio.run(environment.stop)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    arguments=st.lists(st.text(_ARGUMENT_CHARACTERS), max_size=5),
    value=st.text(_ARGUMENT_CHARACTERS),
)
@pytest.mark.slow
def test_any_argv_and_variable_value_arrive_intact(
    environment_outside_trio: DockerEnvironment, arguments: list[str], value: str
) -> None:
    # One environment serves every example (starting one per example would cost 0.4 s each).
    script = 'for argument; do printf "%s\\0" "$argument"; done; printf "%s" "$VALUE"'
    outcome = trio.run(
        functools.partial(
            run,
            environment_outside_trio,
            "sh",
            "-c",
            script,
            "sh",
            *arguments,
            variables={"PATH": PATH, "VALUE": value},
        )
    )
    *received, received_value = outcome.stdout.split("\0")
    assert received == arguments
    assert received_value == value


async def test_cwd_is_below_the_workspace_and_writes_land_in_the_copy(
    busybox_environment: DockerEnvironment, started: list[DockerEnvironment]
) -> None:
    copy = Path(busybox_environment.spec.copy_path)
    assert (await run(busybox_environment, "mkdir", "-p", "sub/deeper")).exit_code == 0
    outcome = await run(busybox_environment, "sh", "-c", "pwd; echo made > here.txt", cwd="sub/deeper")
    assert outcome.stdout == "/workspace/sub/deeper\n"
    assert (copy / "sub" / "deeper" / "here.txt").read_text() == "made\n"
    assert (await run(busybox_environment, "pwd")).stdout == "/workspace\n"


async def test_the_command_sees_only_the_variables_it_was_given(
    busybox_environment: DockerEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_TEST_HOST_SECRET", "must-not-leak")
    given_variables = {
        "PATH": PATH,
        "HOME": "/nonexistent",
        "LANG": "C.UTF-8",
        "MULTI": "line one\nline two",
        "SPACES": "  padded  ",
        "EMPTY": "",
        "LD_PRELOAD": "/workspace/not-for-the-host.so",
    }
    outcome = await run(busybox_environment, "env", "-0", variables=given_variables)
    seen = dict(entry.split("=", 1) for entry in outcome.stdout.split("\0") if entry)
    # Docker always sets HOSTNAME (the container's id); nothing else is added.
    assert seen.pop("HOSTNAME")
    assert seen == given_variables
    assert "must-not-leak" not in outcome.stdout


async def test_a_missing_program_or_interpreter_is_not_found(busybox_environment: DockerEnvironment) -> None:
    copy = Path(busybox_environment.spec.copy_path)
    script = copy / "script.sh"
    script.write_text("#!/nonexistent/interpreter\necho never\n")
    script.chmod(0o755)
    for argv in (("no-such-program",), ("/workspace/absent",), ("./script.sh",), ("/workspace/script.sh",)):
        with pytest.raises(LocalWorkspaceError) as caught:
            await run(busybox_environment, *argv)
        assert caught.value.code == WORKSPACE_COMMAND_NOT_FOUND, argv
        assert caught.value.operation == "execute"


async def test_a_program_that_cannot_be_executed_fails_to_start(
    busybox_environment: DockerEnvironment,
) -> None:
    copy = Path(busybox_environment.spec.copy_path)
    (copy / "plain.txt").write_text("not a program\n")
    garbage = copy / "garbage"
    garbage.write_bytes(b"\x00\x01\x02 not an executable format")
    garbage.chmod(0o755)
    for argv in (("/workspace/plain.txt",), ("./garbage",)):
        with pytest.raises(LocalWorkspaceError) as caught:
            await run(busybox_environment, *argv)
        assert caught.value.code == WORKSPACE_COMMAND_FAILED_TO_START, argv
    for bad in (("ok\0no",), ()):
        with pytest.raises(LocalWorkspaceError) as caught:
            await run(busybox_environment, *bad)
        assert caught.value.code == WORKSPACE_COMMAND_FAILED_TO_START
    with pytest.raises(LocalWorkspaceError) as caught:
        await run(busybox_environment, "true", variables={"A=B": "x"})
    assert caught.value.code == WORKSPACE_COMMAND_FAILED_TO_START


async def test_output_keeps_head_and_tail(busybox_environment: DockerEnvironment) -> None:
    outcome = await run(busybox_environment, "sh", "-c", "seq 1 20000; seq 1 3000 >&2")
    assert outcome.exit_code == 0
    assert outcome.stdout.startswith("1\n2\n3\n")
    assert outcome.stdout.endswith("19999\n20000\n")
    assert "[stdout truncated:" in outcome.stdout
    assert len(outcome.stdout.encode()) < busybox_environment.spec.limits.max_output_bytes + 200
    assert outcome.stderr.startswith("1\n2\n")
    assert outcome.stderr.endswith("3000\n")


# -- stopping -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_timeout_stops_the_command_and_leaves_nothing(busybox_environment: DockerEnvironment) -> None:
    started_at = time.monotonic()
    outcome = await run(busybox_environment, "sleep", "30", budget_ms=500)
    assert outcome.timed_out
    assert outcome.exit_code is None
    assert not outcome.aborted
    assert time.monotonic() - started_at < 10
    assert await command_processes(busybox_environment) == []


@pytest.mark.slow
async def test_a_command_that_ignores_sigterm_is_still_stopped(
    busybox_environment: DockerEnvironment,
) -> None:
    script = "trap '' TERM; (trap '' TERM; sleep 60) & sleep 60; wait"
    outcome = await run(busybox_environment, "sh", "-c", script, budget_ms=500)
    assert outcome.timed_out
    assert await command_processes(busybox_environment) == []
    # The environment is fine afterwards.
    assert (await run(busybox_environment, "true")).exit_code == 0


@pytest.mark.slow
async def test_an_abort_stops_the_command_and_leaves_nothing(busybox_environment: DockerEnvironment) -> None:
    controller = AbortController()
    outcomes: list[CommandOutcome] = []

    async def command() -> None:
        outcomes.append(
            await run(busybox_environment, "sh", "-c", "sleep 60 & sleep 60", signal=controller.signal)
        )

    started_at = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(command)
        await wait_until_a_command_runs(busybox_environment)
        controller.abort("user")
    assert outcomes[0].aborted
    assert not outcomes[0].timed_out
    assert outcomes[0].exit_code is None
    assert time.monotonic() - started_at < 15
    assert await command_processes(busybox_environment) == []


def slow_daemon_client(directory: Path) -> str:
    """A ``docker`` in front of a daemon that is slow to start the command ``sleep 100``.

    As with the real daemon, a request outlives its client: the real client runs in a session
    of its own (its output through files, so killing this script closes the pipes at once),
    and the exec of ``sleep 100`` reaches the daemon only 0.3 s later, as it may on a loaded
    machine. Killing this script, or its process group, stops neither.
    """
    script = directory / "docker"
    real = shutil.which("docker")
    script.write_text(
        "#!/bin/sh\n"
        "out=$(mktemp) err=$(mktemp)\n"
        'case "$*" in *" sleep 100") delay=0.3 ;; *) delay=0 ;; esac\n'
        f'setsid -w sh -c \'sleep "$0"; exec {real} "$@"\' "$delay" "$@" >"$out" 2>"$err" &\n'
        "wait $!\n"
        "status=$?\n"
        'cat "$out"; cat "$err" >&2; rm -f "$out" "$err"\n'
        'exit "$status"\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.slow
async def test_a_command_stopped_while_docker_is_still_starting_it_leaves_nothing(
    busybox_image: str, make_spec: MakeSpec, tmp_path: Path, started: list[DockerEnvironment]
) -> None:
    environment = await DockerEngine(busybox_image, docker=slow_daemon_client(tmp_path)).start(make_spec())
    started.append(environment)
    # The budget ends before the daemon has started the command.
    for budget_ms in (50, 150):
        outcome = await run(environment, "sleep", "100", budget_ms=budget_ms)
        assert outcome.timed_out, budget_ms
        await trio.sleep(0.5)  # Long enough for the start request to land.
        assert await command_processes(environment) == [], budget_ms


@pytest.mark.slow
async def test_concurrent_commands_of_one_environment_do_not_kill_each_other(
    busybox_environment: DockerEnvironment,
) -> None:
    outcomes: list[CommandOutcome] = []

    async def command(*argv: str) -> None:
        outcomes.append(await run(busybox_environment, *argv))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(command, "sh", "-c", "sleep 1; echo slow")
        nursery.start_soon(command, "sh", "-c", "sleep 100 >/dev/null 2>&1 & echo quick")
    assert sorted((outcome.exit_code, outcome.stdout) for outcome in outcomes) == [
        (0, "quick\n"),
        (0, "slow\n"),
    ]
    assert await command_processes(busybox_environment) == []


async def test_an_already_aborted_signal_starts_nothing(busybox_environment: DockerEnvironment) -> None:
    copy = Path(busybox_environment.spec.copy_path)
    outcome = await run(busybox_environment, "touch", "ran", signal=AbortSignal.aborted_with("early"))
    assert outcome.aborted
    assert not (copy / "ran").exists()


@pytest.mark.slow
async def test_a_cancelled_caller_leaves_nothing_running(busybox_environment: DockerEnvironment) -> None:
    with trio.move_on_after(1):
        await run(busybox_environment, "sleep", "60")
    assert await command_processes(busybox_environment) == []
    assert (await run(busybox_environment, "true")).exit_code == 0


async def test_a_background_process_without_output_is_gone_on_return(
    busybox_environment: DockerEnvironment,
) -> None:
    script = "sleep 100 >/dev/null 2>&1 & setsid sleep 100 </dev/null >/dev/null 2>&1 &"
    outcome = await run(busybox_environment, "sh", "-c", script)
    assert outcome.exit_code == 0
    assert await command_processes(busybox_environment) == []


@pytest.mark.slow
async def test_a_background_process_holding_the_output_is_gone_on_return(
    busybox_environment: DockerEnvironment,
) -> None:
    # Docker waits up to 2 s for the output streams to close after the command exits.
    outcome = await run(busybox_environment, "sh", "-c", "setsid sleep 100 & echo left")
    assert outcome.exit_code == 0
    assert outcome.stdout == "left\n"
    assert await command_processes(busybox_environment) == []


@pytest.mark.slow
async def test_pid_1_is_out_of_the_commands_reach(busybox_environment: DockerEnvironment) -> None:
    for script in ("kill -9 1", "kill -TERM 1", "kill -9 -1", "kill -STOP -1"):
        await run(busybox_environment, "sh", "-c", script)
    assert (await run(busybox_environment, "echo", "alive")).stdout == "alive\n"


async def test_commands_run_unprivileged_within_the_limits(busybox_environment: DockerEnvironment) -> None:
    spec = busybox_environment.spec
    status = (await run(busybox_environment, "cat", "/proc/self/status")).stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split() == [str(spec.uid)] * 4
    assert fields["Gid"].split() == [str(spec.gid)] * 4
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[capabilities], 16) == 0, capabilities
    assert fields["NoNewPrivs"] == "1"
    mounts = (await run(busybox_environment, "cat", "/proc/mounts")).stdout.splitlines()
    root = next(line.split() for line in mounts if line.split()[1] == "/")
    assert "ro" in root[3].split(",")
    limits = await run(
        busybox_environment,
        "sh",
        "-c",
        "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max"
        " /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null;"
        " ulimit -n",
    )
    assert limits.stdout.split() == [
        str(spec.limits.pids),
        str(spec.limits.memory_bytes),
        str(spec.limits.open_files),
    ]


# -- escape and abuse ---------------------------------------------------------------------


@pytest.mark.slow
async def test_host_secrets_are_not_readable(busybox_environment: DockerEnvironment) -> None:
    marker = Path.home() / f".harness-sandbox-marker-{uuid.uuid4().hex}"
    secret = f"host-secret-{uuid.uuid4().hex}"
    marker.write_text(secret)
    try:
        for argv in (
            ("cat", "/etc/shadow"),
            ("cat", f"/root/{marker.name}"),
            ("cat", str(marker)),
            ("cat", f"/proc/1/root{marker}"),
            ("ls", "-a", "/proc/1/root/"),
            ("ls", "-a", "/root", str(Path.home())),
        ):
            outcome = await run(busybox_environment, *argv)
            assert outcome.exit_code != 0, argv
            assert secret not in outcome.stdout + outcome.stderr
            assert marker.name not in outcome.stdout
        host_shadow = read_text("/etc/shadow") if os.access("/etc/shadow", os.R_OK) else ""
        shown = (await run(busybox_environment, "cat", "/etc/shadow")).stdout
        assert not any(line in shown for line in host_shadow.splitlines() if line)
        # PID 1 is the container's own init, not the host's.
        init = await run(busybox_environment, "cat", "/proc/1/cmdline")
        assert init.stdout.split("\0")[:2] == ["/sbin/docker-init", "--"]
    finally:
        marker.unlink()


@pytest.mark.slow
async def test_nothing_outside_the_workspace_is_writable(busybox_environment: DockerEnvironment) -> None:
    name = f"harness-escape-{uuid.uuid4().hex}"
    for target in (f"/{name}", f"/etc/{name}", f"/usr/{name}", f"/workspace/../{name}", f"/root/{name}"):
        outcome = await run(busybox_environment, "sh", "-c", 'echo x > "$1"', "sh", target)
        assert outcome.exit_code != 0, target
    assert not exists(f"/{name}")
    assert not exists(f"/etc/{name}")
    # The workspace and the private /tmp are writable; /tmp is the container's own.
    assert (
        await run(busybox_environment, "sh", "-c", f"echo x > /tmp/{name} && echo x > {name}")
    ).exit_code == 0
    assert not exists(f"/tmp/{name}")
    assert read_text(os.path.join(busybox_environment.spec.copy_path, name)) == "x\n"


@pytest.mark.slow
async def test_no_network_reaches_the_host_or_beyond(busybox_environment: DockerEnvironment) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted: list[trio.SocketStream] = []

    async def accept() -> None:
        while True:
            accepted.append(await listeners[0].accept())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        for host in ("127.0.0.1", "172.17.0.1", "192.0.2.1"):
            outcome = await run(busybox_environment, "nc", "-w", "2", host, str(port), budget_ms=10_000)
            assert outcome.exit_code != 0, host
        interfaces = await run(busybox_environment, "cat", "/proc/net/dev")
        assert [line.split(":")[0].strip() for line in interfaces.stdout.splitlines()[2:]] == ["lo"]
        await trio.sleep(0.1)
        assert accepted == []
        # Negative control: the listener does accept a connection from the host.
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await trio.sleep(0.1)
        assert len(accepted) == 1
        await stream.aclose()
        nursery.cancel_scope.cancel()
    for closing in (*accepted, *listeners):
        await closing.aclose()


@pytest.mark.slow
async def test_a_fork_bomb_stops_at_the_pids_limit_and_the_host_is_fine(
    busybox_environment: DockerEnvironment,
) -> None:
    outcome = await run(busybox_environment, "sh", "-c", "while :; do sleep 100 & done", budget_ms=5_000)
    assert "can't fork" in outcome.stderr
    classic = await run(busybox_environment, "sh", "-c", "f() { f | f & }; f; sleep 1", budget_ms=5_000)
    assert "can't fork" in classic.stderr
    assert await command_processes(busybox_environment) == []
    host = await trio.run_process(["true"])
    assert host.returncode == 0
    assert (await run(busybox_environment, "true")).exit_code == 0


@pytest.mark.slow
async def test_allocating_past_the_memory_limit_is_killed_with_137(
    busybox_environment: DockerEnvironment,
) -> None:
    hog = 'x=$(head -c 200000000 /dev/zero | tr "\\0" x); echo "${#x}"'
    outcome = await run(busybox_environment, "sh", "-c", hog)
    assert outcome.exit_code == 137
    assert (await run(busybox_environment, "true")).exit_code == 0


async def test_a_file_past_the_file_size_limit_is_refused(busybox_environment: DockerEnvironment) -> None:
    outcome = await run(busybox_environment, "sh", "-c", "head -c 2000000 /dev/zero > big")
    assert outcome.exit_code == 128 + signals.SIGXFSZ
    assert (
        Path(busybox_environment.spec.copy_path) / "big"
    ).stat().st_size == busybox_environment.spec.limits.file_bytes


@pytest.mark.slow
async def test_the_default_image_runs_python_and_git_and_enforces_memory(
    debian_image: str, make_spec: MakeSpec, started: list[DockerEnvironment]
) -> None:
    environment = await DockerEngine(debian_image).start(make_spec())
    started.append(environment)
    python = await run(environment, "python3", "-c", "import sys; print(sys.version_info[0])")
    assert python.stdout == "3\n"
    assert (await run(environment, "git", "--version")).stdout.startswith("git version")
    # A directory every user may write to, were the root file system writable.
    assert (await run(environment, "touch", "/var/tmp/escape")).exit_code == 1
    shadow = await run(environment, "cat", "/etc/shadow")
    assert shadow.exit_code == 1
    assert "Permission denied" in shadow.stderr
    hog = await run(environment, "python3", "-c", "b = b'x' * (200 * 2**20)")
    assert hog.exit_code == 137
    assert await command_processes(environment) == []


# -- start, stop and sweep ----------------------------------------------------------------


async def test_a_floating_tag_is_refused_before_docker_is_asked(make_spec: MakeSpec) -> None:
    spec = make_spec()
    for image in ("busybox", "busybox:latest", "sha256:abc", "x@sha256:" + "A" * 64, "sha256:" + "0" * 65):
        with pytest.raises(SandboxError) as caught:
            await DockerEngine(image, docker="/nonexistent/docker").start(spec)
        assert caught.value.code == SANDBOX_IMAGE_NOT_PINNED
        assert caught.value.operation == "create"


_SPEC = EnvironmentSpec(
    name="harness-sbx-never-started", copy_path="/", uid=1000, gid=1000, limits=SandboxLimits(), owner="h:1"
)


async def _pin_check(image: str) -> bool:
    """Whether ``image`` passes the pin check (the CLI is looked for only after it)."""
    with pytest.raises(SandboxError) as caught:
        await DockerEngine(image, docker="/nonexistent/docker").start(_SPEC)
    if caught.value.code == SANDBOX_IMAGE_NOT_PINNED:
        return False
    assert caught.value.code == SANDBOX_ENGINE_UNAVAILABLE
    return True


_HEX = "0123456789abcdef"


@given(
    name=st.one_of(
        st.just(""), st.from_regex(r"[a-z0-9][a-z0-9._/-]{0,30}(:[a-z0-9._-]{1,10})?@", fullmatch=True)
    ),
    digest=st.text(_HEX, min_size=64, max_size=64),
)
async def test_every_digest_passes_the_pin_check(name: str, digest: str) -> None:
    assert await _pin_check(f"{name}sha256:{digest}")


@given(st.text(max_size=90))
async def test_nothing_but_a_digest_passes_the_pin_check(image: str) -> None:
    if await _pin_check(image):
        assert image[-71:-64] == "sha256:"
        assert all(character in _HEX for character in image[-64:])
        assert not any(character.isspace() for character in image)


async def test_a_floating_tag_runs_when_the_operator_allows_it(
    busybox_image: str, make_spec: MakeSpec, started: list[DockerEnvironment]
) -> None:
    tags = (await docker("image", "inspect", "--format", '{{join .RepoTags " "}}', busybox_image)).split()
    engine = DockerEngine(tags[0], allow_floating_tag=True)
    environment = await engine.start(make_spec())
    started.append(environment)
    assert (await run(environment, "true")).exit_code == 0


async def test_an_unavailable_engine_says_what_is_missing(
    busybox_image: str, make_spec: MakeSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_spec()
    with pytest.raises(SandboxError) as no_cli:
        await DockerEngine(busybox_image, docker="no-such-docker-cli").start(spec)
    assert no_cli.value.code == SANDBOX_ENGINE_UNAVAILABLE
    assert "CLI 'no-such-docker-cli' was not found" in no_cli.value.message
    for absent in ("sha256:" + "0" * 64, "harness-sandbox@" + busybox_image):
        with pytest.raises(SandboxError) as no_image:
            await DockerEngine(absent).start(spec)
        assert no_image.value.code == SANDBOX_ENGINE_UNAVAILABLE
        assert "not present locally" in no_image.value.message
        assert "never pulls" in no_image.value.message
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(SandboxError) as no_daemon:
        await DockerEngine(busybox_image).start(spec)
    assert no_daemon.value.code == SANDBOX_ENGINE_UNAVAILABLE
    assert "daemon is not reachable" in no_daemon.value.message
    monkeypatch.delenv("DOCKER_HOST")
    assert await labelled_containers(f"name={spec.name}") == []


def import_sleep_only_image(root: Path) -> str:
    """An image with ``/bin/sleep`` and nothing else (busybox acts as the applet it is named)."""
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "sleep")
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    imported = subprocess.run(
        ["docker", "import", "-"],
        stdin=tar.stdout,
        capture_output=True,
        text=True,
        check=True,
    )
    assert tar.stdout is not None
    tar.stdout.close()
    assert tar.wait() == 0
    return imported.stdout.strip()


async def test_an_image_without_a_shell_is_refused_and_nothing_is_left(
    docker_available: None, make_spec: MakeSpec, tmp_path: Path
) -> None:
    image = import_sleep_only_image(tmp_path / "rootfs")
    try:
        spec = make_spec()
        with pytest.raises(SandboxError) as caught:
            await DockerEngine(image).start(spec)
        assert caught.value.code == SANDBOX_START_FAILED
        assert "/bin/sh" in caught.value.message
        assert await labelled_containers(f"name={spec.name}") == []
    finally:
        await docker("image", "rm", "--force", image)


async def test_a_copy_path_that_would_change_the_mount_is_refused(
    docker_engine: DockerEngine, make_spec: MakeSpec, tmp_path: Path
) -> None:
    # Both exist: without the check, `--mount` would read "src=<x>,dst=/etc,dst=/workspace".
    (tmp_path / "x").mkdir()
    sneaky = tmp_path / "x,dst=/etc"
    sneaky.mkdir(parents=True)
    for path in (sneaky, Path("relative"), tmp_path / "missing"):
        spec = make_spec()
        with pytest.raises(SandboxError) as caught:
            await docker_engine.start(dataclasses.replace(spec, copy_path=str(path)))
        assert caught.value.code == SANDBOX_START_FAILED
        assert await labelled_containers(f"name={spec.name}") == []


async def test_commands_never_run_as_root(docker_engine: DockerEngine, make_spec: MakeSpec) -> None:
    for ids in ({"uid": 0}, {"gid": 0}, {"uid": -1}):
        spec = dataclasses.replace(make_spec(), **ids)
        with pytest.raises(SandboxError) as caught:
            await docker_engine.start(spec)
        assert caught.value.code == SANDBOX_START_FAILED
        assert await labelled_containers(f"name={spec.name}") == []


async def test_a_name_in_use_fails_to_start_and_spares_the_other_container(
    docker_engine: DockerEngine, busybox_environment: DockerEnvironment, make_spec: MakeSpec
) -> None:
    spec = make_spec()
    clash = dataclasses.replace(spec, name=busybox_environment.container)
    with pytest.raises(SandboxError) as caught:
        await docker_engine.start(clash)
    assert caught.value.code == SANDBOX_START_FAILED
    assert (await run(busybox_environment, "true")).exit_code == 0


async def test_stop_removes_the_container_and_is_idempotent(
    docker_engine: DockerEngine, make_spec: MakeSpec
) -> None:
    environment = await docker_engine.start(make_spec())
    assert await labelled_containers(f"name={environment.container}") == [environment.container]
    await environment.stop()
    assert await labelled_containers(f"name={environment.container}") == []
    await environment.stop()
    with pytest.raises(SandboxError) as caught:
        await run(environment, "true")
    assert caught.value.code == SANDBOX_START_FAILED


async def test_stop_during_a_command_ends_it(docker_engine: DockerEngine, make_spec: MakeSpec) -> None:
    environment = await docker_engine.start(make_spec())
    failures: list[SandboxError] = []

    async def command() -> None:
        try:
            await run(environment, "sleep", "60")
        except SandboxError as error:
            failures.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(command)
        await wait_until_a_command_runs(environment)
        await environment.stop()
    assert [failure.code for failure in failures] == [SANDBOX_START_FAILED]
    assert await labelled_containers(f"name={environment.container}") == []


async def test_an_environment_removed_behind_its_back_is_reported_gone(
    busybox_environment: DockerEnvironment,
) -> None:
    await docker("rm", "--force", busybox_environment.container)
    with pytest.raises(SandboxError) as caught:
        await run(busybox_environment, "true")
    assert caught.value.code == SANDBOX_START_FAILED
    assert "gone" in caught.value.message


async def test_a_failed_removal_is_reported(
    busybox_environment: DockerEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError) as caught:
        await busybox_environment.stop()
    assert caught.value.code == SANDBOX_DISPOSE_FAILED
    assert busybox_environment.container in caught.value.message
    monkeypatch.delenv("DOCKER_HOST")
    await busybox_environment.stop()
    assert await labelled_containers(f"name={busybox_environment.container}") == []


async def test_the_sweep_removes_only_containers_of_dead_owners_on_this_host(
    busybox_image: str, busybox_environment: DockerEnvironment
) -> None:
    # A pid that was alive a moment ago and is gone now.
    shell = await trio.run_process(["sh", "-c", "echo $$"], capture_stdout=True)
    dead_pid = shell.stdout.decode().strip()
    names = {
        "dead": f"harness-sbx-test-dead-{uuid.uuid4().hex[:8]}",
        "elsewhere": f"harness-sbx-test-elsewhere-{uuid.uuid4().hex[:8]}",
        "unreadable": f"harness-sbx-test-unreadable-{uuid.uuid4().hex[:8]}",
    }
    owners = {"dead": f"{this_host()}:{dead_pid}", "elsewhere": "another-host:1", "unreadable": "no-pid-here"}
    for key, name in names.items():
        await docker(
            "create",
            f"--name={name}",
            "--label=io.harness.sandbox=1",
            f"--label=io.harness.sandbox.owner={owners[key]}",
            busybox_image,
            "sleep",
            "1",
        )
    try:
        removed = await sweep_leftovers()
        assert names["dead"] in removed
        remaining = await labelled_containers()
        assert names["dead"] not in remaining
        assert names["elsewhere"] in remaining
        assert names["unreadable"] in remaining
        assert busybox_environment.container in remaining
        assert (await run(busybox_environment, "true")).exit_code == 0
    finally:
        await docker("rm", "--force", names["elsewhere"], names["unreadable"])


_CHILD = """
import os, sys, trio
from harness_sandbox import CommandSpec, DockerEngine, EnvironmentSpec, SandboxLimits
from harness_sandbox._docker_cli import this_host

async def main() -> None:
    image, copy, name, uid, gid = sys.argv[1:6]
    spec = EnvironmentSpec(name=name, copy_path=copy, uid=int(uid), gid=int(gid),
                           limits=SandboxLimits(), owner=f"{this_host()}:{os.getpid()}")
    environment = await DockerEngine(image).start(spec)
    print("started", flush=True)
    await environment.run(CommandSpec(argv=("sleep", "100"), cwd="", budget_ms=100_000,
                                      environment={}, signal=None))

trio.run(main)
"""


@pytest.mark.slow
async def test_a_container_of_a_killed_owner_is_swept_by_the_next_engine(
    busybox_image: str, make_spec: MakeSpec, started: list[DockerEnvironment]
) -> None:
    spec = make_spec()
    child = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-c",
            _CHILD,
            busybox_image,
            spec.copy_path,
            spec.name,
            str(spec.uid),
            str(spec.gid),
        ],
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    said = b""
    while not said.endswith(b"\n"):
        chunk = await child.stdout.receive_some(100)
        assert chunk, said
        said += chunk
    assert said == b"started\n"
    owner = f"{this_host()}:{child.pid}"
    # Kill the owner while its command runs inside.
    while "sleep 100" not in await docker("top", spec.name):  # noqa: ASYNC110
        await trio.sleep(0.05)
    child.kill()
    await child.wait()
    await child.stdout.aclose()
    assert await labelled_containers(f"label=io.harness.sandbox.owner={owner}") == [spec.name]
    # A fresh engine sweeps before its first start.
    environment = await DockerEngine(busybox_image).start(make_spec())
    started.append(environment)
    assert await labelled_containers(f"label=io.harness.sandbox.owner={owner}") == []
    assert environment.container in await labelled_containers()
