"""A hard ceiling on the copy's size: the copy lives on a loop-mounted ext4 file system of its own.

``SandboxWorkspace`` checks the copy against ``disk_bytes`` at creation, before each write and
after each command, with typed errors; inside one command only this ceiling holds a process
that writes without end: the file system is full (``ENOSPC``) a little above ``disk_bytes``
(its metadata and slack), and the host's disk is untouched. It needs root (mount, a loop
device) and ``mkfs.ext4``; where they are missing the workspace keeps the checks alone and
says so in :attr:`SandboxWorkspace.disk_ceiling`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Final

__all__ = ["ceiling_available", "mount_ceiling", "unmount_ceiling"]

_IMAGE: Final = "disk.img"
_SLACK: Final = 8 * 1024 * 1024
"""Room above ``disk_bytes`` for the file system's own metadata."""
_TOOL_ENVIRONMENT: Final = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}


def ceiling_available() -> bool:
    """Whether this process can build a ceiling: root, a loop device, ``mkfs.ext4``, ``mount``."""
    return (
        os.geteuid() == 0
        and os.path.exists("/dev/loop-control")
        and all(
            shutil.which(tool, path=_TOOL_ENVIRONMENT["PATH"]) for tool in ("mkfs.ext4", "mount", "umount")
        )
    )


def mount_ceiling(home: str, mountpoint: str, size: int, owner: tuple[int, int]) -> None:
    """Make ``mountpoint`` (new, in ``home``) an empty ext4 file system of about ``size`` bytes.

    Raises:
        OSError: a tool failed (its message included); nothing stays mounted.
    """
    image = os.path.join(home, _IMAGE)
    descriptor = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(descriptor, "wb") as handle:
        handle.truncate(size + size // 16 + _SLACK)
    _tool(
        "mkfs.ext4",
        "-q",
        "-F",
        "-m",
        "0",
        "-E",
        f"root_owner={owner[0]}:{owner[1]},lazy_itable_init=1,lazy_journal_init=1",
        image,
    )
    os.mkdir(mountpoint, 0o700)
    _tool("mount", "-o", "loop,nosuid,nodev", image, mountpoint)
    try:
        os.rmdir(os.path.join(mountpoint, "lost+found"))
        os.chmod(mountpoint, 0o700)
    except OSError:
        unmount_ceiling(home, mountpoint)
        raise


def unmount_ceiling(home: str, mountpoint: str) -> None:
    """Unmount the ceiling (if mounted) and delete its image.

    Raises:
        OSError: the file system could not be unmounted.
    """
    if os.path.ismount(mountpoint):
        _tool("umount", mountpoint)
    image = os.path.join(home, _IMAGE)
    if os.path.exists(image):
        os.unlink(image)


def _tool(*argv: str) -> None:
    done = subprocess.run(
        list(argv), env=_TOOL_ENVIRONMENT, capture_output=True, text=True, check=False, timeout=60
    )
    if done.returncode != 0:
        raise OSError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
