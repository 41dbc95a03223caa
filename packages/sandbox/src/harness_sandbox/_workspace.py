"""``SandboxWorkspace``: the seven operations over a disposable copy, commands inside an engine.

Creation copies the source tree (see :mod:`harness_sandbox._copy`) into a directory of its
own, opens a :class:`~harness_workspace.local.LocalWorkspace` over the copy for every file
operation (so a link, FIFO or device the sandbox plants can never lead a host-side read or
write outside the copy) and starts the engine's environment with the copy at ``/workspace``.
``execute`` checks ``cwd`` on the host, then runs the command inside. As root, the copy and
the commands belong to user ids of their own (:mod:`harness_sandbox._leases`), and the copy's
directory (its home) is root's, entered only by the sandbox's own group (0710). The copy's
size is held to ``SandboxLimits.disk_bytes``. ``dispose`` keeps the final diff, stops the
environment, verifies it is gone and deletes the copy (unless asked to retain it).
"""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
from dataclasses import dataclass
from typing import Final

import trio

from harness_sandbox._bubblewrap import BubblewrapEngine
from harness_sandbox._copy import DEFAULT_DENY, CopyReport, DeniedPolicy, copy_tree, remove_tree, tree_bytes
from harness_sandbox._disk import ceiling_available, mount_ceiling, unmount_ceiling
from harness_sandbox._docker import DockerEngine
from harness_sandbox._engine import CommandSpec, EnvironmentSpec, SandboxEngine, SandboxEnvironment
from harness_sandbox._errors import SANDBOX_COPY_FAILED, SANDBOX_DISK_LIMIT, SandboxError
from harness_sandbox._leases import COPY_NAME, HOME_PREFIX, SANDBOX_ID_RANGE, Lease, claim_lease, sweep_leases
from harness_sandbox._limits import SandboxLimits
from harness_workspace import (
    CommandRequest,
    CommandResult,
    WorkspaceOperationError,
    WorkspaceSnapshot,
    declare_isolation,
)
from harness_workspace.local import (
    WORKSPACE_COMMAND_ABORTED,
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_DISPOSED,
    WORKSPACE_TIMEOUT_TOO_LARGE,
    LocalWorkspace,
    LocalWorkspaceError,
)

__all__ = ["SANDBOX_ENVIRONMENT", "SANDBOX_ID_RANGE", "SandboxWorkspace"]

SANDBOX_ENVIRONMENT: Final[dict[str, str]] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
}
"""The whole environment of a command inside: nothing of the host process reaches it."""
_ISOLATING_ENGINES: Final = (DockerEngine, BubblewrapEngine)


def is_isolating_engine(engine: object) -> bool:
    """Whether this package vouches for ``engine``'s isolation: a shipped engine, by exact type.

    A ``SandboxWorkspace`` on such an engine declares itself ``sandboxed``; a subclass or any
    other engine may weaken the fences, so it is not vouched for.
    """
    return type(engine) in _ISOLATING_ENGINES


@dataclass(frozen=True, slots=True)
class _Copy:
    home: str
    """The directory holding the copy (deleted on dispose)."""
    path: str
    """The copy itself, mounted at ``/workspace``."""
    report: CopyReport
    ceiling: bool
    """The copy is a file system of its own, full a little above ``disk_bytes``."""
    lease: Lease
    """The sandbox's user ids, held until the copy is gone."""


class SandboxWorkspace:
    """A :class:`~harness_workspace.Workspace` whose commands run in an isolated, disposable environment.

    Build one with :meth:`create`. On the shipped engines (:class:`DockerEngine`,
    :class:`BubblewrapEngine`) it declares itself ``sandboxed``
    (``harness_workspace.isolation_of``), so the tool layer admits file-writing and command
    tools on it without a host opt-in; nothing a model sends can make a workspace isolated.
    On any other engine it declares nothing: whoever chose that engine vouches for it, or not,
    with ``harness_workspace.declare_isolation``.
    """

    def __init__(
        self,
        *,
        copy: _Copy,
        local: LocalWorkspace,
        environment: SandboxEnvironment,
        engine_name: str,
        limits: SandboxLimits,
        retain: bool,
    ) -> None:
        self._copy = copy
        self._local = local
        self._environment = environment
        self._engine_name = engine_name
        self._limits = limits
        self._retain = retain
        self._disposed = False
        self._dispose_lock = trio.Lock()
        self._commands = trio.Lock()
        self._used = copy.report.bytes
        """Bytes the copy holds, or more (never less): exact after creation and each command."""
        self.final_diff: str | None = None
        """The copy's diff against ``HEAD`` taken by :meth:`dispose` (``None`` before, or if it had none)."""

    # -- creation -------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        source: str | os.PathLike[str],
        *,
        engine: SandboxEngine,
        limits: SandboxLimits | None = None,
        deny: tuple[str, ...] = DEFAULT_DENY,
        denied: DeniedPolicy = "skip",
        parent: str | os.PathLike[str] | None = None,
        retain: bool = False,
        disk_ceiling: bool = True,
        ids: range = SANDBOX_ID_RANGE,
    ) -> SandboxWorkspace:
        """Copy ``source`` and start ``engine``'s environment over the copy.

        Args:
            source: The source tree (a git checkout or a folder); it is never written.
            engine: The engine; when it cannot run, creation fails (no fallback).
            limits: The workspace's limits (defaults: :class:`SandboxLimits`).
            deny: Path patterns never copied (``harness_workspace.credentials`` syntax; the
                shared credential deny list by default).
            denied: ``"skip"`` a denied name (reported by :attr:`skipped`) or ``"refuse"`` the copy.
            parent: Where the copy's directory is made (the system temporary directory by default).
            retain: Keep the copy after :meth:`dispose` (the environment is removed anyway; a
                copy on its own file system stays mounted, for the operator to unmount).
            disk_ceiling: Put the copy on a loop-mounted file system of its own, full a little
                above ``disk_bytes``, where this process can (root, a loop device,
                ``mkfs.ext4``); :attr:`disk_ceiling` says whether it did.
            ids: Where the sandbox's user ids come from when this process is root (see
                :data:`SANDBOX_ID_RANGE`); not root, commands run as this process's user.

        First, what sandboxes of dead owners left (their processes, copies, file systems)
        is removed; a live owner's sandbox is never touched.

        Raises:
            SandboxError: ``SANDBOX_SOURCE_INVALID``, ``SANDBOX_COPY_FAILED``,
                ``SANDBOX_DISK_LIMIT``, ``SANDBOX_IDS_UNAVAILABLE``, ``SANDBOX_ENGINE_UNAVAILABLE``,
                ``SANDBOX_IMAGE_NOT_PINNED``, ``SANDBOX_START_FAILED``; ``SANDBOX_DISPOSE_FAILED``
                when a dead owner's leftover cannot be removed. Nothing is left behind.
        """
        chosen = limits if limits is not None else SandboxLimits()
        await trio.to_thread.run_sync(sweep_leases)
        copy = await trio.to_thread.run_sync(
            lambda: _make_copy(
                os.fspath(source),
                parent,
                deny=deny,
                denied=denied,
                limits=chosen,
                ids=ids if os.geteuid() == 0 else None,
                disk_ceiling=disk_ceiling,
            )
        )
        local: LocalWorkspace | None = None
        try:
            # The copy holds none of the host's credentials (left out, .git/config scrubbed), and
            # what the sandbox writes is its own, readable by its commands anyway: nothing to withhold.
            local = LocalWorkspace(
                copy.path,
                max_file_bytes=min(chosen.file_bytes, 64 * 1024 * 1024),
                withhold_credentials=False,
            )
            spec = EnvironmentSpec(
                name=f"harness-sbx-{secrets.token_hex(8)}",
                copy_path=copy.path,
                uid=copy.lease.uid,
                gid=copy.lease.gid,
                limits=chosen,
                owner=f"{socket.gethostname()}:{os.getpid()}",
            )
            environment = await engine.start(spec)
        except BaseException:
            with trio.CancelScope(shield=True):
                if local is not None:
                    await local.dispose()
                await trio.to_thread.run_sync(lambda: _remove_copy(copy, keep=False))
            raise
        workspace = cls(
            copy=copy,
            local=local,
            environment=environment,
            engine_name=engine.name,
            limits=chosen,
            retain=retain,
        )
        if is_isolating_engine(engine):
            declare_isolation(workspace, "sandboxed")
        return workspace

    # -- what the operator may ask --------------------------------------------------

    @property
    def engine(self) -> str:
        """The engine's name (for the operator; the model never sees it)."""
        return self._engine_name

    @property
    def copy_path(self) -> str:
        """The host path of the copy (retained after dispose only when asked)."""
        return self._copy.path

    @property
    def ids(self) -> tuple[int, int]:
        """The user and group id commands run as and the copy belongs to."""
        return (self._copy.lease.uid, self._copy.lease.gid)

    @property
    def skipped(self) -> tuple[str, ...]:
        """Source paths left out of the copy: denied names and special files."""
        return tuple(self._copy.report.skipped)

    @property
    def disk_ceiling(self) -> bool:
        """Whether the copy is a file system of its own (a hard bound within one command)."""
        return self._copy.ceiling

    @property
    def limits(self) -> SandboxLimits:
        """The limits in force."""
        return self._limits

    # -- files (on the host, through LocalWorkspace) ----------------------------------

    async def read_file(self, path: str) -> str:
        """Read a file of the copy (see ``LocalWorkspace.read_file``)."""
        return await self._local.read_file(path)

    async def write_file(self, path: str, contents: str) -> None:
        """Write a file of the copy, within the disk limit (see ``LocalWorkspace.write_file``).

        Raises:
            SandboxError: ``SANDBOX_DISK_LIMIT`` when the copy would hold more than
                ``disk_bytes``; nothing is written.
            LocalWorkspaceError: as ``LocalWorkspace.write_file``.
        """
        self._refuse_if_disposed("write_file")
        size = len(contents.encode("utf-8", errors="surrogatepass"))
        # ``_used`` only ever overestimates (a replaced file's old size is not subtracted),
        # so the tree is walked again only when the estimate says the limit might be hit.
        replaced = 0
        if self._used + size > self._limits.disk_bytes:
            self._used = await trio.to_thread.run_sync(tree_bytes, self._copy.path)
            replaced = await self._current_size(path)
        if self._used - replaced + size > self._limits.disk_bytes:
            raise SandboxError(
                SANDBOX_DISK_LIMIT,
                f"writing {size} bytes would exceed the workspace's disk limit of "
                f"{self._limits.disk_bytes} bytes ({self._used} in use)",
                "write_file",
            )
        await self._local.write_file(path, contents)
        self._used += size - replaced

    async def _current_size(self, path: str) -> int:
        """The size of the file ``write_file`` would replace (read through the containment), or 0."""
        try:
            return len((await self._local.read_file(path)).encode("utf-8", errors="surrogatepass"))
        except WorkspaceOperationError:
            return 0

    async def list_files(self, path: str) -> list[str]:
        """List files of the copy (see ``LocalWorkspace.list_files``)."""
        return await self._local.list_files(path)

    async def diff(self) -> str:
        """The copy's changes against ``HEAD`` (see ``LocalWorkspace.diff``), denied files left out.

        A file the copy left out (a tracked ``*.pem``, say) would read as deleted, and one
        the sandbox wrote in its place as a change to it; neither is the sandbox's to export,
        so their sections are dropped.
        """
        return _without_paths(await self._local.diff(), frozenset(self._copy.report.skipped))

    async def snapshot(self) -> WorkspaceSnapshot:
        """The copy's state (see ``LocalWorkspace.snapshot``)."""
        return await self._local.snapshot()

    # -- commands (inside the environment) --------------------------------------------

    async def execute(self, command: CommandRequest) -> CommandResult:
        """Run ``command.argv`` inside the environment, in ``/workspace/<cwd>``.

        One command at a time per workspace. The environment is :data:`SANDBOX_ENVIRONMENT`;
        the budget is ``timeout_ms`` (the limits' default when ``None``; ``0`` reports a
        timeout without running). Every process the command started is gone when it returns.

        Raises:
            LocalWorkspaceError: the path codes for ``cwd``, ``WORKSPACE_NOT_A_DIRECTORY``,
                ``WORKSPACE_COMMAND_NOT_FOUND``, ``WORKSPACE_COMMAND_FAILED_TO_START``,
                ``WORKSPACE_COMMAND_ABORTED``, ``WORKSPACE_TIMEOUT_TOO_LARGE``,
                ``WORKSPACE_DISPOSED``.
            SandboxError: ``SANDBOX_DISK_LIMIT`` when the command left the copy over the
                disk limit (the message gives its exit code), ``SANDBOX_START_FAILED`` when
                the environment is gone.
        """
        self._refuse_if_disposed("execute")
        budget_ms = self._budget_ms(command.timeout_ms)
        argv = tuple(command.argv)
        if any("\x00" in argument for argument in argv):
            raise LocalWorkspaceError(
                WORKSPACE_COMMAND_FAILED_TO_START,
                "command arguments must not contain NUL characters",
                "execute",
            )
        cwd = await self._local.resolve_directory(command.cwd or "", "execute")
        signal = command.signal
        if signal is not None and signal.aborted:
            raise _aborted(signal.reason)
        if budget_ms == 0:
            await trio.lowlevel.checkpoint()
            return CommandResult(exit_code=None, stdout="", stderr="", timed_out=True)
        spec = CommandSpec(
            argv=argv, cwd=cwd, budget_ms=budget_ms, environment=dict(SANDBOX_ENVIRONMENT), signal=signal
        )
        async with self._commands:
            self._refuse_if_disposed("execute")
            outcome = await self._environment.run(spec)
        if outcome.aborted:
            raise _aborted(None if signal is None else signal.reason)
        used = self._used = await trio.to_thread.run_sync(tree_bytes, self._copy.path)
        if used > self._limits.disk_bytes:
            raise SandboxError(
                SANDBOX_DISK_LIMIT,
                f"the command (exit code {outcome.exit_code}) left {used} bytes in the workspace, over its "
                f"disk limit of {self._limits.disk_bytes}; delete files to go on writing",
                "execute",
            )
        return CommandResult(
            exit_code=outcome.exit_code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            timed_out=outcome.timed_out,
        )

    def _budget_ms(self, timeout_ms: int | None) -> int:
        if timeout_ms is None:
            return self._limits.default_timeout_ms
        if timeout_ms > self._limits.max_timeout_ms:
            raise LocalWorkspaceError(
                WORKSPACE_TIMEOUT_TOO_LARGE,
                f"timeout_ms {timeout_ms} exceeds the maximum of {self._limits.max_timeout_ms}",
                "execute",
            )
        return timeout_ms

    # -- disposal -------------------------------------------------------------------

    def _refuse_if_disposed(self, operation: str) -> None:
        if self._disposed:
            raise LocalWorkspaceError(WORKSPACE_DISPOSED, "the workspace was disposed", operation)

    async def dispose(self) -> None:
        """Keep the final diff, stop and remove the environment, delete the copy; idempotent.

        The copy stays when the workspace was created with ``retain=True``.

        Raises:
            SandboxError: ``SANDBOX_DISPOSE_FAILED`` when the environment's removal could not
                be verified (the copy is deleted all the same).
        """
        with trio.CancelScope(shield=True):
            async with self._dispose_lock:
                if self._disposed:
                    return
                try:
                    self.final_diff = await self.diff()
                except WorkspaceOperationError:
                    self.final_diff = None
                self._disposed = True
                try:
                    await self._environment.stop()
                finally:
                    await self._local.dispose()
                    copy = self._copy
                    await trio.to_thread.run_sync(lambda: _remove_copy(copy, keep=self._retain))


def _make_copy(
    source: str,
    parent: str | os.PathLike[str] | None,
    *,
    deny: tuple[str, ...],
    denied: DeniedPolicy,
    limits: SandboxLimits,
    ids: range | None,
    disk_ceiling: bool,
) -> _Copy:
    base: str = os.path.abspath(tempfile.gettempdir() if parent is None else os.fspath(parent))
    home = os.path.join(base, f"{HOME_PREFIX}{secrets.token_hex(8)}")
    lease = claim_lease(home, ids)
    path = os.path.join(home, COPY_NAME)
    ceiling = disk_ceiling and ceiling_available()
    owner = (lease.uid, lease.gid)
    try:
        os.mkdir(home, 0o700)
        if ids is not None:
            # Root's, and traversable by the sandbox's own group alone, which no host account
            # has: bubblewrap binds the copy as the sandbox's user, by path. Nothing else of
            # the host can enter, let alone list, the home.
            os.chown(home, 0, lease.gid)
            os.chmod(home, 0o710)
        if ceiling:
            try:
                mount_ceiling(home, path, limits.disk_bytes, owner)
            except OSError as error:
                raise SandboxError(
                    SANDBOX_COPY_FAILED, f"the copy's file system could not be made: {error}", "create"
                ) from error
        report = copy_tree(
            source,
            path,
            deny=deny,
            denied=denied,
            max_bytes=limits.disk_bytes,
            owner=owner if ids is not None else None,
            existing=ceiling,
        )
    except BaseException:
        _remove_copy(
            _Copy(home=home, path=path, report=CopyReport(), ceiling=ceiling, lease=lease), keep=False
        )
        raise
    return _Copy(home=home, path=path, report=report, ceiling=ceiling, lease=lease)


def _remove_copy(copy: _Copy, *, keep: bool) -> None:
    """Unmount the ceiling, delete the copy's directory and give the ids back.

    ``keep`` leaves the copy as it is (mounted, if it was) and gives the ids back: its home
    stays root's alone, so the next sandbox with those ids cannot reach it. When removal
    fails the lease is kept, so the sweep after this process has ended removes the rest.
    """
    if not keep:
        if copy.ceiling:
            unmount_ceiling(copy.home, copy.path)
        remove_tree(copy.home)
    copy.lease.release()


def _without_paths(patch: str, paths: frozenset[str]) -> str:
    """``patch`` without the file sections whose old or new path is one of ``paths`` or below one."""
    if not paths or not patch:
        return patch
    kept: list[str] = []
    keep = True
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            names = line[len("diff --git ") :].rstrip("\n").split(" ")
            keep = not any(_under(name[2:], paths) for name in names if name[:2] in ("a/", "b/"))
        if keep:
            kept.append(line)
    return "".join(kept)


def _under(path: str, paths: frozenset[str]) -> bool:
    """Whether ``path`` is one of ``paths`` or lies below one (a skipped directory)."""
    parts = path.split("/")
    return any("/".join(parts[:end]) in paths for end in range(1, len(parts) + 1))


def _aborted(reason: object) -> LocalWorkspaceError:
    return LocalWorkspaceError(WORKSPACE_COMMAND_ABORTED, f"command aborted (reason: {reason!r})", "execute")
