"""The ``LocalWorkspace`` class: its operations, worker threads and lifecycle (see the package docstring)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final, Literal, TypeVar

import trio

from harness_workspace._types import CommandRequest, CommandResult, WorkspaceSnapshot
from harness_workspace.credentials import is_credential_path, is_git_config_path, scrub_git_config
from harness_workspace.local._diff import git_diff, git_snapshot
from harness_workspace.local._errors import (
    WORKSPACE_DISPOSED,
    WORKSPACE_INVALID_UTF8,
    WORKSPACE_LINKED_FILE,
    WORKSPACE_LIST_TOO_LARGE,
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_SECRET_WITHHELD,
    WORKSPACE_SYMLINK_REFUSED,
    WORKSPACE_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace.local._git.bounds import Budget, ReaderLimits
from harness_workspace.local._paths import (
    Components,
    PathResolver,
    ResolverName,
    fail_os,
    join_components,
    open_root,
    openat2_available,
    parse_path,
    refuse_non_regular,
)
from harness_workspace.local._process import ProcessLimits, run_command, scrubbed_environment
from harness_workspace.local._protected import ProtectedPaths, guarded_execution

__all__ = ["DEFAULT_MAX_FILE_BYTES", "DEFAULT_MAX_LIST_ENTRIES", "LocalWorkspace", "ResolverChoice"]

DEFAULT_MAX_FILE_BYTES: Final = 4 * 1024 * 1024
"""The default byte cap of ``read_file`` and ``write_file`` (4 MiB)."""
DEFAULT_MAX_LIST_ENTRIES: Final = 10_000
"""The default bound on directory entries one ``list_files`` call may visit."""

ResolverChoice = Literal["auto", "openat2", "walk"]
"""How paths are resolved: ``"auto"`` uses ``openat2`` when the kernel has it."""

_MAX_LIST_DEPTH: Final = 128
_MIN_READ_CHUNK: Final = 64 * 1024
_TEMPORARY_PREFIX: Final = ".harness-tmp-"
_READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY
_CHILD_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

_T = TypeVar("_T")


def _positive(name: str, value: int) -> int:
    if type(value) is not int or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class LocalWorkspace:
    """A :class:`~harness_workspace.Workspace` over one host directory.

    Paths are relative to the root (``"src/app.py"``); ``"."`` and ``..`` components are
    resolved lexically first, and ``..`` above the root is refused. No symlink is followed
    in any component of any path (``read_file``, ``write_file``, the start of
    ``list_files``, the working directory of ``execute``): a link is refused with
    ``WORKSPACE_SYMLINK_REFUSED`` naming it (or ``WORKSPACE_PATH_ESCAPES_ROOT`` when its
    target leaves the root), by both resolvers alike, so the path a permission check judged
    is the file opened. Blocking work runs in trio worker threads; the root descriptor stays
    open until the last in-flight operation has finished, even if :meth:`dispose` races it.

    ``list_files(path)`` agrees with :class:`~harness_workspace.MemoryWorkspace`: it returns
    the sorted root-relative paths of every non-directory entry at or below ``path``
    (recursively; symlinks are listed, never followed; empty directories do not appear);
    ``""``, ``"."`` and ``"/"`` name the root, and a file path lists itself. Unlike the
    fake, a missing path raises ``WORKSPACE_NOT_FOUND`` instead of returning ``[]``.

    ``write_file`` replaces the file atomically (temporary file in the same directory,
    ``fsync``, ``rename``, ``fsync`` of the directory) and keeps an existing file's mode
    bits. It does not create parent directories (``WORKSPACE_NOT_FOUND``), and refuses a
    symlink target (``WORKSPACE_SYMLINK_REFUSED``) and a target with more than one hard link
    (``WORKSPACE_LINKED_FILE``).

    ``diff`` and ``snapshot`` read the git repository at the root (``.git`` must be a real
    folder there) without running git and without writing anything: no configuration,
    attribute, hook or driver of the repository applies, no symlink inside ``.git`` is
    followed, and layouts that point elsewhere (``commondir``, alternates, unknown
    extensions) are refused. They are bounded by ``process_limits.default_timeout_ms``
    and fixed size limits, and :meth:`dispose` stops them.

    ``protected_paths`` names paths no operation may change (``PROTECTED_HOST_PATHS``:
    ``tasks`` and every ``.git``): ``write_file`` refuses them with
    ``WORKSPACE_PATH_PROTECTED``, and what a command changes there is put back after it and
    reported with ``WORKSPACE_PROTECTED_PATH_CHANGED`` (see
    :mod:`harness_workspace.local._protected` for the exact set kept inside ``.git``).
    Credentials are withheld (``withhold_credentials``, on by default): ``read_file`` of a
    path on the deny list of :mod:`harness_workspace.credentials` (``.env``, ``*.pem``,
    ``.ssh/…``, ``.aws/…``, case-insensitively) raises ``WORKSPACE_SECRET_WITHHELD`` before
    anything is opened; ``.git/config`` is returned without credentials; ``diff`` shows such a
    file's change (its name and modes) with a ``Content withheld`` line instead of its
    content and object ids. ``list_files`` still lists the names: they are present, only their
    content is withheld.

    What it does not guarantee: ``execute`` runs programs with the user's full authority
    (this is not a sandbox), and a hard link made outside the adapter from a file inside
    the root to one outside is read like any file (also by ``diff``).

    Args:
        root: The workspace directory. It is opened once, here (a blocking call); the
            path itself is trusted configuration and may be a symlink.
        max_file_bytes: The byte cap of a file read and of contents written.
        max_list_entries: The most directory entries one ``list_files`` may visit;
            past it the call fails with ``WORKSPACE_LIST_TOO_LARGE`` (no silent truncation).
        process_limits: Timeouts and output caps of ``execute``; ``diff`` and ``snapshot`` take
            their deadline (and ``diff`` its largest patch) from them too.
        environment: Extra variables for commands, added to a scrubbed environment.
        resolver: ``"auto"``, or force ``"openat2"`` or ``"walk"`` (for tests).
        protected_paths: Names protected at the root (``"tasks"``) or at any depth
            (``"**/.git"``); none by default.
        withhold_credentials: Withhold credential files and scrub ``.git/config`` (the
            default); ``False`` is the operator's opt-out, for a root that holds no host
            secrets (a sandbox's copy, whose commands could read every file anyway).

    Raises:
        LocalWorkspaceError: The root cannot be opened as a directory.
        ValueError: An option is out of range, or ``"openat2"`` was forced where the
            kernel does not provide it.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_list_entries: int = DEFAULT_MAX_LIST_ENTRIES,
        process_limits: ProcessLimits | None = None,
        environment: Mapping[str, str] | None = None,
        resolver: ResolverChoice = "auto",
        protected_paths: Iterable[str] = (),
        withhold_credentials: bool = True,
    ) -> None:
        self._protected = ProtectedPaths(protected_paths)
        if resolver not in ("auto", "openat2", "walk"):
            raise ValueError(f"resolver must be 'auto', 'openat2' or 'walk', got {resolver!r}")
        self._max_file_bytes = _positive("max_file_bytes", max_file_bytes)
        self._max_list_entries = _positive("max_list_entries", max_list_entries)
        self._process_limits = process_limits if process_limits is not None else ProcessLimits()
        self._environment = dict(environment) if environment is not None else None
        if type(withhold_credentials) is not bool:
            raise ValueError(f"withhold_credentials must be a bool, got {withhold_credentials!r}")
        self._withhold = withhold_credentials
        root_fd = open_root(root, None)
        try:
            available = openat2_available(root_fd)
            if resolver == "openat2" and not available:
                raise ValueError("openat2 is not available on this kernel")
            chosen: ResolverName = "openat2" if resolver != "walk" and available else "walk"
        except BaseException:
            os.close(root_fd)
            raise
        self._resolver = PathResolver(chosen)
        self._root_fd: int | None = root_fd
        self._lock = threading.Lock()
        self._users = 0
        self._disposed = False
        self._drained: trio.Event | None = None
        self._process_scopes: set[trio.CancelScope] = set()
        self._stops: set[threading.Event] = set()

    @property
    def resolver(self) -> ResolverName:
        """The resolver in use: ``"openat2"`` or ``"walk"``."""
        return self._resolver.name

    @property
    def disposed(self) -> bool:
        """Whether :meth:`dispose` has been called."""
        return self._disposed

    # -- lifecycle ------------------------------------------------------------------

    def _refuse_if_disposed(self, operation: str) -> None:
        if self._disposed:
            raise LocalWorkspaceError(WORKSPACE_DISPOSED, "workspace has been disposed", operation)

    def _acquire(self, operation: str) -> int:
        with self._lock:
            if self._disposed or self._root_fd is None:
                raise LocalWorkspaceError(WORKSPACE_DISPOSED, "workspace has been disposed", operation)
            self._users += 1
            return self._root_fd

    def _release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users or not self._disposed:
                return
            self._close_root()
        if self._drained is not None:
            self._drained.set()

    def _close_root(self) -> None:
        if self._root_fd is not None:
            fd, self._root_fd = self._root_fd, None
            os.close(fd)

    async def _in_thread(self, operation: str, work: Callable[[int], _T]) -> _T:
        root_fd = self._acquire(operation)
        try:
            # Not abandoned on cancellation: the thread uses ``root_fd``, so the lease
            # is held until it has returned.
            return await trio.to_thread.run_sync(work, root_fd)
        finally:
            self._release()

    async def _with_processes(self, operation: str, work: Callable[[int], Awaitable[_T]]) -> _T:
        root_fd = self._acquire(operation)
        try:
            with trio.CancelScope() as scope:
                self._process_scopes.add(scope)
                try:
                    return await work(root_fd)
                finally:
                    self._process_scopes.discard(scope)
            raise LocalWorkspaceError(WORKSPACE_DISPOSED, "workspace was disposed while running", operation)
        finally:
            self._release()

    async def _in_stoppable_thread(self, operation: str, work: Callable[[int, threading.Event], _T]) -> _T:
        """Run ``work`` in a thread that gives up when told to, by ``dispose`` or cancellation.

        ``work`` must check the event as it goes. The thread is never abandoned: on
        cancellation the event is set and the call waits, shielded, until the thread has
        returned, so the lease on the root descriptor outlives every use of it.
        """
        root_fd = self._acquire(operation)
        stop = threading.Event()
        finished = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def run() -> _T:
            try:
                return work(root_fd, stop)
            finally:
                token.run_sync_soon(finished.set)

        with self._lock:
            self._stops.add(stop)
            if self._disposed:
                stop.set()
        try:
            try:
                return await trio.to_thread.run_sync(run, abandon_on_cancel=True)
            except trio.Cancelled:
                stop.set()
                with trio.CancelScope(shield=True):
                    await finished.wait()
                raise
        finally:
            with self._lock:
                self._stops.discard(stop)
            self._release()

    async def dispose(self) -> None:
        """Kill running commands, stop ``diff`` and ``snapshot``, wait for in-flight work, close the root.

        Idempotent. Every other operation afterwards raises ``WORKSPACE_DISPOSED``.
        """
        with self._lock:
            self._disposed = True
            for stop in self._stops:
                stop.set()
            if self._users == 0:
                self._close_root()
                return
            if self._drained is None:
                self._drained = trio.Event()
            drained = self._drained
        for scope in list(self._process_scopes):
            scope.cancel()
        await drained.wait()

    # -- files ----------------------------------------------------------------------

    async def read_file(self, path: str) -> str:
        """Return the UTF-8 text of the regular file at ``path``.

        A credential path is refused and ``.git/config`` comes back scrubbed, unless the
        workspace was made with ``withhold_credentials=False``.

        Raises:
            LocalWorkspaceError: ``WORKSPACE_SECRET_WITHHELD`` for a path on the credential
                deny list (nothing is opened), ``WORKSPACE_TOO_LARGE`` past the byte cap
                (enforced while reading), ``WORKSPACE_INVALID_UTF8``, ``WORKSPACE_NOT_A_FILE``
                for a directory, FIFO, device or socket, and the path codes.
        """
        components = parse_path(path, "read_file", allow_root=False)
        canonical = join_components(components)
        if self._withhold and is_credential_path(canonical):
            raise LocalWorkspaceError(
                WORKSPACE_SECRET_WITHHELD,
                f"read_file {path!r}: withheld, the name is on the credential deny list",
                "read_file",
            )
        data = await self._in_thread("read_file", lambda root_fd: self._read_bytes(root_fd, path, components))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise LocalWorkspaceError(
                WORKSPACE_INVALID_UTF8, f"read_file {path!r}: file is not valid UTF-8", "read_file"
            ) from error
        return scrub_git_config(text) if self._withhold and is_git_config_path(canonical) else text

    def _read_bytes(self, root_fd: int, path: str, components: Components) -> bytes:
        cap = self._max_file_bytes
        try:
            fd = self._resolver.open(root_fd, components, _READ_FLAGS)
        except OSError as error:
            fail_os(error, path, "read_file")
        try:
            info = os.fstat(fd)
            refuse_non_regular(info.st_mode, path, "read_file")
            if info.st_size > cap:
                self._too_large(path, "read_file")
            chunks: list[bytes] = []
            total = 0
            while True:
                # Ask for one byte more than the size so the end is seen in one call; the
                # cap is enforced on what arrives, since the file may grow meanwhile.
                wanted = min(cap + 1 - total, max(info.st_size - total + 1, _MIN_READ_CHUNK))
                chunk = os.read(fd, wanted)
                if not chunk:
                    break
                total += len(chunk)
                if total > cap:
                    self._too_large(path, "read_file")
                chunks.append(chunk)
        except OSError as error:
            fail_os(error, path, "read_file")
        finally:
            os.close(fd)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _too_large(self, path: str, operation: str) -> None:
        raise LocalWorkspaceError(
            WORKSPACE_TOO_LARGE, f"{operation} {path!r}: exceeds {self._max_file_bytes} bytes", operation
        )

    async def write_file(self, path: str, contents: str) -> None:
        """Atomically replace (or create) the regular file at ``path`` with ``contents``.

        Raises:
            LocalWorkspaceError: ``WORKSPACE_TOO_LARGE``, ``WORKSPACE_INVALID_UTF8`` (lone
                surrogates), ``WORKSPACE_SYMLINK_REFUSED``, ``WORKSPACE_LINKED_FILE``,
                ``WORKSPACE_NOT_A_FILE``, ``WORKSPACE_NOT_FOUND`` for a missing parent, and
                the path codes. On any failure no temporary file is left behind.
        """
        components = parse_path(path, "write_file", allow_root=False)
        self._protected.refuse_write(path, components)
        if len(contents) > self._max_file_bytes:
            self._too_large(path, "write_file")
        try:
            data = contents.encode("utf-8")
        except UnicodeEncodeError as error:
            raise LocalWorkspaceError(
                WORKSPACE_INVALID_UTF8,
                f"write_file {path!r}: contents are not encodable as UTF-8",
                "write_file",
            ) from error
        if len(data) > self._max_file_bytes:
            self._too_large(path, "write_file")
        await self._in_thread(
            "write_file", lambda root_fd: self._write_bytes(root_fd, path, components, data)
        )

    def _write_bytes(self, root_fd: int, path: str, components: Components, data: bytes) -> None:
        if not components:
            raise LocalWorkspaceError(
                WORKSPACE_NOT_A_FILE, "write_file: path is the workspace root", "write_file"
            )
        name = components[-1]
        try:
            dir_fd = self._resolver.open(root_fd, components[:-1], _DIRECTORY_FLAGS)
        except OSError as error:
            fail_os(error, path, "write_file")
        try:
            existing = self._check_write_target(dir_fd, name, path)
            self._replace(dir_fd, name, data, None if existing is None else stat.S_IMODE(existing.st_mode))
        except OSError as error:
            fail_os(error, path, "write_file")
        finally:
            os.close(dir_fd)

    @staticmethod
    def _check_write_target(dir_fd: int, name: str, path: str) -> os.stat_result | None:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(info.st_mode):
            raise LocalWorkspaceError(
                WORKSPACE_SYMLINK_REFUSED, f"write_file {path!r}: target is a symlink", "write_file"
            )
        refuse_non_regular(info.st_mode, path, "write_file")
        if info.st_nlink > 1:
            raise LocalWorkspaceError(
                WORKSPACE_LINKED_FILE,
                f"write_file {path!r}: target has {info.st_nlink} hard links",
                "write_file",
            )
        return info

    @staticmethod
    def _replace(dir_fd: int, name: str, data: bytes, existing_mode: int | None) -> None:
        temporary = f"{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        fd = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o666,
            dir_fd=dir_fd,
        )
        renamed = False
        try:
            try:
                if existing_mode is not None:
                    os.fchmod(fd, existing_mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            renamed = True
            os.fsync(dir_fd)
        finally:
            if not renamed:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=dir_fd)

    async def list_files(self, path: str) -> list[str]:
        """Return the sorted root-relative paths of the non-directory entries at or below ``path``.

        Raises:
            LocalWorkspaceError: ``WORKSPACE_LIST_TOO_LARGE`` when more entries than the
                bound would be visited (or the tree is deeper than 128 levels), and the
                path codes.
        """
        components = parse_path(path, "list_files", allow_root=True)
        return await self._in_thread("list_files", lambda root_fd: self._list(root_fd, path, components))

    def _list(self, root_fd: int, path: str, components: Components) -> list[str]:
        try:
            fd = self._resolver.open(root_fd, components, _READ_FLAGS)
        except OSError as error:
            fail_os(error, path, "list_files")
        listing = _Listing(path, self._max_list_entries)
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                return [join_components(components)]
            prefix = join_components(components)
            listing.visit(fd, f"{prefix}/" if prefix else "", 0)
        except OSError as error:
            fail_os(error, path, "list_files")
        finally:
            os.close(fd)
        listing.found.sort()
        return listing.found

    # -- processes ------------------------------------------------------------------

    async def execute(self, command: CommandRequest) -> CommandResult:
        """Run ``command.argv`` (no shell) with its working directory resolved inside the root.

        ``cwd`` is resolved like any other path (``None``, ``""`` or ``"."`` is the root);
        the command then runs with the user's authority, with a scrubbed environment.
        :meth:`dispose` kills it.

        Raises:
            LocalWorkspaceError: The path codes for ``cwd``, ``WORKSPACE_NOT_A_DIRECTORY``,
                ``WORKSPACE_COMMAND_NOT_FOUND``, ``WORKSPACE_COMMAND_FAILED_TO_START``,
                ``WORKSPACE_TIMEOUT_TOO_LARGE``, ``WORKSPACE_DISPOSED``.
        """
        self._refuse_if_disposed("execute")
        cwd = command.cwd or ""
        components = parse_path(cwd, "execute", allow_root=True)
        limits = self._process_limits
        environment = scrubbed_environment(self._environment)

        async def run(root_fd: int) -> CommandResult:
            cwd_fd = await trio.to_thread.run_sync(self._open_directory, root_fd, cwd, components)
            try:
                return await run_command(
                    cwd_fd,
                    tuple(command.argv),
                    timeout_ms=command.timeout_ms,
                    signal=command.signal,
                    environment=environment,
                    limits=limits,
                )
            finally:
                os.close(cwd_fd)

        protected = self._protected
        if protected:
            return await self._with_processes("execute", lambda fd: guarded_execution(fd, protected, run))
        return await self._with_processes("execute", run)

    async def resolve_directory(self, path: str, operation: str = "execute") -> str:
        """The canonical root-relative spelling of the directory ``path`` (``""`` for the root).

        ``path`` is parsed and resolved exactly as ``execute`` resolves its ``cwd`` (no
        symlink followed, ``..`` never above the root) and must name a directory now. For an
        adapter that runs commands elsewhere over this root (a sandbox) and needs the checked
        spelling; it is not one of the seven workspace operations.

        Raises:
            LocalWorkspaceError: The path codes, ``WORKSPACE_NOT_A_DIRECTORY``,
                ``WORKSPACE_DISPOSED``; each names ``operation``.
        """
        self._refuse_if_disposed(operation)
        components = parse_path(path, operation, allow_root=True)

        def check(root_fd: int) -> str:
            try:
                os.close(self._resolver.open(root_fd, components, _DIRECTORY_FLAGS))
            except OSError as error:
                fail_os(error, path, operation)
            return join_components(components)

        return await self._in_thread(operation, check)

    def _open_directory(self, root_fd: int, path: str, components: Components) -> int:
        try:
            return self._resolver.open(root_fd, components, _DIRECTORY_FLAGS)
        except OSError as error:
            fail_os(error, path, "execute")

    def _budget(self, operation: str, stop: threading.Event) -> Budget:
        return Budget(
            operation, ReaderLimits(), timeout_ms=self._process_limits.default_timeout_ms, stop=stop
        )

    async def diff(self) -> str:
        """Return the work tree's changes against ``HEAD`` as a git-style patch.

        The patch covers modified, deleted and untracked files (ignored untracked files are
        left out) in the form ``git diff`` prints and ``git apply`` reads. It is computed by
        reading the repository directly: no git program runs and nothing from the
        repository's configuration applies, so no filter, diff driver, hook or fsmonitor can
        run. The root's ``.git`` must be a real folder; symlinks inside it, ``commondir``
        and alternates are refused. The work is bounded by the process limits'
        ``default_timeout_ms`` and ``max_output_bytes`` (a longer patch is an error, never
        cut), and :meth:`dispose` stops it. A changed credential file is shown by name and
        modes with a ``Content withheld`` line (unless ``withhold_credentials=False``).

        Raises:
            LocalWorkspaceError: ``WORKSPACE_NOT_A_REPOSITORY``, ``WORKSPACE_GIT_UNSUPPORTED``,
                ``WORKSPACE_GIT_FAILED``, ``WORKSPACE_GIT_TOO_LARGE``,
                ``WORKSPACE_OUTPUT_TOO_LARGE``, ``WORKSPACE_SYMLINK_REFUSED``,
                ``WORKSPACE_PATH_ESCAPES_ROOT``, ``WORKSPACE_IO_FAILED``, ``WORKSPACE_DISPOSED``.
        """
        self._refuse_if_disposed("diff")
        cap = self._process_limits.max_output_bytes
        return await self._in_stoppable_thread(
            "diff",
            lambda root_fd, stop: git_diff(
                root_fd, self._budget("diff", stop), max_output_bytes=cap, withhold=self._withhold
            ),
        )

    async def snapshot(self) -> WorkspaceSnapshot:
        """Return ``git-tree-<id>``: the tree id ``git add --all && git write-tree`` would give.

        Computed like :meth:`diff`, without running git or writing anything. The metadata
        holds ``adapter``, ``head`` (the commit, or ``None``), ``tree`` and ``dirty``.

        Raises:
            LocalWorkspaceError: as :meth:`diff`, except ``WORKSPACE_OUTPUT_TOO_LARGE``.
        """
        self._refuse_if_disposed("snapshot")
        return await self._in_stoppable_thread(
            "snapshot", lambda root_fd, stop: git_snapshot(root_fd, self._budget("snapshot", stop))
        )


class _Listing:
    """One recursive ``list_files`` walk: descriptor-relative, never following a symlink."""

    __slots__ = ("found", "limit", "path", "visited")

    def __init__(self, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.visited = 0
        self.found: list[str] = []

    def _refuse(self, message: str) -> LocalWorkspaceError:
        return LocalWorkspaceError(
            WORKSPACE_LIST_TOO_LARGE, f"list_files {self.path!r}: {message}", "list_files"
        )

    def visit(self, dir_fd: int, prefix: str, depth: int) -> None:
        if depth > _MAX_LIST_DEPTH:
            raise self._refuse(f"deeper than {_MAX_LIST_DEPTH} levels")
        directories: list[str] = []
        # ``scandir`` on a descriptor works on a duplicate; entry types come from
        # ``d_type`` (or ``fstatat`` without following), never from following a link.
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                self.visited += 1
                if self.visited > self.limit:
                    raise self._refuse(f"more than {self.limit} entries")
                try:
                    is_directory = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_directory = False
                if is_directory:
                    directories.append(entry.name)
                else:
                    self.found.append(prefix + entry.name)
        for name in directories:
            try:
                child = os.open(name, _CHILD_DIRECTORY_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                continue  # removed while listing
            except OSError as error:
                # Replaced by a file or a symlink while listing: list the name, never follow it.
                if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                self.found.append(prefix + name)
                continue
            try:
                self.visit(child, f"{prefix}{name}/", depth + 1)
            finally:
                os.close(child)
