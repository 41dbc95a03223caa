"""The bubblewrap engine: every command in fresh namespaces, as an unprivileged uid, under rlimits.

One ``bwrap`` per command (about 12 ms for ``true`` on a 2-core machine): the environment holds the
spec, not a running sandbox. Each command runs as::

    timeout --signal=KILL <backstop> setpriv --reuid U --regid G --clear-groups \\
        bwrap --args FD -- /usr/bin/timeout --signal=KILL <backstop> \\
        /usr/bin/prlimit --as=… --nproc=… -- ARGV...

- **``timeout``** is the parent of ``bwrap``. ``--die-with-parent`` binds ``bwrap`` to the
  *thread* that forked it (``PR_SET_PDEATHSIG``), and trio forks from a worker thread that
  exits after 10 s idle: straight under trio, every command would be killed after 10 s.
  ``timeout`` is a parent that lives exactly as long as ``bwrap``, and if this process
  crashes, it still kills the sandbox at budget + grace + 5 s.
- **``setpriv``** (only when this process is root) makes ``bwrap`` run as the spec's uid:
  ``RLIMIT_NPROC`` does not bind uid 0, and an unprivileged ``bwrap`` creates its own user
  namespace, in which no process has a capability over the host.
- **``bwrap``** gets its options through a sealed memfd (``--args``), so the command's
  environment does not show in the host's process list: ``--unshare-all`` (user, pid,
  network with loopback only, ipc, uts, cgroup), ``--disable-userns``,
  ``--die-with-parent``, ``--new-session``, ``--cap-drop ALL``, ``--clearenv`` and one
  ``--setenv`` per variable of the command's environment, read-only ``/usr`` and the
  ``/bin``-style links to it, a minimal generated ``/etc``, a fresh ``/proc`` (only the
  sandbox's processes), a minimal ``/dev``, size-bounded tmpfs at ``/tmp`` and
  ``/dev/shm``, the copy read-write at ``/workspace`` and everything else read-only, the
  seccomp filter of :mod:`harness_sandbox._seccomp`, ``--json-status-fd`` and
  ``--block-fd``.
- **``prlimit``** (util-linux, from the read-only ``/usr``) sets the limits inside the new
  user namespace and executes the command: ``RLIMIT_AS`` (memory), ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``, ``RLIMIT_NPROC`` (pids), ``RLIMIT_CPU`` (the wall budget times
  ``cpus``, in seconds) and ``RLIMIT_CORE`` = 0. Set there, ``RLIMIT_NPROC`` counts the
  sandbox's own processes only (since Linux 5.14 the count is per user namespace), not
  other processes of the same host uid; set on ``bwrap`` before it creates the namespace,
  it would count every process of that uid on the host.
- **cgroups** (as root on cgroup v1, :mod:`harness_sandbox._cgroups`): the command's own
  memory, pids and cpu cgroups, entered by the sandbox's pid 1 before it forks anything.
- **Completion** (:mod:`harness_sandbox._admission`). The JSON status pipe names the
  sandbox's pid 1 (which waits on the block pipe until pidfds for it and its launcher are
  open) and, only if ``prlimit`` was executed, the exit status (``128 + n`` for a signal
  ``n``). When ``run`` returns, that pid 1 has been killed and has exited, and the kernel
  removes every other process of a pid namespace before its pid 1 has exited: nothing of
  the command is left, background processes included. (The exited pid 1 may stay a zombie
  until the host's init reaps it.)

Without cgroups, what is not bounded: ``RLIMIT_AS`` is per process and counts address
space, so the processes of a command together, System V shared memory, memfds and pipe
buffers are not bounded by ``memory_bytes``, and ``cpus`` bounds CPU seconds per process,
not a rate. See ``docs/decisions/037-sandbox-bubblewrap-engine.md``.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import resource
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import trio

from harness_sandbox._admission import REAP_SECONDS, SandboxAdmission
from harness_sandbox._cgroups import CommandCgroup, cgroup_parents
from harness_sandbox._engine import WORKSPACE_MOUNT, CommandOutcome, CommandSpec, EnvironmentSpec
from harness_sandbox._errors import (
    SANDBOX_DISPOSE_FAILED,
    SANDBOX_ENGINE_UNAVAILABLE,
    SANDBOX_START_FAILED,
    SandboxError,
)
from harness_sandbox._limits import SandboxLimits
from harness_sandbox._seccomp import build_filter
from harness_sandbox._supervise import HostRun, run_host_process
from harness_workspace import AbortSignal
from harness_workspace.local import (
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    LocalWorkspaceError,
)

__all__ = ["BubblewrapEngine"]

_MIB: Final = 1024 * 1024
# The programs on the host side run with this environment, so their messages are the C
# locale's (the command's own environment is set inside by --clearenv and --setenv).
_HOST_ENVIRONMENT: Final = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
# The crash backstop: `timeout` kills bwrap this long after the budget and the grace.
_BACKSTOP_SLACK_SECONDS: Final = 5
# After bwrap's launcher has exited, the status pipe reaches end of file at once.
_STATUS_SECONDS: Final = 1.0
_PROBE_BUDGET_MS: Final = 10_000
_SHM_BYTES: Final = 64 * _MIB  # Docker's default --shm-size
_SYSTEM_LINKS: Final = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_HOST_ETC: Final = ("/etc/ld.so.cache", "/etc/alternatives")  # nothing secret: a cache, symlinks
_HOSTNAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}")


@dataclass(frozen=True, slots=True)
class _Tools:
    """Absolute paths of the host programs a launch runs."""

    timeout: str
    setpriv: str | None  # None when this process already is the spec's uid
    bwrap: str
    prlimit: str  # below /usr, so the same path works inside
    inner_timeout: str  # ``timeout`` below /usr, the backstop inside the sandbox


@dataclass(frozen=True, slots=True)
class _Launched:
    """What one launch observed: the supervised host process and bwrap's own report."""

    run: HostRun
    exit_code: int | None  # None unless bwrap executed the command
    failure: str | None  # why the sandbox was not admitted, when it was not


class BubblewrapEngine:
    """The light engine: bubblewrap namespaces, a seccomp filter and rlimits; no daemon.

    Needs Linux on x86_64 with unprivileged user namespaces, ``bwrap`` (0.8 or later),
    ``timeout`` (coreutils) and, when this process is root, ``setpriv`` (util-linux).
    Commands run as the spec's uid, which must not be 0; a non-root process can only use
    its own uid and gid.

    Args:
        bwrap: The ``bwrap`` program, looked up in ``PATH`` unless it contains a slash.
    """

    def __init__(self, *, bwrap: str = "bwrap") -> None:
        self._bwrap = bwrap
        self._verified: set[tuple[int, int]] = set()
        self._cgroups: dict[str, str] | None = None

    @property
    def name(self) -> str:
        """``"bubblewrap"``."""
        return "bubblewrap"

    async def start(self, spec: EnvironmentSpec) -> BubblewrapEnvironment:
        """Check the engine and the copy, run ``true`` inside, and return the environment.

        The engine check (``true`` in a sandbox without the copy) runs once per uid and gid.

        Raises:
            SandboxError: ``SANDBOX_ENGINE_UNAVAILABLE`` (not x86_64, a program missing, no
                user namespaces, the uid needs root) or ``SANDBOX_START_FAILED`` (uid 0, the
                copy is not a directory owned by the uid).
        """
        seccomp = build_filter()
        tools = _locate_tools(self._bwrap, spec)
        _check_copy(spec)
        if self._cgroups is None:
            # Off the event loop: it walks the cgroup hierarchies and may wait for a dead
            # owner's leftover to empty.
            self._cgroups = await trio.to_thread.run_sync(cgroup_parents)
        if (spec.uid, spec.gid) not in self._verified:
            bare = BubblewrapEnvironment(spec, tools, seccomp, self._cgroups, with_workspace=False)
            await bare.probe(SANDBOX_ENGINE_UNAVAILABLE, "bubblewrap cannot create its sandbox here")
            self._verified.add((spec.uid, spec.gid))
        environment = BubblewrapEnvironment(spec, tools, seccomp, self._cgroups, with_workspace=True)
        await environment.probe(SANDBOX_START_FAILED, f"the sandbox over {spec.copy_path!r} did not start")
        return environment


class BubblewrapEnvironment:
    """One workspace's sandbox definition; each :meth:`run` builds and removes a sandbox."""

    def __init__(
        self,
        spec: EnvironmentSpec,
        tools: _Tools,
        seccomp: bytes,
        cgroups: Mapping[str, str],
        *,
        with_workspace: bool,
    ) -> None:
        self._spec = spec
        self._tools = tools
        self._seccomp = seccomp
        self._cgroups = cgroups
        self._with_workspace = with_workspace
        self._layout = _host_layout()
        self._etc = _generated_etc(spec.uid, spec.gid)
        self._stopped = False
        self._active: dict[object, trio.CancelScope] = {}
        self._idle = trio.Event()
        self._idle.set()

    async def run(self, command: CommandSpec) -> CommandOutcome:
        """Run ``command`` in a fresh sandbox; none of its processes is left when this returns.

        Raises:
            LocalWorkspaceError: ``WORKSPACE_COMMAND_NOT_FOUND`` (the program does not exist
                inside, or its interpreter does not) or ``WORKSPACE_COMMAND_FAILED_TO_START``
                (not executable, a NUL in an argument, an invalid environment entry).
            SandboxError: ``SANDBOX_START_FAILED``: stopped, or the sandbox did not come up.
        """
        if self._stopped:
            raise SandboxError(SANDBOX_START_FAILED, f"environment {self._spec.name} was stopped", "execute")
        _check_command(command)
        if command.signal is not None and command.signal.aborted:
            await trio.lowlevel.checkpoint()
            return CommandOutcome(exit_code=None, stdout="", stderr="", timed_out=False, aborted=True)
        token = object()
        scope = trio.CancelScope()
        self._active[token] = scope
        if self._idle.is_set():
            self._idle = trio.Event()
        launched: _Launched | None = None
        try:
            with scope:
                launched = await self._launch(
                    command.argv, command.cwd, command.environment, command.budget_ms, command.signal
                )
        finally:
            del self._active[token]
            if not self._active:
                self._idle.set()
        if launched is None:
            raise SandboxError(
                SANDBOX_START_FAILED,
                f"environment {self._spec.name} was stopped while the command ran",
                "execute",
            )
        return _outcome(command.argv[0], launched)

    async def stop(self) -> None:
        """Stop every command still running and refuse new ones; idempotent.

        Raises:
            SandboxError: ``SANDBOX_DISPOSE_FAILED`` when a running command's sandbox could
                not be seen to exit.
        """
        self._stopped = True
        for scope in self._active.values():
            scope.cancel()
        bound = self._spec.limits.kill_grace_ms / 1000 + REAP_SECONDS + _STATUS_SECONDS + 1
        with trio.move_on_after(bound):
            await self._idle.wait()
        if self._active:
            raise SandboxError(
                SANDBOX_DISPOSE_FAILED,
                f"{len(self._active)} command(s) of {self._spec.name} did not stop within {bound:.0f} s",
                "dispose",
            )

    async def probe(self, code: str, what: str) -> None:
        """Run ``true`` and raise ``SandboxError(code)`` with bwrap's own words if it fails."""
        try:
            launched = await self._launch(("true",), "", {"PATH": "/usr/bin:/bin"}, _PROBE_BUDGET_MS, None)
            outcome = _outcome("true", launched)
        except LocalWorkspaceError as error:
            raise SandboxError(code, f"{what}: {error.message}", "create") from error
        except SandboxError as error:
            raise SandboxError(code, f"{what}: {error.message}", "create") from error
        if outcome.exit_code != 0:
            detail = outcome.stderr.strip() or f"`true` ended with {outcome.exit_code}"
            raise SandboxError(code, f"{what}: {detail}", "create")

    async def _launch(
        self,
        argv: Sequence[str],
        cwd: str,
        environment: Mapping[str, str],
        budget_ms: int,
        signal: AbortSignal | None,
    ) -> _Launched:
        limits = self._spec.limits
        with _LaunchFiles() as files:
            status_read, status_write = files.pipe()
            block_read, block_write = files.pipe()
            seccomp = files.memfd("seccomp", self._seccomp)
            etc = {path: files.memfd(path, data) for path, data in self._etc.items()}
            options = self._options(
                cwd=cwd,
                environment=environment,
                seccomp=seccomp,
                etc=etc,
                status=files.pass_on(status_write),
                block=files.pass_on(block_read),
            )
            arguments = files.memfd("args", b"".join(option.encode() + b"\0" for option in options))
            cgroup = self._command_cgroup()
            status = trio.lowlevel.FdStream(files.release(status_read))
            refusal = trio.CancelScope()
            gate = SandboxAdmission(
                status,
                files.release(block_write),
                uid=self._spec.uid,
                refusal=refusal,
                enter=cgroup.enter if cgroup is not None else None,
            )
            host_argv = self._host_argv(arguments, argv, budget_ms)
            run: HostRun | None = None
            exited = False
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(gate.admit)
                    with refusal:
                        run = await _run_host(host_argv, budget_ms, signal, limits, files.passed)
                    # The children hold their own copies; ours would keep the status pipe open.
                    files.close_passed()
                    with trio.move_on_after(_STATUS_SECONDS):
                        await gate.reported.wait()
                    nursery.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    exited = await gate.close()
                if cgroup is not None:
                    cgroup.remove()  # one still busy (pid 1 not seen to exit) is left to the sweep
        if run is None:
            raise SandboxError(SANDBOX_START_FAILED, f"the sandbox was refused: {gate.failure}", "execute")
        if not exited:
            raise SandboxError(
                SANDBOX_START_FAILED,
                f"the sandbox's pid 1 did not exit within {REAP_SECONDS:.0f} s of SIGKILL",
                "execute",
            )
        return _Launched(run=run, exit_code=gate.exit_code, failure=gate.failure)

    def _command_cgroup(self) -> CommandCgroup | None:
        if not self._cgroups:
            return None
        try:
            return CommandCgroup(self._cgroups, self._spec.limits)
        except OSError as error:
            message = f"the command's cgroup could not be made: {error}"
            raise SandboxError(SANDBOX_START_FAILED, message, "execute") from error

    def _host_argv(self, arguments: int, argv: Sequence[str], budget_ms: int) -> list[str]:
        tools = self._tools
        backstop = (budget_ms + self._spec.limits.kill_grace_ms) / 1000 + _BACKSTOP_SLACK_SECONDS
        host = [tools.timeout, "--signal=KILL", f"{backstop:.3f}s"]
        if tools.setpriv is not None:
            spec = self._spec
            host += [tools.setpriv, f"--reuid={spec.uid}", f"--regid={spec.gid}", "--clear-groups"]
        limits = [f"--{name}={soft}:{hard}" for name, soft, hard in _rlimits(self._spec.limits, budget_ms)]
        # The same backstop again inside: bwrap's pid 1 does not always die with the outer
        # bwrap when this process crashes (seen under load), but it exits as soon as its one
        # child, this ``timeout``, has killed the command and exited.
        inside = [tools.inner_timeout, "--signal=KILL", f"{backstop:.3f}s"]
        return [
            *host,
            tools.bwrap,
            "--args",
            str(arguments),
            "--",
            *inside,
            tools.prlimit,
            *limits,
            "--",
            *argv,
        ]

    def _options(
        self,
        *,
        cwd: str,
        environment: Mapping[str, str],
        seccomp: int,
        etc: Mapping[str, int],
        status: int,
        block: int,
    ) -> list[str]:
        spec = self._spec
        hostname = spec.name if _HOSTNAME.fullmatch(spec.name) else "sandbox"
        options = [
            "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL",
            "--hostname", hostname, "--uid", str(spec.uid), "--gid", str(spec.gid), "--clearenv",
        ]  # fmt: skip
        for name, value in environment.items():
            options += ["--setenv", name, value]
        options += ["--ro-bind", "/usr", "/usr", *self._layout]
        options += ["--proc", "/proc", "--dev", "/dev", "--size", str(_SHM_BYTES), "--tmpfs", "/dev/shm"]
        options += ["--size", str(spec.limits.memory_bytes), "--tmpfs", "/tmp"]
        for path, descriptor in etc.items():
            options += ["--perms", "0644", "--ro-bind-data", str(descriptor), path]
        for path in _HOST_ETC:
            options += ["--ro-bind-try", path, path]
        if self._with_workspace:
            options += ["--bind", spec.copy_path, WORKSPACE_MOUNT]
        directory = f"{WORKSPACE_MOUNT}/{cwd}" if cwd else (WORKSPACE_MOUNT if self._with_workspace else "/")
        # Last: the root and /dev become read-only once everything is mounted on them.
        options += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", directory]
        options += ["--seccomp", str(seccomp), "--json-status-fd", str(status), "--block-fd", str(block)]
        return options


@dataclass(slots=True)
class _LaunchFiles:
    """The descriptors of one launch: all closed on exit, passed ones closable early."""

    passed: list[int] = field(default_factory=list[int])
    _own: list[int] = field(default_factory=list[int])

    def __enter__(self) -> _LaunchFiles:
        return self

    def __exit__(self, *_: object) -> None:
        self.close_passed()
        for descriptor in self._own:
            os.close(descriptor)
        self._own.clear()

    def pipe(self) -> tuple[int, int]:
        """A new pipe ``(read, write)``, both ends ours until passed on or released."""
        read, write = os.pipe2(os.O_CLOEXEC)
        self._own.append(read)
        self._own.append(write)
        return read, write

    def memfd(self, name: str, data: bytes) -> int:
        """A sealed, read-only in-memory file holding ``data``, passed to the child."""
        descriptor = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self._own.append(descriptor)
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
        seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
        fcntl.fcntl(descriptor, fcntl.F_ADD_SEALS, seals)
        os.lseek(descriptor, 0, os.SEEK_SET)
        return self.pass_on(descriptor)

    def pass_on(self, descriptor: int) -> int:
        """Mark ``descriptor`` (one of ours) as passed to the child; return it."""
        self._own.remove(descriptor)
        self.passed.append(descriptor)
        return descriptor

    def release(self, descriptor: int) -> int:
        """Hand ``descriptor`` over to another owner (a trio stream)."""
        self._own.remove(descriptor)
        return descriptor

    def close_passed(self) -> None:
        """Close our copies of the passed descriptors."""
        for descriptor in self.passed:
            os.close(descriptor)
        self.passed.clear()


async def _run_host(
    argv: Sequence[str],
    budget_ms: int,
    signal: AbortSignal | None,
    limits: SandboxLimits,
    pass_fds: Sequence[int],
) -> HostRun:
    try:
        return await run_host_process(
            argv,
            budget_ms=budget_ms,
            signal=signal,
            environment=_HOST_ENVIRONMENT,
            max_output_bytes=limits.max_output_bytes,
            kill_grace_ms=limits.kill_grace_ms,
            pass_fds=pass_fds,
        )
    except OSError as error:
        raise SandboxError(
            SANDBOX_START_FAILED, f"{argv[0]} could not be started: {error}", "execute"
        ) from error


def _outcome(program: str, launched: _Launched) -> CommandOutcome:
    run = launched.run
    stdout, stderr = run.stdout.text("stdout"), run.stderr.text("stderr")
    if run.timed_out or run.aborted:
        return CommandOutcome(
            exit_code=None, stdout=stdout, stderr=stderr, timed_out=run.timed_out, aborted=run.aborted
        )
    if launched.exit_code is None:
        # bwrap reports an exit status only for a program it executed (prlimit); none ran.
        detail = stderr.strip() or launched.failure or f"bwrap ended with status {run.status}"
        raise SandboxError(SANDBOX_START_FAILED, f"the sandbox did not start: {detail}", "execute")
    # prlimit executes the command; when it cannot, it says so in one line and exits with
    # 127 (ENOENT, also for a missing script interpreter) or 126 (anything else).
    exit_code = launched.exit_code
    if exit_code in (126, 127) and not stdout and stderr.startswith("prlimit: ") and stderr.count("\n") == 1:
        if exit_code == 127:
            code, what = WORKSPACE_COMMAND_NOT_FOUND, "command not found"
        else:
            code, what = WORKSPACE_COMMAND_FAILED_TO_START, "command could not be started"
        raise LocalWorkspaceError(code, f"{what}: {program!r} ({stderr.strip()})", "execute")
    return CommandOutcome(exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=False, aborted=False)


def _check_command(command: CommandSpec) -> None:
    problem: str | None = None
    if not command.argv:
        problem = "the command has no program"
    elif any("\x00" in argument for argument in command.argv):
        problem = "command arguments must not contain NUL characters"
    elif any(not name or "=" in name or "\x00" in name for name in command.environment):
        problem = "environment names must be nonempty and free of '=' and NUL"
    elif any("\x00" in value for value in command.environment.values()):
        problem = "environment values must not contain NUL characters"
    elif command.cwd and (
        command.cwd.startswith("/") or "\x00" in command.cwd or ".." in command.cwd.split("/")
    ):
        problem = f"cwd must be a relative path below the workspace, got {command.cwd!r}"
    if problem is not None:
        raise LocalWorkspaceError(WORKSPACE_COMMAND_FAILED_TO_START, problem, "execute")


def _rlimits(limits: SandboxLimits, budget_ms: int) -> list[tuple[str, int, int]]:
    """``prlimit`` options ``(name, soft, hard)``, never above this process's own hard limits.

    An unprivileged process cannot raise a hard limit, and the sandbox inherits this
    process's. The hard CPU limit is one second after the soft one (SIGXCPU, then SIGKILL).
    """
    cpu_seconds = max(1, math.ceil(budget_ms * limits.cpus / 1000))
    wanted = [
        ("as", resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
        ("fsize", resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
        ("nofile", resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        ("nproc", resource.RLIMIT_NPROC, limits.pids, limits.pids),
        ("cpu", resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1),
        ("core", resource.RLIMIT_CORE, 0, 0),
    ]
    options: list[tuple[str, int, int]] = []
    for name, limit, soft, hard in wanted:
        _, ceiling = resource.getrlimit(limit)
        bounded = hard if ceiling == resource.RLIM_INFINITY else min(hard, ceiling)
        options.append((name, min(soft, bounded), bounded))
    return options


def _locate_tools(bwrap: str, spec: EnvironmentSpec) -> _Tools:
    if spec.uid == 0:
        raise SandboxError(
            SANDBOX_START_FAILED,
            "the bubblewrap engine runs commands as a non-root uid (RLIMIT_NPROC does not bind uid 0)",
            "create",
        )
    privileged = os.geteuid() == 0
    if not privileged and (spec.uid, spec.gid) != (os.getuid(), os.getgid()):
        raise SandboxError(
            SANDBOX_ENGINE_UNAVAILABLE,
            f"running commands as {spec.uid}:{spec.gid} needs root; this process runs as "
            f"{os.getuid()}:{os.getgid()}",
            "create",
        )
    found = {name: shutil.which(name) for name in (bwrap, "timeout", "setpriv", "prlimit")}
    prlimit = os.path.realpath(found["prlimit"]) if found["prlimit"] else None
    missing = [
        hint
        for name, hint in (
            (bwrap, f"{bwrap} not found: apt-get install bubblewrap"),
            ("timeout", "timeout not found: apt-get install coreutils"),
            ("setpriv", "setpriv not found: apt-get install util-linux"),
            ("prlimit", "prlimit not found: apt-get install util-linux"),
        )
        if found[name] is None and (privileged or name != "setpriv")
    ]
    timeout = os.path.realpath(found["timeout"]) if found["timeout"] else None
    for name, path in (("prlimit", prlimit), ("timeout", timeout)):
        if path is not None and not path.startswith("/usr/"):
            missing.append(f"{name} is {path}, outside /usr, so the sandbox cannot run it")
    if missing:
        raise SandboxError(SANDBOX_ENGINE_UNAVAILABLE, "; ".join(missing), "create")
    return _Tools(
        timeout=os.path.abspath(found["timeout"] or ""),
        setpriv=os.path.abspath(found["setpriv"] or "") if privileged else None,
        bwrap=os.path.abspath(found[bwrap] or ""),
        prlimit=prlimit or "",
        inner_timeout=timeout or "",
    )


def _check_copy(spec: EnvironmentSpec) -> None:
    path = spec.copy_path
    try:
        info = os.lstat(path) if os.path.isabs(path) else None
    except OSError as error:
        message = f"the copy {path!r} cannot be used: {error}"
        raise SandboxError(SANDBOX_START_FAILED, message, "create") from error
    if info is None or not stat.S_ISDIR(info.st_mode):
        message = f"the copy {path!r} is not an absolute path of a directory"
        raise SandboxError(SANDBOX_START_FAILED, message, "create")
    if info.st_uid != spec.uid:
        raise SandboxError(
            SANDBOX_START_FAILED,
            f"the copy {path!r} belongs to uid {info.st_uid}, not to the sandbox's uid {spec.uid}",
            "create",
        )


def _host_layout() -> list[str]:
    """``/bin``, ``/lib``… as this host has them: links into ``/usr`` or read-only directories."""
    options: list[str] = []
    for name in _SYSTEM_LINKS:
        path = f"/{name}"
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    return options


def _generated_etc(uid: int, gid: int) -> dict[str, bytes]:
    """A minimal ``/etc``: the sandbox's user and group, localhost, files-only lookups."""
    return {
        "/etc/passwd": (
            "root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"sandbox:x:{uid}:{gid}:sandbox:{WORKSPACE_MOUNT}:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ).encode(),
        "/etc/group": f"root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n".encode(),
        "/etc/hosts": b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        "/etc/nsswitch.conf": b"passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
    }
