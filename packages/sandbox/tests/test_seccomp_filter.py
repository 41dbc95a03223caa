"""The bubblewrap engine's seccomp filter, checked by an independent classic-BPF interpreter.

The interpreter below executes the encoded bytes exactly as the kernel would (loads from
``struct seccomp_data``, forward jumps, returns) and is compared with the policy written
out as plain Python, over generated system calls of every architecture.
"""

from __future__ import annotations

import errno
import os
import re
import struct
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_sandbox import SANDBOX_ENGINE_UNAVAILABLE, SandboxError
from harness_sandbox._seccomp import (
    AUDIT_ARCH_X86_64,
    CLONE_NAMESPACE_FLAGS,
    DENIED_SYSCALLS,
    PERSONALITIES_ALLOWED,
    SYSCALL_CLONE,
    SYSCALL_CLONE3,
    SYSCALL_PERSONALITY,
    X32_SYSCALL_BIT,
    Instruction,
    Jump,
    Label,
    Statement,
    assemble,
    build_filter,
)

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_AARCH64 = 0xC00000B7
U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF

# The calls the engine's brief names; the filter must refuse each whatever its arguments.
REQUIRED_DENIALS = {
    "ptrace", "mount", "umount2", "pivot_root", "chroot", "keyctl", "add_key", "request_key", "bpf",
    "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "unshare", "setns", "open_by_handle_at", "process_vm_readv", "process_vm_writev",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "acct", "swapon", "swapoff", "reboot", "syslog",
}  # fmt: skip


def run_bpf(program: bytes, data: bytes) -> int:
    """Execute a classic-BPF seccomp program on one ``struct seccomp_data``; return its verdict."""
    assert len(program) % 8 == 0
    instructions = [struct.unpack_from("=HBBI", program, offset) for offset in range(0, len(program), 8)]
    accumulator = 0
    pc = 0
    while True:
        code, jt, jf, k = instructions[pc]  # an IndexError means the program ran off its end
        if code == 0x20:  # ld [k]
            assert k % 4 == 0
            assert k + 4 <= len(data)
            (accumulator,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: accumulator & k != 0}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # ret k
            return k
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


def seccomp_data(nr: int, arch: int, args: Sequence[int]) -> bytes:
    return struct.pack("=iIQ6Q", nr, arch, 0x401000, *args)


def expected_verdict(nr: int, arch: int, args: Sequence[int]) -> int:
    """The policy, stated independently of the assembler."""
    number = nr & U32
    if arch != AUDIT_ARCH_X86_64 or number >= X32_SYSCALL_BIT:
        return EPERM
    if number == SYSCALL_CLONE:
        return EPERM if args[0] & CLONE_NAMESPACE_FLAGS else ALLOW
    if number == SYSCALL_CLONE3:
        return ENOSYS
    if number == SYSCALL_PERSONALITY:
        return ALLOW if args[0] & U32 in PERSONALITIES_ALLOWED else EPERM
    return EPERM if number in DENIED_SYSCALLS.values() else ALLOW


FILTER = build_filter("x86_64")
INTERESTING_NUMBERS = [
    *DENIED_SYSCALLS.values(),
    SYSCALL_CLONE,
    SYSCALL_CLONE3,
    SYSCALL_PERSONALITY,
    0,
    1,
    59,
    231,
]
architectures = st.one_of(
    st.sampled_from([AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64]), st.integers(0, U32)
)
numbers = st.one_of(
    st.sampled_from(INTERESTING_NUMBERS),
    st.sampled_from(INTERESTING_NUMBERS).map(lambda number: number | X32_SYSCALL_BIT),
    st.integers(-(2**31), 2**31 - 1),
)
first_arguments = st.one_of(
    st.sampled_from(sorted(PERSONALITIES_ALLOWED)),
    st.sampled_from([0x10000000, 0x20000, 0x40000000, 0x11 | 0x01200000, 0x0040000]),
    st.integers(0, U64),
)


@given(architectures, numbers, first_arguments, st.lists(st.integers(0, U64), min_size=5, max_size=5))
def test_the_filter_gives_the_policy_verdict_for_any_system_call(
    arch: int, nr: int, first: int, rest: list[int]
) -> None:
    args = [first, *rest]
    assert run_bpf(FILTER, seccomp_data(nr, arch, args)) == expected_verdict(nr, arch, args)


@given(
    st.sampled_from([SYSCALL_CLONE, SYSCALL_CLONE3, SYSCALL_PERSONALITY]),
    st.one_of(
        first_arguments,
        st.sampled_from([1 << bit for bit in range(64)]),
        st.tuples(st.sampled_from([1 << bit for bit in range(32)]), st.integers(0, U64)).map(
            lambda pair: pair[0] | pair[1]
        ),
    ),
)
def test_the_filter_reads_the_arguments_of_the_calls_it_inspects(nr: int, first: int) -> None:
    args = [first, U64, 0, U64, 0, U64]
    assert run_bpf(FILTER, seccomp_data(nr, AUDIT_ARCH_X86_64, args)) == expected_verdict(
        nr, AUDIT_ARCH_X86_64, args
    )


def test_the_named_calls_are_refused_and_ordinary_ones_allowed() -> None:
    assert set(DENIED_SYSCALLS) >= REQUIRED_DENIALS
    for name, number in DENIED_SYSCALLS.items():
        assert run_bpf(FILTER, seccomp_data(number, AUDIT_ARCH_X86_64, [0] * 6)) == EPERM, name
    for number in (0, 1, 2, 3, 9, 57, 59, 60, 231, 257, 262):  # read write open close mmap fork execve …
        assert run_bpf(FILTER, seccomp_data(number, AUDIT_ARCH_X86_64, [0] * 6)) == ALLOW
    clone_thread = 0x3D0F00  # what pthread_create passes: no namespace flag
    assert (
        run_bpf(FILTER, seccomp_data(SYSCALL_CLONE, AUDIT_ARCH_X86_64, [clone_thread, 0, 0, 0, 0, 0]))
        == ALLOW
    )
    new_user = 0x10000000 | 17
    assert run_bpf(FILTER, seccomp_data(SYSCALL_CLONE, AUDIT_ARCH_X86_64, [new_user, 0, 0, 0, 0, 0])) == EPERM
    assert run_bpf(FILTER, seccomp_data(SYSCALL_CLONE3, AUDIT_ARCH_X86_64, [0] * 6)) == ENOSYS
    no_randomize = 0x0040000
    assert (
        run_bpf(FILTER, seccomp_data(SYSCALL_PERSONALITY, AUDIT_ARCH_X86_64, [no_randomize, 0, 0, 0, 0, 0]))
        == EPERM
    )
    # getpid through the x32 ABI, and read through int 0x80 (i386 number 3).
    assert run_bpf(FILTER, seccomp_data(39 | X32_SYSCALL_BIT, AUDIT_ARCH_X86_64, [0] * 6)) == EPERM
    assert run_bpf(FILTER, seccomp_data(3, AUDIT_ARCH_I386, [0] * 6)) == EPERM


def test_the_numbers_match_the_kernel_headers() -> None:
    header = next(
        (
            path
            for path in ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h")
            if os.path.exists(path)
        ),
        None,
    )
    if header is None:
        pytest.skip("no x86_64 kernel headers here: apt-get install linux-libc-dev")
    with open(header, encoding="ascii") as handle:
        known = {name: int(number) for name, number in re.findall(r"#define __NR_(\w+) (\d+)", handle.read())}
    named = {
        **DENIED_SYSCALLS,
        "clone": SYSCALL_CLONE,
        "clone3": SYSCALL_CLONE3,
        "personality": SYSCALL_PERSONALITY,
    }
    assert {name: known.get(name) for name in named} == named


def test_the_filter_is_for_x86_64_only() -> None:
    assert len(FILTER) % 8 == 0
    assert len(FILTER) // 8 < 4096  # BPF_MAXINSNS
    with pytest.raises(SandboxError) as caught:
        build_filter("aarch64")
    assert caught.value.code == SANDBOX_ENGINE_UNAVAILABLE
    assert "x86_64" in caught.value.message


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0xFF), st.integers(0, U32))
def test_an_instruction_encodes_to_eight_bytes_that_decode_to_its_fields(
    code: int, jt: int, jf: int, k: int
) -> None:
    encoded = Instruction(code, jt, jf, k).encode()
    assert len(encoded) == 8
    assert struct.unpack("=HBBI", encoded) == (code, jt, jf, k)


@given(
    st.sampled_from(["code", "jt", "jf", "k"]),
    st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32)),
)
def test_an_instruction_field_out_of_range_is_refused(name: str, value: int) -> None:
    fields = {"code": 0x06, "jt": 0, "jf": 0, "k": 0, name: value}
    with pytest.raises(ValueError, match=f"sock_filter.{name}"):
        Instruction(**fields).encode()


@st.composite
def programs(draw: st.DrawFn) -> list[Statement | Jump | Label]:
    """A straight-line program of loads and forward jumps to labels, ending in returns."""
    size = draw(st.integers(1, 300))
    label_at = sorted(set(draw(st.lists(st.integers(0, size), max_size=8))))
    items: list[Statement | Jump | Label] = []
    for index in range(size):
        if index in label_at:
            items.append(Label(f"L{index}"))
        ahead = [position for position in label_at if index < position <= index + 256]
        if ahead and draw(st.booleans()):
            if_true = draw(st.sampled_from([None, *(f"L{position}" for position in ahead)]))
            if_false = draw(st.sampled_from([None, *(f"L{position}" for position in ahead)]))
            items.append(Jump(0x15, draw(st.integers(0, U32)), if_true, if_false))
        else:
            items.append(Statement(0x06, index))
    if size in label_at:
        items.append(Label(f"L{size}"))
    items.append(Statement(0x06, size))
    return items


@given(programs())
def test_assembled_jumps_land_on_their_labels_or_are_refused(items: list[Statement | Jump | Label]) -> None:
    positions: dict[str, int] = {}
    count = 0
    for item in items:
        if isinstance(item, Label):
            positions[item.name] = count
        else:
            count += 1
    jumps = [item for item in items if not isinstance(item, Label)]
    too_far = any(
        isinstance(item, Jump)
        and any(
            target is not None and positions[target] - index - 1 > 255
            for target in (item.if_true, item.if_false)
        )
        for index, item in enumerate(jumps)
    )
    if too_far:
        with pytest.raises(ValueError, match="BPF needs 0 to 255"):
            assemble(items)
        return
    program = assemble(items)
    assert len(program) == len(jumps)
    for index, (item, instruction) in enumerate(zip(jumps, program, strict=True)):
        assert (instruction.code, instruction.k) == (item.code, item.k)
        if isinstance(item, Jump):
            for target, offset in ((item.if_true, instruction.jt), (item.if_false, instruction.jf)):
                assert index + 1 + offset == (index + 1 if target is None else positions[target])
        else:
            assert (instruction.jt, instruction.jf) == (0, 0)


def test_the_assembler_refuses_backward_missing_and_duplicate_labels() -> None:
    ret = Statement(0x06, 0)
    with pytest.raises(ValueError, match="is -2 instructions"):
        assemble([Label("back"), ret, Jump(0x15, 0, "back", None), ret])
    with pytest.raises(ValueError, match="not defined"):
        assemble([Jump(0x15, 0, "nowhere", None), ret])
    with pytest.raises(ValueError, match="defined twice"):
        assemble([Label("twice"), Label("twice"), ret])
    with pytest.raises(ValueError, match="at least one instruction"):
        assemble([Label("alone")])
