"""Path parsing and descriptor-relative resolution for the local workspace adapter.

A requested path is first parsed lexically into components (no ``..`` survives parsing:
it pops the previous component, or the path escapes the root). The components are then
resolved *relative to the root directory descriptor*, never as a host path string, and
**no symlink is ever followed**, in any component, by either resolver:

- ``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where
  the kernel has it (Linux >= 5.6): the kernel refuses the walk at the first symlink,
  atomically with respect to concurrent renames;
- otherwise a component-by-component walk with ``openat(dir_fd, name, O_NOFOLLOW)``, which
  refuses every symlink it meets.

Both therefore open exactly the file the parsed path names, which is what a permission
check on that path judged; a link inside the root would let one path be judged and another
opened. A refused link is reported with its root-relative name: as an escape
(``EXDEV``) when its target is absolute or climbs above the root, as a refused symlink
(``ELOOP``) otherwise, the same way by both resolvers. Hard links are not symlinks and are
not detected here (see ``LocalWorkspace``).

Everything here is synchronous and blocking; callers run it in a worker thread.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections.abc import Callable
from typing import Final, Literal, NoReturn, TypeAlias

from harness_workspace.local._errors import (
    WORKSPACE_IO_FAILED,
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_PATH_INVALID,
    WORKSPACE_PATH_TOO_LONG,
    WORKSPACE_SYMLINK_REFUSED,
    LocalWorkspaceError,
)

__all__ = [
    "NAME_MAX",
    "PATH_MAX",
    "Components",
    "PathResolver",
    "RefusedSymlinkError",
    "ResolverName",
    "fail_os",
    "join_components",
    "open_root",
    "openat2_available",
    "parse_path",
    "refuse_non_regular",
]

Components: TypeAlias = tuple[str, ...]
ResolverName: TypeAlias = Literal["openat2", "walk"]

NAME_MAX: Final = 255
"""The longest path component in bytes (Linux ``NAME_MAX``)."""
PATH_MAX: Final = 4096
"""Linux ``PATH_MAX`` in bytes, including the terminating NUL."""

_SYS_OPENAT2: Final[dict[str, int]] = {"x86_64": 437, "aarch64": 437, "arm64": 437}
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08
_RESOLVE_FLAGS: Final = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_OPENAT2_RETRIES: Final = 64
# How a directory on the way to the final component is entered: never through a link.
_DIRECTORY_PATH_FLAGS: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


def _load_openat2() -> Callable[[int, bytes, int], int] | None:
    number = _SYS_OPENAT2.get(platform.machine())
    if number is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    syscall.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
    size = ctypes.sizeof(_OpenHow)

    def openat2(dir_fd: int, path: bytes, flags: int) -> int:
        how = _OpenHow(flags, 0, _RESOLVE_FLAGS)
        for _ in range(_OPENAT2_RETRIES):
            result = int(syscall(number, dir_fd, path, ctypes.addressof(how), size))
            if result >= 0:
                return result
            code = ctypes.get_errno()
            # EAGAIN: a concurrent rename raced the kernel's ``..`` check; EINTR: a signal.
            if code not in (errno.EAGAIN, errno.EINTR):
                raise OSError(code, os.strerror(code))
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    return openat2


_openat2: Final = _load_openat2()


def openat2_available(dir_fd: int) -> bool:
    """Whether ``openat2`` with ``RESOLVE_BENEATH`` works here, probed on ``dir_fd``."""
    if _openat2 is None:
        return False
    try:
        fd = _openat2(dir_fd, b".", os.O_PATH | os.O_CLOEXEC)
    except OSError as error:
        # ENOSYS: an older kernel; EPERM: a seccomp filter that does not know the call.
        if error.errno in (errno.ENOSYS, errno.EPERM):
            return False
        raise
    os.close(fd)
    return True


def parse_path(path: str, operation: str, *, allow_root: bool) -> Components:
    """Split ``path`` into components relative to the root, refusing what can never be inside.

    ``.`` and empty components are dropped and ``..`` pops the previous component, so the
    result contains only plain names. Symlinks are not considered here; the resolver does.

    Args:
        path: The requested path, relative to the workspace root.
        operation: The operation name for errors.
        allow_root: Whether ``""`` and ``"/"`` may name the root itself (``list_files``).

    Raises:
        LocalWorkspaceError: ``WORKSPACE_PATH_INVALID`` for an empty, absolute or NUL-bearing
            path, ``WORKSPACE_PATH_TOO_LONG`` past NAME_MAX/PATH_MAX, and
            ``WORKSPACE_PATH_ESCAPES_ROOT`` when ``..`` climbs above the root.
    """
    if allow_root and path in ("", "/"):
        return ()
    if not path:
        raise LocalWorkspaceError(WORKSPACE_PATH_INVALID, "path must not be empty", operation)
    if "\x00" in path:
        raise LocalWorkspaceError(WORKSPACE_PATH_INVALID, "path must not contain NUL", operation)
    if path.startswith("/"):
        raise LocalWorkspaceError(
            WORKSPACE_PATH_INVALID, f"path must be relative to the workspace root: {path!r}", operation
        )
    try:
        encoded = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise LocalWorkspaceError(WORKSPACE_PATH_INVALID, "path is not encodable", operation) from None
    if len(encoded) >= PATH_MAX:
        raise LocalWorkspaceError(WORKSPACE_PATH_TOO_LONG, f"path exceeds {PATH_MAX - 1} bytes", operation)
    components: list[str] = []
    for part, raw in zip(path.split("/"), encoded.split(b"/"), strict=True):
        if len(raw) > NAME_MAX:
            raise LocalWorkspaceError(
                WORKSPACE_PATH_TOO_LONG, f"path component exceeds {NAME_MAX} bytes", operation
            )
        if part in ("", "."):
            continue
        if part == "..":
            if not components:
                raise LocalWorkspaceError(
                    WORKSPACE_PATH_ESCAPES_ROOT, f"path escapes the workspace root: {path!r}", operation
                )
            components.pop()
            continue
        components.append(part)
    return tuple(components)


def join_components(components: Components) -> str:
    """The canonical relative spelling of parsed components (``""`` for the root)."""
    return "/".join(components)


_ERRNO_CODES: Final[dict[int, tuple[str, str]]] = {
    errno.ENOENT: (WORKSPACE_NOT_FOUND, "no such file or directory"),
    errno.ENOTDIR: (WORKSPACE_NOT_A_DIRECTORY, "a path component is not a directory"),
    errno.EXDEV: (WORKSPACE_PATH_ESCAPES_ROOT, "path resolves outside the workspace root"),
    errno.ELOOP: (WORKSPACE_SYMLINK_REFUSED, "path goes through a symlink that is refused"),
    errno.ENAMETOOLONG: (WORKSPACE_PATH_TOO_LONG, "path is too long"),
    errno.EISDIR: (WORKSPACE_NOT_A_FILE, "path is a directory"),
    errno.ENXIO: (WORKSPACE_NOT_A_FILE, "path is not a regular file"),
}


class RefusedSymlinkError(OSError):
    """A symlink the resolver refused; ``filename`` is its root-relative path.

    ``errno`` is ``EXDEV`` when the link's target is absolute or climbs above the root,
    ``ELOOP`` otherwise.
    """


def fail_os(error: OSError, path: str, operation: str | None) -> NoReturn:
    """Raise the typed error for an ``OSError`` met while working on ``path``."""
    code, message = _ERRNO_CODES.get(error.errno or 0, (WORKSPACE_IO_FAILED, "operating-system failure"))
    if code == WORKSPACE_IO_FAILED:
        message = f"{message}: {error.strerror or error}"
    elif isinstance(error, RefusedSymlinkError):
        link: object = error.filename
        if error.errno == errno.EXDEV:
            message = f"{message}: {link!r} is a symlink that leads outside it"
        else:
            message = f"{link!r} is a symlink, and symlinks are refused"
    raise LocalWorkspaceError(code, f"{operation or 'open'} {path!r}: {message}", operation) from error


def open_root(root: str | os.PathLike[str], operation: str | None) -> int:
    """Open the workspace root ``root`` as a directory descriptor; the caller closes it.

    Raises:
        LocalWorkspaceError: The typed error of :func:`fail_os` when it cannot be opened.
    """
    root_path = os.fspath(root)
    try:
        return os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        fail_os(error, root_path, operation)


class PathResolver:
    """Opens parsed paths relative to a root directory descriptor, never outside it and
    never through a symlink.

    Args:
        name: ``"openat2"`` (kernel-enforced containment) or ``"walk"`` (component walk);
            both refuse every symlink and report it the same way.
    """

    __slots__ = ("name",)

    def __init__(self, name: ResolverName) -> None:
        if name == "openat2" and _openat2 is None:
            raise ValueError("openat2 is not available on this platform")
        self.name: ResolverName = name

    def open(self, root_fd: int, components: Components, flags: int, *, follow_final: bool = True) -> int:
        """Open ``components`` below ``root_fd`` with ``flags`` (``O_CLOEXEC`` is added).

        No symlink is followed in any component, the final one included, by either
        resolver.

        Args:
            root_fd: The root directory descriptor; it is not closed.
            components: Parsed components; ``()`` opens the root itself.
            flags: ``os.open`` flags for the final component.
            follow_final: Kept for compatibility; a final symlink is refused either way
                (``False`` also adds ``O_NOFOLLOW``, as it always did).

        Raises:
            RefusedSymlinkError: A component is a symlink (``ELOOP``, or ``EXDEV`` when its
                target leaves the root); ``filename`` names it, root-relative.
            OSError: Any other failure (``ENOENT``, ``ENOTDIR``, ...); a plain ``ELOOP``
                only if a link vanished before it could be named.
        """
        flags |= os.O_CLOEXEC
        if not follow_final:
            flags |= os.O_NOFOLLOW
        if not components:
            return os.open(".", flags, dir_fd=root_fd)
        if self.name == "walk":
            return self._walk(root_fd, components, flags | os.O_NOFOLLOW)
        assert _openat2 is not None
        try:
            return _openat2(root_fd, "/".join(components).encode("utf-8", "surrogateescape"), flags)
        except OSError as error:
            # RESOLVE_NO_SYMLINKS says only that some component is a link: find it, to name
            # it and classify it exactly as the walk does.
            refused = _find_refused_link(root_fd, components) if error.errno == errno.ELOOP else None
            if refused is None:
                raise
            raise refused from error

    def _walk(self, root_fd: int, components: Components, flags: int) -> int:
        current = root_fd
        try:
            for index, name in enumerate(components[:-1]):
                try:
                    following = os.open(name, _DIRECTORY_PATH_FLAGS, dir_fd=current)
                except OSError as error:
                    self._classify_walk_error(error, current, components, index)
                if current != root_fd:
                    os.close(current)
                current = following
            try:
                return os.open(components[-1], flags, dir_fd=current)
            except OSError as error:
                self._classify_walk_error(error, current, components, len(components) - 1)
        finally:
            if current != root_fd:
                os.close(current)

    @staticmethod
    def _classify_walk_error(error: OSError, dir_fd: int, components: Components, index: int) -> NoReturn:
        # ``O_NOFOLLOW`` reports a symlink as ELOOP (last component) or ENOTDIR (with
        # O_DIRECTORY on some kernels); only a look at the entry tells which.
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            refused = _refused_link(dir_fd, components, index)
            if refused is not None:
                raise refused from error
        raise error


def _refused_link(dir_fd: int, components: Components, index: int) -> RefusedSymlinkError | None:
    """The error for ``components[index]`` (an entry of ``dir_fd``) if it is a symlink, else ``None``.

    The link is read only to say *why* it is refused: a target that is absolute or climbs
    above the root is an escape attempt (``EXDEV``), any other link is refused as such
    (``ELOOP``). The target itself never appears in the error.
    """
    try:
        info = os.stat(components[index], dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISLNK(info.st_mode):
            return None
        target = os.readlink(components[index], dir_fd=dir_fd)
    except OSError:
        return None
    link = "/".join(components[: index + 1])
    if _target_escapes(target, index):
        return RefusedSymlinkError(errno.EXDEV, "symlink leaves the workspace root", link)
    return RefusedSymlinkError(errno.ELOOP, "symlink refused", link)


def _find_refused_link(root_fd: int, components: Components) -> RefusedSymlinkError | None:
    """The first symlink among ``components`` below ``root_fd``, as its error; ``None`` if none.

    Used after ``openat2`` refused a symlink somewhere; directories are entered with
    ``O_NOFOLLOW``, so the search itself never follows a link either. ``None`` means the
    tree changed in between.
    """
    current = root_fd
    try:
        for index, name in enumerate(components):
            refused = _refused_link(current, components, index)
            if refused is not None or index == len(components) - 1:
                return refused
            try:
                following = os.open(name, _DIRECTORY_PATH_FLAGS, dir_fd=current)
            except OSError:
                return None
            if current != root_fd:
                os.close(current)
            current = following
        return None
    finally:
        if current != root_fd:
            os.close(current)


def _target_escapes(target: str, depth: int) -> bool:
    if target.startswith("/"):
        return True
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def refuse_non_regular(mode: int, path: str, operation: str) -> None:
    """Raise ``WORKSPACE_NOT_A_FILE`` unless ``mode`` describes a regular file."""
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise LocalWorkspaceError(WORKSPACE_NOT_A_FILE, f"{operation} {path!r}: path is {kind}", operation)
