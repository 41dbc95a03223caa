"""The limits of one sandbox workspace, with their defaults."""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["SandboxLimits"]

_MIB: Final = 1024 * 1024


class SandboxLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one workspace's environment may use; every field has a default.

    Attributes:
        memory_bytes: Memory of the environment. Docker: ``--memory`` and ``--memory-swap``,
            exceeding it kills the process (exit 137). bubblewrap: ``RLIMIT_AS`` per process
            (an allocation past it fails: ``MemoryError``, ``ENOMEM``) and, as root on cgroup
            v1, a memory cgroup per command (exit 137).
        pids: Processes (and threads) at once (Docker ``--pids-limit``; bubblewrap
            ``RLIMIT_NPROC`` of the sandbox's own uid).
        cpus: CPUs the environment may use (Docker ``--cpus``; bubblewrap: a cgroup CPU quota
            as root on cgroup v1, and ``RLIMIT_CPU`` of budget times cpus seconds per process).
        disk_bytes: Bytes the copy may hold, checked at creation, before each write and
            after each command.
        file_bytes: The largest file a command may write (``RLIMIT_FSIZE``; Docker ``--ulimit
            fsize``).
        open_files: Descriptors per process (``RLIMIT_NOFILE``).
        default_timeout_ms: The budget of a command that names none.
        max_timeout_ms: The largest budget a command may ask for.
        max_output_bytes: Bytes kept per stream (head and tail; the middle is cut with a
            notice).
        kill_grace_ms: Between ``SIGTERM`` and ``SIGKILL`` when a command is stopped.

    Raises:
        ValueError: A limit is out of range.
    """

    memory_bytes: int = 512 * _MIB
    pids: int = 256
    cpus: float = 1.0
    disk_bytes: int = 1024 * _MIB
    file_bytes: int = 256 * _MIB
    open_files: int = 1024
    default_timeout_ms: int = 30_000
    max_timeout_ms: int = 600_000
    max_output_bytes: int = _MIB
    kill_grace_ms: int = 2_000

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "pids", "disk_bytes", "file_bytes", "open_files", "max_output_bytes"):
            value: object = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"SandboxLimits.{name} must be an int >= 1, got {value!r}")
        if self.memory_bytes < 6 * _MIB:
            raise ValueError("SandboxLimits.memory_bytes must be at least 6 MiB (Docker's floor)")
        for name in ("default_timeout_ms", "max_timeout_ms", "kill_grace_ms"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"SandboxLimits.{name} must be an int >= 0, got {value!r}")
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError("SandboxLimits.default_timeout_ms must not exceed max_timeout_ms")
        cpus: object = self.cpus
        if type(cpus) not in (int, float) or not 0.01 <= float(self.cpus) <= 1024:
            raise ValueError(f"SandboxLimits.cpus must be a number from 0.01 to 1024, got {cpus!r}")
