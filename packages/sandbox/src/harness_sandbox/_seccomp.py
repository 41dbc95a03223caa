"""The bubblewrap engine's system-call filter: a classic-BPF seccomp program, assembled here.

``bwrap --seccomp FD`` loads the raw program (``struct sock_filter`` records, 8 bytes each:
``u16 code, u8 jt, u8 jf, u32 k``) just before it executes the command, so the filter holds
for the command and everything it starts. The policy is a deny list on top of the
namespaces, rlimits and dropped capabilities, aimed at kernel attack surface a build or a
test never needs:

- only x86_64 system calls: another architecture's calling convention (``int 0x80`` gives
  i386 numbers) and the x32 ABI (numbers with bit 30 set) would reach the kernel under
  numbers this list does not name, so both are refused as a whole;
- the calls in :data:`DENIED_SYSCALLS` fail with ``EPERM``;
- ``clone`` with any ``CLONE_NEW*`` flag fails with ``EPERM``; ``clone3``, whose flags sit
  in memory a filter cannot read, fails with ``ENOSYS`` so that the C library falls back to
  ``clone``, which the filter can inspect;
- ``personality`` is allowed only for the values programs use (query, ``PER_LINUX``,
  ``PER_LINUX32``, ``UNAME26``); ``ADDR_NO_RANDOMIZE`` and the rest fail with ``EPERM``;
- everything else is allowed.

A list of comparisons costs little: since Linux 5.11 the kernel caches, per system call,
the verdict of a filter that does not look at the arguments, so ordinary calls skip the
program altogether.
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from harness_sandbox._errors import SANDBOX_ENGINE_UNAVAILABLE, SandboxError

__all__ = [
    "AUDIT_ARCH_X86_64",
    "CLONE_NAMESPACE_FLAGS",
    "DENIED_SYSCALLS",
    "PERSONALITIES_ALLOWED",
    "SYSCALL_CLONE",
    "SYSCALL_CLONE3",
    "SYSCALL_PERSONALITY",
    "X32_SYSCALL_BIT",
    "Instruction",
    "Jump",
    "Label",
    "Statement",
    "assemble",
    "build_filter",
    "filter_program",
]

# Classic BPF opcodes (linux/bpf_common.h) the filter is made of.
BPF_LD_W_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = u32 at offset k of seccomp_data
BPF_JEQ_K: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K: Final = 0x35  # BPF_JMP | BPF_JGE | BPF_K
BPF_JSET_K: Final = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K: Final = 0x06  # BPF_RET | BPF_K

SECCOMP_RET_ALLOW: Final = 0x7FFF0000
SECCOMP_RET_ERRNO: Final = 0x00050000

AUDIT_ARCH_X86_64: Final = 0xC000003E
"""``EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE``."""
X32_SYSCALL_BIT: Final = 0x40000000

# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
OFFSET_NR: Final = 0
OFFSET_ARCH: Final = 4
OFFSET_ARG0_LOW: Final = 16  # little-endian: the low half of args[0] comes first

SYSCALL_CLONE: Final = 56
SYSCALL_PERSONALITY: Final = 135
SYSCALL_CLONE3: Final = 435

CLONE_NAMESPACE_FLAGS: Final = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
"""``clone`` flags that create a namespace; any of them makes the call fail with ``EPERM``."""

PERSONALITIES_ALLOWED: Final = frozenset({0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF})
"""``PER_LINUX``, ``PER_LINUX32``, ``UNAME26`` (and with ``PER_LINUX32``), and the query."""

DENIED_SYSCALLS: Final[Mapping[str, int]] = {
    # Debugging another process reads and writes its memory.
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_getfd": 438,
    # Mounts, roots and namespaces: the sandbox's own shape must not change.
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    # Kernel key rings are not namespaced.
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    # Large, often-exploited kernel interfaces.
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    # Handles bypass path permissions.
    "open_by_handle_at": 304,
    # Modules, kexec, the machine itself.
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "create_module": 174,
    "get_kernel_syms": 177,
    "query_module": 178,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "syslog": 103,
    "quotactl": 179,
    "quotactl_fd": 443,
    "lookup_dcookie": 212,
    "iopl": 172,
    "ioperm": 173,
    "settimeofday": 164,
    "clock_settime": 227,
    "sethostname": 170,
    "setdomainname": 171,
    "vhangup": 153,
    "fanotify_init": 300,
    # Obsolete or never implemented: nothing legitimate calls them.
    "uselib": 134,
    "ustat": 136,
    "sysfs": 139,
    "_sysctl": 156,
    "nfsservctl": 180,
    "getpmsg": 181,
    "putpmsg": 182,
    "afs_syscall": 183,
    "tuxcall": 184,
    "security": 185,
    "vserver": 236,
}
"""Every system call the filter refuses with ``EPERM`` whatever its arguments (x86_64 numbers)."""

_INSTRUCTION: Final = struct.Struct("=HBBI")
_MAX_JUMP: Final = 0xFF


@dataclass(frozen=True, slots=True)
class Instruction:
    """One ``struct sock_filter``; :meth:`encode` checks every field's range."""

    code: int
    jt: int
    jf: int
    k: int

    def encode(self) -> bytes:
        """The 8 bytes of the record in the machine's byte order.

        Raises:
            ValueError: A field does not fit its C type.
        """
        fields = (("code", self.code, 16), ("jt", self.jt, 8), ("jf", self.jf, 8), ("k", self.k, 32))
        for name, value, bits in fields:
            if type(value) is not int or not 0 <= value < 1 << bits:
                raise ValueError(f"sock_filter.{name} must be a u{bits}, got {value!r}")
        return _INSTRUCTION.pack(self.code, self.jt, self.jf, self.k)


@dataclass(frozen=True, slots=True)
class Statement:
    """A load or a return: no jump."""

    code: int
    k: int


@dataclass(frozen=True, slots=True)
class Jump:
    """A conditional jump; a target of ``None`` falls through to the next instruction."""

    code: int
    k: int
    if_true: str | None
    if_false: str | None


@dataclass(frozen=True, slots=True)
class Label:
    """Names the position of the next instruction."""

    name: str


def assemble(items: Sequence[Statement | Jump | Label]) -> list[Instruction]:
    """Resolve labels into the relative forward offsets classic BPF jumps take.

    Raises:
        ValueError: A label is defined twice, is missing, lies behind its jump (BPF jumps
            only forward) or more than 255 instructions ahead, or the program is empty.
    """
    positions: dict[str, int] = {}
    count = 0
    for item in items:
        if isinstance(item, Label):
            if item.name in positions:
                raise ValueError(f"label {item.name!r} is defined twice")
            positions[item.name] = count
        else:
            count += 1
    if count == 0:
        raise ValueError("a BPF program needs at least one instruction")

    def offset(target: str | None, index: int) -> int:
        if target is None:
            return 0
        if target not in positions:
            raise ValueError(f"label {target!r} is not defined")
        distance = positions[target] - index - 1
        if not 0 <= distance <= _MAX_JUMP:
            raise ValueError(f"label {target!r} is {distance} instructions from its jump; BPF needs 0 to 255")
        return distance

    program: list[Instruction] = []
    for item in items:
        if isinstance(item, Label):
            continue
        index = len(program)
        if isinstance(item, Jump):
            jump_true, jump_false = offset(item.if_true, index), offset(item.if_false, index)
            program.append(Instruction(item.code, jump_true, jump_false, item.k))
        else:
            program.append(Instruction(item.code, 0, 0, item.k))
    return program


def filter_program() -> list[Instruction]:
    """The policy of the module docstring as BPF instructions (for any machine; see :func:`build_filter`)."""
    allow, deny, no_such_call = "allow", "deny", "enosys"
    items: list[Statement | Jump | Label] = [
        Statement(BPF_LD_W_ABS, OFFSET_ARCH),
        Jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, None, deny),
        Statement(BPF_LD_W_ABS, OFFSET_NR),
        Jump(BPF_JGE_K, X32_SYSCALL_BIT, deny, None),
        Jump(BPF_JEQ_K, SYSCALL_CLONE, "clone", None),
        Jump(BPF_JEQ_K, SYSCALL_CLONE3, no_such_call, None),
        Jump(BPF_JEQ_K, SYSCALL_PERSONALITY, "personality", None),
    ]
    items += [Jump(BPF_JEQ_K, number, deny, None) for number in sorted(set(DENIED_SYSCALLS.values()))]
    items += [
        Statement(BPF_RET_K, SECCOMP_RET_ALLOW),
        Label("clone"),
        Statement(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
        Jump(BPF_JSET_K, CLONE_NAMESPACE_FLAGS, deny, allow),
        Label("personality"),
        Statement(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
    ]
    items += [Jump(BPF_JEQ_K, persona, allow, None) for persona in sorted(PERSONALITIES_ALLOWED)]
    items += [
        Statement(BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM),
        Label(allow),
        Statement(BPF_RET_K, SECCOMP_RET_ALLOW),
        Label(no_such_call),
        Statement(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS),
        Label(deny),
        Statement(BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM),
    ]
    return assemble(items)


def build_filter(machine: str | None = None) -> bytes:
    """The encoded filter for ``bwrap --seccomp``, for an x86_64 machine only.

    Args:
        machine: The machine's architecture name; ``platform.machine()`` when ``None``.

    Raises:
        SandboxError: ``SANDBOX_ENGINE_UNAVAILABLE`` on any other architecture, whose
            system-call numbers this filter does not know.
    """
    machine = platform.machine() if machine is None else machine
    if machine != "x86_64":
        raise SandboxError(
            SANDBOX_ENGINE_UNAVAILABLE,
            f"the bubblewrap engine's seccomp filter is written for x86_64; this machine is {machine!r}",
            "create",
        )
    return b"".join(instruction.encode() for instruction in filter_program())
