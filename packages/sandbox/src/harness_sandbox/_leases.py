"""Leases: each live sandbox's user ids and home, held by its owner, swept when the owner is gone.

Run as root, a sandbox's copy and processes belong to a user id **no host account uses**,
and to no other live sandbox: an even id ``U`` of :data:`SANDBOX_ID_RANGE` for the commands
(user and group), ``U + 1`` for the Docker engine's PID 1. Before an id is taken the range is
checked against ``/etc/passwd``, ``/etc/group``, ``/etc/subuid`` and ``/etc/subgid`` (and the
chosen ids against the name service), so another account can neither read nor write the
copy nor signal or trace a sandboxed process. Not root, a sandbox runs as the caller itself.

The registry (``/run/harness-sandbox`` as root, else ``<tmp>/harness-sandbox-<uid>``; mode
0700) holds one file per live sandbox, ``<U>.lease`` (or ``own-<hex>.lease``), naming its ids,
its home and its owner (pid and start time). The owner holds an exclusive ``flock`` on the
file for the sandbox's life; the kernel drops it when the owner dies, however it dies. A
sweep takes the lock of every lease it can: only a dead owner's, never a live one's, and
never one another sweep is removing. What it removes is what the owner left: every process
of the lease's ids (which only the sandbox has), the copy's file system (its loop device
goes with it), the home, then the lease.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import secrets
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import msgspec

from harness_sandbox._copy import remove_tree
from harness_sandbox._disk import unmount_ceiling
from harness_sandbox._errors import SANDBOX_DISPOSE_FAILED, SANDBOX_IDS_UNAVAILABLE, SandboxError
from harness_sandbox._supervise import process_start_time

__all__ = [
    "COPY_NAME",
    "HOME_PREFIX",
    "SANDBOX_ID_RANGE",
    "Lease",
    "check_id_range",
    "claim_lease",
    "sweep_leases",
]

SANDBOX_ID_RANGE: Final = range(2_100_000_000, 2_100_065_536)
"""The user and group ids sandboxes run as when the host process is root (even ones for commands).

Far above the ids ``useradd`` hands out (``UID_MAX`` 60000) and the ranges systemd reserves
for dynamic users and containers, below 2**31 (where signed 32-bit ids would turn negative).
"""
HOME_PREFIX: Final = "harness-sbx-"
COPY_NAME: Final = "workspace"

_SUFFIX: Final = ".lease"
_KILL_SECONDS: Final = 5.0
_HOST_FILES: Final = ("/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid")


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    uid: int
    gid: int
    allocated: bool
    """The ids came from the range: every process of ``uid`` or ``uid + 1`` is the sandbox's."""
    home: str
    owner_pid: int
    owner_start: int | None


@dataclass(slots=True)
class Lease:
    """One live sandbox's ids and home, held (``flock``) by this process until :meth:`release`."""

    uid: int
    gid: int
    home: str
    path: str
    descriptor: int | None

    def release(self) -> None:
        """Give the ids back: delete the lease file, then drop the lock; idempotent."""
        if self.descriptor is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        finally:
            os.close(self.descriptor)
            self.descriptor = None


def registry_directory() -> str:
    """The registry, made (0700) if missing and checked to be this user's alone.

    Raises:
        SandboxError: ``SANDBOX_IDS_UNAVAILABLE``: the registry is not a private directory.
    """
    user = os.geteuid()
    if user == 0 and os.path.isdir("/run"):
        path = "/run/harness-sandbox"
    else:
        path = os.path.join(tempfile.gettempdir(), f"harness-sandbox-{user}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != user or info.st_mode & 0o077:
        raise SandboxError(
            SANDBOX_IDS_UNAVAILABLE,
            f"the sandbox registry {path} must be a directory of uid {user} with mode 0700",
            "create",
        )
    return path


def check_id_range(ids: range) -> None:
    """Refuse a range that a host account, group or subordinate id range uses.

    Raises:
        SandboxError: ``SANDBOX_IDS_UNAVAILABLE`` naming the colliding entry.
    """
    if ids.step != 1 or len(ids) < 2 or ids.start < 1 or ids.stop > 2**31:
        raise SandboxError(
            SANDBOX_IDS_UNAVAILABLE,
            f"the sandbox id range must be consecutive, hold two ids or more and lie within 1..2**31-1, "
            f"not {ids!r}",
            "create",
        )
    for path in _HOST_FILES:
        for name, start, count in _host_entries(path):
            if start < ids.stop and ids.start < start + count:
                raise SandboxError(
                    SANDBOX_IDS_UNAVAILABLE,
                    f"the sandbox id range {ids.start}-{ids.stop - 1} collides with {name!r} in {path} "
                    f"({start}" + (f"-{start + count - 1})" if count > 1 else ")"),
                    "create",
                )


def _host_entries(path: str) -> Iterator[tuple[str, int, int]]:
    """``(name, first id, count)`` of each entry of an id file (``passwd``/``group`` or ``sub[ug]id``)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return
    subordinate = path.endswith(("subuid", "subgid"))
    for line in lines:
        fields = line.split(":")
        try:
            if subordinate and len(fields) >= 3:
                yield fields[0], int(fields[1]), int(fields[2])
            elif not subordinate and len(fields) >= 3:
                yield fields[0], int(fields[2]), 1
        except ValueError:
            continue  # a comment or a malformed line names no id


def claim_lease(home: str, ids: range | None) -> Lease:
    """Take a lease for a sandbox whose home will be ``home`` (not made yet).

    Args:
        home: The home's absolute path, recorded so a sweep can remove it.
        ids: The range to take two free ids from (root), or ``None`` for this process's own
            user and group (the ids are then shared, not allocated).

    Raises:
        SandboxError: ``SANDBOX_IDS_UNAVAILABLE``: the range collides with the host's ids or
            none of its ids is free.
    """
    registry = registry_directory()
    owner_pid = os.getpid()
    owner_start = process_start_time(owner_pid)
    temporary = os.path.join(registry, f".new-{secrets.token_hex(8)}")
    descriptor = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        if ids is None:
            record = _Record(
                uid=os.getuid(), gid=os.getgid(), allocated=False, home=home,
                owner_pid=owner_pid, owner_start=owner_start,
            )  # fmt: skip
            path = os.path.join(registry, f"own-{secrets.token_hex(8)}{_SUFFIX}")
            _write(descriptor, record)
            os.link(temporary, path)
            return Lease(record.uid, record.gid, home, path, descriptor)
        check_id_range(ids)
        for uid in _free_ids(ids, registry):
            _refuse_named_ids(uid, ids)
            record = _Record(
                uid=uid, gid=uid, allocated=True, home=home, owner_pid=owner_pid, owner_start=owner_start
            )
            _write(descriptor, record)
            path = os.path.join(registry, f"{uid}{_SUFFIX}")
            try:
                os.link(temporary, path)
            except FileExistsError:
                continue  # another process took it in the meantime
            return Lease(uid, uid, home, path, descriptor)
        raise SandboxError(
            SANDBOX_IDS_UNAVAILABLE,
            f"every id of the sandbox range {ids.start}-{ids.stop - 1} is taken by a live sandbox",
            "create",
        )
    except BaseException:
        os.close(descriptor)
        raise
    finally:
        os.unlink(temporary)


def _free_ids(ids: range, registry: str) -> Iterator[int]:
    """The even offsets of ``ids`` (with their ``+ 1`` inside) no lease holds, from a random one on."""
    taken: set[int] = set()
    for name in os.listdir(registry):
        stem = name.removesuffix(_SUFFIX)
        if stem != name and stem.isdigit():
            taken.add(int(stem))
    starts = range(ids.start, ids.stop - 1, 2)
    first = secrets.randbelow(len(starts))
    for index in range(len(starts)):
        uid = starts[(first + index) % len(starts)]
        if uid not in taken:
            yield uid


def _refuse_named_ids(uid: int, ids: range) -> None:
    """Refuse ids the name service knows (an account beyond ``/etc``, from LDAP say)."""
    for value in (uid, uid + 1):
        known = _known_name(value)
        if known is not None:
            raise SandboxError(
                SANDBOX_IDS_UNAVAILABLE,
                f"the sandbox id range {ids.start}-{ids.stop - 1} holds {value}, {known} of the host",
                "create",
            )


def _known_name(value: int) -> str | None:
    try:
        return f"the user {pwd.getpwuid(value).pw_name!r}"
    except KeyError:
        pass
    try:
        return f"the group {grp.getgrgid(value).gr_name!r}"
    except KeyError:
        return None


def _write(descriptor: int, record: _Record) -> None:
    data = msgspec.json.encode(record)
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, data, 0)


def sweep_leases() -> list[str]:
    """Remove what the sandboxes of dead owners left; return their homes, sorted.

    A lease whose lock can be taken belongs to a dead owner (a live one holds it): every
    process of its ids is killed, its copy's file system unmounted (which frees the loop
    device), its home deleted, the lease removed. Live owners' sandboxes are untouched.

    Raises:
        SandboxError: ``SANDBOX_IDS_UNAVAILABLE`` (the registry), ``SANDBOX_DISPOSE_FAILED``
            (processes that would not die, a file system that would not unmount; the lease
            stays for the next sweep).
    """
    registry = registry_directory()
    removed: list[str] = []
    for name in sorted(os.listdir(registry)):
        if not name.endswith(_SUFFIX):
            continue
        path = os.path.join(registry, name)
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner lives, or another sweep is removing it
            if os.fstat(descriptor).st_nlink == 0:
                continue  # released while we opened it
            try:
                record = msgspec.json.decode(os.pread(descriptor, 1 << 16, 0), type=_Record)
            except msgspec.DecodeError:
                record = None  # not ours to interpret: the lease alone goes
            if record is not None:
                _remove_leftovers(record)
                removed.append(record.home)
            os.unlink(path)
        finally:
            os.close(descriptor)
    return sorted(removed)


def _remove_leftovers(record: _Record) -> None:
    if record.allocated:
        _kill_processes_of(frozenset({record.uid, record.uid + 1}))
    home = record.home
    if not os.path.basename(home).startswith(HOME_PREFIX):
        return  # not a home this package made: never delete it
    try:
        info = os.lstat(home)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return
    copy = os.path.join(home, COPY_NAME)
    try:
        unmount_ceiling(home, copy)
    except OSError as error:
        raise SandboxError(
            SANDBOX_DISPOSE_FAILED,
            f"the file system of a dead owner's sandbox copy {copy} could not be unmounted: {error}",
            "sweep",
        ) from error
    remove_tree(home)


def _kill_processes_of(uids: frozenset[int]) -> None:
    deadline = time.monotonic() + _KILL_SECONDS
    while True:
        left = list(_live_processes_of(uids))
        if not left:
            return
        if time.monotonic() > deadline:
            raise SandboxError(
                SANDBOX_DISPOSE_FAILED,
                f"processes {left[:10]} of a dead owner's sandbox (uid {min(uids)}) survived SIGKILL",
                "sweep",
            )
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _live_processes_of(uids: frozenset[int]) -> Iterator[int]:
    """Host pids of processes (not zombies) any of whose user ids is in ``uids``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8", errors="replace") as handle:
                fields = dict(line.split(":", 1) for line in handle.read().splitlines() if ":" in line)
        except OSError:
            continue
        if fields.get("State", "").strip().startswith(("Z", "X")):
            continue
        if any(int(value) in uids for value in fields.get("Uid", "").split()):
            yield int(entry)
