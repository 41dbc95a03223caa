"""The Docker engine: one long-lived hardened container per workspace, commands by ``docker exec``.

The container (``docker create`` + ``docker start``) has no network, a read-only root, no
capabilities, ``no-new-privileges``, the workspace's memory, pids, CPU, open-file and
file-size limits, a 64 MiB ``/tmp`` and the copy bound at ``/workspace``. Its PID 1 is
Docker's ``--init`` (tini) running ``sleep infinity``, both as the user (and group) one
above the commands' (``uid + 1``; a ``SandboxWorkspace`` leases both): tini reaps every
orphan, so a killed leftover never lingers as a zombie that counts against the pids limit,
and a command cannot signal PID 1 or its sleeper, so it cannot take its own environment down.

Every command runs as ``docker exec --user uid:gid`` with argv passed through unchanged.
Killing the ``docker exec`` client does not kill what it started inside (Docker has no
"kill exec"), and a start request the client already sent is carried out even if the client
is gone. So a timeout, an abort or a cancelled caller stops the command *from inside*:
``kill -TERM -1`` and ``kill -CONT -1`` as the commands' user, the workspace's
``kill_grace_ms``, then ``kill -KILL -1`` rounds until the client returns, which it does
only once its process has ended. ``kill(-1)`` reaches every process that user may signal
except the caller itself and PID 1, that is every process a command could have started,
however it detached. Then, after *every* command, the engine asks the daemon for the
container's processes (``docker top``, one cheap call) and kills whatever besides PID 1 and
its sleeper is still there (a background process). Commands of one environment are
serialised because ``kill(-1)`` would reach the others. If processes survive three rounds
(the pids limit can leave no room for the kill helper), the container is restarted
(``docker restart --time 0``: PID 1 dies and the kernel kills the whole PID namespace;
``/tmp`` is emptied, the copy is kept), and if that fails the environment is reported gone.

What the image must have: ``/bin/sh`` (its ``kill`` builtin is the helper) and ``sleep``
that accepts ``infinity`` (coreutils and busybox both do); start checks both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

import trio

from harness_sandbox._docker_cli import OWNER_LABEL, Completed, DockerCli, connect, sweep_with
from harness_sandbox._engine import LABEL, WORKSPACE_MOUNT, CommandOutcome, CommandSpec, EnvironmentSpec
from harness_sandbox._errors import (
    SANDBOX_DISPOSE_FAILED,
    SANDBOX_ENGINE_UNAVAILABLE,
    SANDBOX_IMAGE_NOT_PINNED,
    SANDBOX_START_FAILED,
    SandboxError,
)
from harness_sandbox._supervise import HostRun, run_host_process
from harness_workspace.local import (
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    LocalWorkspaceError,
)

__all__ = ["DockerEngine", "DockerEnvironment"]

_PINNED: Final = re.compile(r"(?:[^\s@]+@)?sha256:[0-9a-f]{64}")
_PID1: Final = ("sleep", "infinity")
_TMP_MOUNT: Final = "/tmp:rw,nosuid,nodev,size=64m"
_KILL_ROUNDS: Final = 3
_POLL_SECONDS: Final = 0.05
_READY_SECONDS: Final = 10.0
_BACKSTOP_MS: Final = 30_000
# Exec failures as the daemon and runc report them. Status 126 with this prefix: the
# program could not be started at all; status 1 with runc's own line: execve failed.
_EXEC_FAILED: Final = "OCI runtime exec failed: "
_NOT_FOUND: Final = re.compile(
    r'exec: "[^\n]*": (?:executable file not found|stat [^\n]*: no such file or directory)'
)
_RUNC_EXEC: Final = re.compile(r"exec (?P<path>[^\n]+): (?P<error>[a-z ]+)\n?")


class DockerEngine:
    """The Docker engine, through the ``docker`` CLI; never pulls, never falls back.

    Args:
        image: The image, named by digest: ``sha256:<id>`` (a local image id, the only digest
            an image built with ``docker import`` has) or ``name@sha256:<digest>`` (a
            registry manifest digest). It must already be present locally.
        allow_floating_tag: Accept any other reference (``name:tag``); the operator's choice.
        docker: The Docker CLI, a name on ``PATH`` or a path.
    """

    def __init__(self, image: str, *, allow_floating_tag: bool = False, docker: str = "docker") -> None:
        self._image = image
        self._allow_floating_tag = allow_floating_tag
        self._docker = docker
        self._swept = False
        self._sweep_lock = trio.Lock()

    @property
    def name(self) -> str:
        """``"docker"``."""
        return "docker"

    async def start(self, spec: EnvironmentSpec) -> DockerEnvironment:
        """Start one container for ``spec``; the first start sweeps dead owners' leftovers first.

        Raises:
            SandboxError: ``SANDBOX_IMAGE_NOT_PINNED``; ``SANDBOX_ENGINE_UNAVAILABLE`` (no CLI, no
                daemon, image not present locally); ``SANDBOX_START_FAILED``;
                ``SANDBOX_DISPOSE_FAILED`` from the sweep.
        """
        if not self._allow_floating_tag and _PINNED.fullmatch(self._image) is None:
            raise SandboxError(
                SANDBOX_IMAGE_NOT_PINNED,
                f"image {self._image!r} is not named by digest (sha256:<id> or name@sha256:<digest>)",
                "create",
            )
        _check_spec(spec)
        cli = await connect(self._docker, "create")
        image_id = await _local_image_id(cli, self._image)
        async with self._sweep_lock:
            if not self._swept:
                await sweep_with(cli)
                self._swept = True
        return await DockerEnvironment.create(cli, spec, image_id)


class DockerEnvironment:
    """One started container; made by :meth:`DockerEngine.start`."""

    def __init__(self, cli: DockerCli, spec: EnvironmentSpec, container_id: str) -> None:
        self._cli = cli
        self._spec = spec
        self._id = container_id
        self._user = f"{spec.uid}:{spec.gid}"
        self._baseline: frozenset[str] = frozenset()
        self._run_lock = trio.Lock()
        self._stop_lock = trio.Lock()
        self._removed = False
        self._broken: str | None = None

    @property
    def container(self) -> str:
        """The container's name (``spec.name``)."""
        return self._spec.name

    @property
    def spec(self) -> EnvironmentSpec:
        """What the environment was started for."""
        return self._spec

    @classmethod
    async def create(cls, cli: DockerCli, spec: EnvironmentSpec, image_id: str) -> DockerEnvironment:
        """Create and start the container and wait until PID 1 and its sleeper are up.

        Raises:
            SandboxError: ``SANDBOX_START_FAILED`` (the container is removed again).
        """
        created = await cli.call("create", *_create_options(spec), image_id, *_PID1)
        # The id is the last line: a warning (no swap accounting) may come before it.
        lines = created.stdout.split()
        container_id = lines[-1] if lines else ""
        if not created.ok or not container_id:
            raise SandboxError(
                SANDBOX_START_FAILED, f"docker create {spec.name} failed: {created.reason}", "create"
            )
        environment = cls(cli, spec, container_id)
        try:
            await environment._start()
        except BaseException:
            with trio.CancelScope(shield=True):
                await cli.call("rm", "--force", "--volumes", container_id)
            raise
        return environment

    async def _start(self) -> None:
        started = await self._cli.call("start", self._id)
        if not started.ok:
            raise SandboxError(
                SANDBOX_START_FAILED, f"docker start {self.container} failed: {started.reason}", "create"
            )
        await self._wait_ready("create")
        probe = await self._signal_all("KILL")
        if not probe.ok:
            raise SandboxError(
                SANDBOX_START_FAILED,
                f"the image cannot run the process reaper `/bin/sh -c 'kill -KILL -1'` as "
                f"{self._user}: {probe.reason}",
                "create",
            )

    async def _wait_ready(self, operation: str) -> None:
        """Record PID 1 and its sleeper, the processes that are never a command's."""
        with trio.move_on_after(_READY_SECONDS):
            try:
                while True:
                    processes = await self._processes(operation)
                    if len(processes) >= 2:
                        break
                    await trio.sleep(_POLL_SECONDS)
            except SandboxError:
                pass  # PID 1 exited: its log says why.
            else:
                self._baseline = frozenset(processes)
                return
        logs = await self._cli.call("logs", "--tail", "5", self._id)
        raise SandboxError(
            SANDBOX_START_FAILED,
            f"{self.container}: PID 1 did not start `{' '.join(_PID1)}` (the image needs it): "
            f"{' '.join((logs.stdout + logs.stderr).split())[:300]}",
            operation,
        )

    async def run(self, command: CommandSpec) -> CommandOutcome:
        """Run ``command`` by ``docker exec``; every process it started is gone on return.

        A timeout, an abort or a cancelled caller stops the command *from inside* (``SIGTERM``,
        the grace, then ``SIGKILL`` rounds) while the ``docker exec`` client keeps running, so
        the client returns only once its process has ended. Killing the client instead would
        end nothing inside, and an exec start already on its way to the daemon could begin
        after the check for leftovers. A cancelled caller therefore waits for that stop
        (bounded by the grace) before ``Cancelled`` propagates.

        Raises:
            LocalWorkspaceError: ``WORKSPACE_COMMAND_NOT_FOUND``,
                ``WORKSPACE_COMMAND_FAILED_TO_START``.
            SandboxError: ``SANDBOX_START_FAILED`` when the environment is gone or stopped.
        """
        argv = self._exec_argv(command)
        if command.signal is not None and command.signal.aborted:
            return CommandOutcome(exit_code=None, stdout="", stderr="", timed_out=False, aborted=True)
        async with self._run_lock:
            self._refuse_if_unusable()
            stop = _Stop()
            failure: Exception | None = None
            outcome: CommandOutcome | None = None
            async with trio.open_nursery() as guard:
                guard.start_soon(_note_cancellation, stop)
                with trio.CancelScope(shield=True):
                    try:
                        outcome = await self._run_stoppable(argv, command, stop)
                    except Exception as error:  # Raised below, not wrapped in the nursery's group.
                        failure = error
                guard.cancel_scope.cancel()
            if failure is not None:
                raise failure
            assert outcome is not None
            return outcome

    async def _run_stoppable(self, argv: list[str], command: CommandSpec, stop: _Stop) -> CommandOutcome:
        limits = self._spec.limits
        # The client's own budget is only a backstop for a daemon that stops answering.
        backstop_ms = command.budget_ms + limits.kill_grace_ms + _BACKSTOP_MS
        started: OSError | None = None
        host_run: HostRun | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._stop_when_asked, command, stop)
                try:
                    host_run = await run_host_process(
                        argv,
                        budget_ms=backstop_ms,
                        signal=None,
                        environment=os.environ,
                        max_output_bytes=limits.max_output_bytes,
                        kill_grace_ms=limits.kill_grace_ms,
                        on_stop=self._terminate,
                    )
                except OSError as error:
                    started = error
                nursery.cancel_scope.cancel()
        except BaseException:
            await self._clear_or_mark_broken()
            raise
        if started is not None:
            raise LocalWorkspaceError(
                WORKSPACE_COMMAND_FAILED_TO_START, f"cannot run {self._cli.path}: {started}", "execute"
            ) from started
        await self._clear()
        assert host_run is not None
        if stop.reason is None and host_run.status is None:
            stop.reason = "timed_out"  # The backstop fired: the daemon did not end the command.
        return _outcome(command.argv, host_run, stop.reason)

    async def _stop_when_asked(self, command: CommandSpec, stop: _Stop) -> None:
        """At the budget's end, an abort or the caller's cancellation, stop the command inside."""
        with trio.move_on_after(command.budget_ms / 1000):
            async with trio.open_nursery() as waiters:
                waiters.start_soon(_wait_and_cancel, stop.cancelled.wait, waiters.cancel_scope)
                if command.signal is not None:
                    waiters.start_soon(_wait_and_cancel, command.signal.wait, waiters.cancel_scope)
        if stop.reason is None:
            aborted = command.signal is not None and command.signal.aborted
            stop.reason = "aborted" if aborted else "timed_out"
        # Each helper runs to its end: one cancelled half-way could start late and hit the
        # next command. This task is cancelled when the client has returned.
        with trio.CancelScope(shield=True):
            await self._signal_all("TERM", "CONT")
        await trio.sleep(self._spec.limits.kill_grace_ms / 1000)
        while True:
            with trio.CancelScope(shield=True):
                await self._signal_all("KILL")
            await trio.sleep(_POLL_SECONDS)

    def _exec_argv(self, command: CommandSpec) -> list[str]:
        argv = command.argv
        if not argv or any("\0" in argument for argument in argv):
            raise LocalWorkspaceError(
                WORKSPACE_COMMAND_FAILED_TO_START, "argv must be non-empty and free of NUL", "execute"
            )
        cwd = command.cwd
        if cwd.startswith("/") or "\0" in cwd or ".." in cwd.split("/"):
            raise LocalWorkspaceError(
                WORKSPACE_COMMAND_FAILED_TO_START, f"cwd {cwd!r} is not a relative path", "execute"
            )
        workdir = f"{WORKSPACE_MOUNT}/{cwd}" if cwd else WORKSPACE_MOUNT
        return [
            self._cli.path,
            "exec",
            f"--user={self._user}",
            f"--workdir={workdir}",
            *_environment_options(command.environment),
            self._id,
            *argv,
        ]

    def _refuse_if_unusable(self) -> None:
        if self._removed:
            raise SandboxError(SANDBOX_START_FAILED, f"{self.container} was stopped", "execute")
        if self._broken is not None:
            raise SandboxError(SANDBOX_START_FAILED, self._broken, "execute")

    async def _processes(self, operation: str) -> set[str]:
        """The container's live processes (host pids); zombies, already dead, are left out.

        Raises:
            SandboxError: ``SANDBOX_START_FAILED``: the container is not running.
        """
        top = await self._cli.call("top", self._id, "-o", "pid,stat")
        if not top.ok:
            raise SandboxError(
                SANDBOX_START_FAILED, f"the environment {self.container} is gone: {top.reason}", operation
            )
        live: set[str] = set()
        for line in top.stdout.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 2 and not fields[1].startswith("Z"):
                live.add(fields[0])
        return live

    async def _leftovers(self) -> set[str]:
        return await self._processes("execute") - self._baseline

    async def _signal_all(self, *signal_names: str) -> Completed:
        """``kill -<name> -1`` for each name, as the commands' user, inside."""
        script = "; ".join(f"kill -{name} -1" for name in signal_names)
        # kill(-1) fails with ESRCH when there is nothing to signal: not an error here.
        return await self._cli.call(
            "exec", f"--user={self._user}", self._id, "/bin/sh", "-c", f"{script}; exit 0"
        )

    async def _terminate(self) -> None:
        """On timeout or abort: ``SIGTERM`` and ``SIGCONT`` to what is left, then the grace."""
        try:
            if not await self._leftovers():
                return
            await self._signal_all("TERM", "CONT")
            with trio.move_on_after(self._spec.limits.kill_grace_ms / 1000):
                while True:
                    if not await self._leftovers():
                        break
                    await trio.sleep(_POLL_SECONDS)
        except SandboxError:
            return  # The container is gone; _clear reports it.

    async def _clear(self) -> None:
        """Kill whatever the command left; restart the container as the last resort.

        Raises:
            SandboxError: ``SANDBOX_START_FAILED``: the environment is gone, or processes
                survived a restart (the environment is then marked unusable).
        """
        for _ in range(_KILL_ROUNDS):
            if not await self._leftovers():
                return
            await self._signal_all("KILL")
        if not await self._leftovers():
            return
        restarted = await self._cli.call("restart", "--time", "0", self._id)
        if restarted.ok:
            await self._wait_ready("execute")
            if not await self._leftovers():
                return
        self._broken = f"{self.container}: processes of a command survived kill and restart"
        raise SandboxError(SANDBOX_START_FAILED, self._broken, "execute")

    async def _clear_or_mark_broken(self) -> None:
        try:
            await self._clear()
        except SandboxError as error:
            self._broken = str(error)

    async def stop(self) -> None:
        """``docker rm --force``, then check that no container of this name or id is left.

        Raises:
            SandboxError: ``SANDBOX_DISPOSE_FAILED`` naming the container.
        """
        async with self._stop_lock:
            if self._removed:
                return
            removal = await self._cli.call("rm", "--force", "--volumes", self._id)
            listed = await self._cli.call(
                "ps", "--all", "--no-trunc", f"--filter=name={self.container}", "--format={{.ID}} {{.Names}}"
            )
            left = [
                line
                for line in listed.stdout.splitlines()
                if line.split(" ")[0] == self._id or line.split(" ")[-1] == self.container
            ]
            if not listed.ok or left:
                raise SandboxError(
                    SANDBOX_DISPOSE_FAILED,
                    f"container {self.container} ({self._id[:12]}) may be left: "
                    f"{removal.reason if not removal.ok else listed.reason}",
                    "dispose",
                )
            self._removed = True


@dataclass(slots=True)
class _Stop:
    """Why a command is being stopped (``None`` while it is not), and the caller's cancellation."""

    reason: str | None = None
    cancelled: trio.Event = field(default_factory=trio.Event)


async def _note_cancellation(stop: _Stop) -> None:
    """Runs outside the shield: the caller's cancellation reaches it and becomes a stop request."""
    try:
        await trio.sleep_forever()
    finally:
        if stop.reason is None:
            stop.reason = "cancelled"
        stop.cancelled.set()


async def _wait_and_cancel(wait: Callable[[], Awaitable[None]], scope: trio.CancelScope) -> None:
    await wait()
    scope.cancel()


def _check_spec(spec: EnvironmentSpec) -> None:
    path = spec.copy_path
    # --mount is a comma-separated list: a comma or quote in the path would change its meaning.
    if not os.path.isabs(path) or any(character in path for character in ',"\n\0'):
        raise SandboxError(SANDBOX_START_FAILED, f"copy_path {path!r} cannot be mounted", "create")
    if not os.path.isdir(path):
        raise SandboxError(SANDBOX_START_FAILED, f"copy_path {path!r} is not a directory", "create")
    for value in (spec.uid, spec.gid):
        # Root inside, even without capabilities, owns whatever root owns in the image; PID 1
        # runs as the id above, which must exist too.
        if type(value) is not int or not 1 <= value < 2**32 - 2:
            raise SandboxError(
                SANDBOX_START_FAILED,
                f"commands run as a uid and gid from 1 to 2**32-3, not {value!r}",
                "create",
            )


def _init_id(commands: int) -> int:
    """PID 1's id: ``kill -1`` as the commands' user cannot reach a process of another user."""
    return commands + 1


def _create_options(spec: EnvironmentSpec) -> list[str]:
    limits = spec.limits
    return [
        f"--name={spec.name}",
        f"--label={LABEL}=1",
        f"--label={OWNER_LABEL}={spec.owner}",
        "--pull=never",
        "--network=none",
        "--read-only",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        f"--pids-limit={limits.pids}",
        f"--memory={limits.memory_bytes}",
        f"--memory-swap={limits.memory_bytes}",
        f"--cpus={float(limits.cpus)}",
        f"--ulimit=nofile={limits.open_files}:{limits.open_files}",
        f"--ulimit=fsize={limits.file_bytes}:{limits.file_bytes}",
        f"--user={_init_id(spec.uid)}:{_init_id(spec.gid)}",
        "--init",
        f"--tmpfs={_TMP_MOUNT}",
        f"--mount=type=bind,src={spec.copy_path},dst={WORKSPACE_MOUNT}",
        f"--workdir={WORKSPACE_MOUNT}",
    ]


def _environment_options(environment: Mapping[str, str]) -> Iterable[str]:
    """``--env=NAME=VALUE`` for each variable, and nothing else reaches the command.

    The values travel on the CLI's command line, visible in the host's process table: a
    value handed to sandboxed code is no secret from it anyway. They never travel through
    the CLI's own environment, where ``LD_PRELOAD`` or ``DOCKER_HOST`` would act on the host.
    """
    for name, value in environment.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise LocalWorkspaceError(
                WORKSPACE_COMMAND_FAILED_TO_START, f"invalid environment variable {name!r}", "execute"
            )
        yield f"--env={name}={value}"


async def _local_image_id(cli: DockerCli, image: str) -> str:
    inspected = await cli.call("image", "inspect", "--format", "{{.Id}}", image)
    image_id = inspected.stdout.strip()
    if inspected.ok and image_id.startswith("sha256:"):
        return image_id
    hint = ""
    if "@sha256:" in image:
        hint = (
            " (an image made by `docker import` or `docker build` has no registry digest: name it by"
            " its id, sha256:<id>)"
        )
    raise SandboxError(
        SANDBOX_ENGINE_UNAVAILABLE,
        f"image {image} is not present locally{hint}: build it with "
        f"packages/sandbox/scripts/build_image.py or `docker load` it; the sandbox never pulls "
        f"({inspected.reason})",
        "create",
    )


def _outcome(argv: tuple[str, ...], host_run: HostRun, stopped: str | None) -> CommandOutcome:
    """The command's outcome, or the typed error when ``docker exec`` could not start it.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_COMMAND_NOT_FOUND``, ``WORKSPACE_COMMAND_FAILED_TO_START``.
    """
    stdout = host_run.stdout.text("stdout")
    stderr = host_run.stderr.text("stderr")
    if stopped is not None:
        return CommandOutcome(
            exit_code=None,
            stdout=stdout,
            stderr=stderr,
            timed_out=stopped == "timed_out",
            aborted=stopped == "aborted",
        )
    status = host_run.status
    # The CLI prints an exec failure on stdout (Docker 28) or stderr (older), the other empty.
    truncated = host_run.stdout.truncated or host_run.stderr.truncated
    if status in (1, 126) and not (stdout and stderr) and not truncated:
        message = (stdout or stderr).replace("\r\n", "\n")
        code = _start_failure(argv[0], status, message)
        if code is not None:
            raise LocalWorkspaceError(code, f"{argv[0]!r} could not be started: {message.strip()}", "execute")
    return CommandOutcome(exit_code=status, stdout=stdout, stderr=stderr, timed_out=False, aborted=False)


def _start_failure(program: str, status: int, stderr: str) -> str | None:
    """Which start failure ``stderr`` reports, if it is Docker's or runc's and not the command's."""
    if status == 126 and stderr.startswith(_EXEC_FAILED) and stderr.count("\n") <= 1:
        return WORKSPACE_COMMAND_NOT_FOUND if _NOT_FOUND.search(stderr) else WORKSPACE_COMMAND_FAILED_TO_START
    match = _RUNC_EXEC.fullmatch(stderr)
    if status == 1 and match is not None:
        path = match["path"]
        if path == program or path.endswith(f"/{program}"):
            if match["error"] == "no such file or directory":
                return WORKSPACE_COMMAND_NOT_FOUND  # A script whose interpreter is missing.
            return WORKSPACE_COMMAND_FAILED_TO_START
    return None
