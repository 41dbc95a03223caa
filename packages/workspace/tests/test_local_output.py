"""A command's output keeps its head and its tail: ``HeadTailOutput`` and ``LocalWorkspace.execute``."""

from __future__ import annotations

import itertools
import re
import sys
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from harness_workspace import CommandRequest
from harness_workspace.local import HeadTailOutput, LocalWorkspace, ProcessLimits

MIB = 1024 * 1024
NOTICE = re.compile(
    r"\[(?P<name>stdout|stderr) truncated: (?P<count>\d+) bytes in the middle were discarded\]\n"
)


@pytest.fixture
async def workspace(tmp_path: Path) -> AsyncIterator[LocalWorkspace]:
    ws = LocalWorkspace(tmp_path, process_limits=ProcessLimits(kill_grace_ms=200))
    yield ws
    await ws.dispose()


async def python(workspace: LocalWorkspace, script: str) -> tuple[str, str]:
    result = await workspace.execute(CommandRequest(argv=(sys.executable, "-c", script), timeout_ms=60_000))
    assert result.exit_code == 0, result.stderr
    assert result.timed_out is False
    return result.stdout, result.stderr


def split_at_notice(text: str) -> tuple[str, int, str]:
    """The text before the one notice, the count it names, and the text after it."""
    notices = list(NOTICE.finditer(text))
    assert len(notices) == 1, text[:200]
    found = notices[0]
    assert text[found.start() - 1] == "\n"  # The notice's own newline, not the stream's.
    return text[: found.start() - 1], int(found["count"]), text[found.end() :]


def fed(chunks: list[bytes], cap: int) -> HeadTailOutput:
    output = HeadTailOutput(cap)
    for chunk in chunks:
        output.feed(chunk)
    return output


# -- end to end: LocalWorkspace.execute with real processes -------------------------


async def test_a_long_failing_run_keeps_its_first_bytes_and_its_final_line(workspace: LocalWorkspace) -> None:
    # 3 MiB of numbered lines, then the summary a model needs; the default cap is 1 MiB.
    script = (
        "import sys\n"
        "out = sys.stdout.buffer\n"
        "line = 0\n"
        "written = 0\n"
        "while written < 3 * 1024 * 1024:\n"
        "    data = b'line %07d ........................\\n' % line\n"
        "    out.write(data)\n"
        "    written += len(data)\n"
        "    line += 1\n"
        "out.write(b'FAILED: 3 failed, 1200 passed\\n')\n"
    )
    lines: list[bytes] = []
    written = 0
    while written < 3 * MIB:
        lines.append(b"line %07d ........................\n" % len(lines))
        written += len(lines[-1])
    whole = b"".join(lines) + b"FAILED: 3 failed, 1200 passed\n"

    stdout, stderr = await python(workspace, script)

    cap = ProcessLimits().max_output_bytes
    assert stderr == ""
    head = whole[: cap - cap // 2].decode()
    tail = whole[len(whole) - cap // 2 :].decode()
    dropped = len(whole) - cap
    assert stdout == f"{head}\n[stdout truncated: {dropped} bytes in the middle were discarded]\n{tail}"
    assert stdout.startswith("line 0000000 ")
    assert stdout.endswith("\nFAILED: 3 failed, 1200 passed\n")


async def test_multibyte_characters_at_both_cuts_are_dropped_and_counted(tmp_path: Path) -> None:
    # cap 10: a head of 5 bytes ends inside "é"; a tail of 5 bytes begins inside "😀".
    limits = ProcessLimits(max_output_bytes=10, kill_grace_ms=200)
    workspace = LocalWorkspace(tmp_path, process_limits=limits)
    whole = "abcdé" + "ü" * 500 + "😀ok\n"
    script = (
        "import sys\n"
        f"data = {whole!r}.encode()\n"
        "sys.stdout.buffer.write(data)\n"
        "sys.stderr.buffer.write(data)\n"
    )
    try:
        stdout, stderr = await python(workspace, script)
    finally:
        await workspace.dispose()

    shown = len(b"abcd") + len(b"ok\n")
    omitted = len(whole.encode()) - shown
    assert stdout == f"abcd\n[stdout truncated: {omitted} bytes in the middle were discarded]\nok\n"
    assert stderr == f"abcd\n[stderr truncated: {omitted} bytes in the middle were discarded]\nok\n"


async def test_a_stream_far_larger_than_the_cap_is_kept_within_the_cap(tmp_path: Path) -> None:
    limits = ProcessLimits(max_output_bytes=64 * 1024, kill_grace_ms=200)
    workspace = LocalWorkspace(tmp_path, process_limits=limits)
    total = 256 * MIB
    script = (
        "import sys\n"
        "block = b'x' * 65536\n"
        f"for _ in range({total // 65536}):\n"
        "    sys.stdout.buffer.write(block)\n"
        "sys.stdout.buffer.write(b'\\nend\\n')\n"
    )
    try:
        stdout, _ = await python(workspace, script)
    finally:
        await workspace.dispose()

    head, count, tail = split_at_notice(stdout)
    assert len(head.encode()) + len(tail.encode()) == limits.max_output_bytes
    assert count == total + len(b"\nend\n") - limits.max_output_bytes
    assert tail.endswith("x\nend\n")


# -- the class: properties over chunkings, bounds, notice ----------------------------


def split(whole: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cut % (len(whole) + 1) for cut in cuts), len(whole)]
    return [whole[start:end] for start, end in itertools.pairwise(bounds)]


@st.composite
def chunked(draw: st.DrawFn, data: st.SearchStrategy[bytes]) -> tuple[bytes, list[bytes]]:
    whole = draw(data)
    return whole, split(whole, draw(st.lists(st.integers(0, 1000), max_size=12)))


@given(
    st.binary(max_size=400),
    st.lists(st.integers(0, 1000), max_size=12),
    st.lists(st.integers(0, 1000)),
    st.integers(0, 120),
)
def test_any_chunking_of_the_same_bytes_keeps_the_same_text(
    whole: bytes, cuts: list[int], other_cuts: list[int], cap: int
) -> None:
    one, two, single = fed(split(whole, cuts), cap), fed(split(whole, other_cuts), cap), fed([whole], cap)

    assert one.text("stdout") == two.text("stdout") == single.text("stdout")
    assert one.dropped == two.dropped == single.dropped == max(0, len(whole) - cap)
    assert one.kept_bytes == min(len(whole), cap)
    assert one.truncated == (len(whole) > cap)


@given(
    chunked(
        st.text(
            alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\ufffd["), max_size=200
        ).map(str.encode)
    ),
    st.integers(0, 120),
)
def test_text_is_the_head_the_notice_and_the_tail_and_counts_every_byte_not_shown(
    case: tuple[bytes, list[bytes]], cap: int
) -> None:
    whole, chunks = case
    original = whole.decode()
    text = fed(chunks, cap).text("stderr")

    if len(whole) <= cap:
        assert text == original
        return
    head, count, tail = split_at_notice(text)
    assert original.startswith(head)
    assert original.endswith(tail)
    assert "\ufffd" not in text  # No character was split at either cut.
    head_bytes, tail_bytes = len(head.encode()), len(tail.encode())
    assert cap - cap // 2 - 3 <= head_bytes <= cap - cap // 2
    assert cap // 2 - 3 <= tail_bytes <= cap // 2
    assert count == len(whole) - head_bytes - tail_bytes


def test_invalid_bytes_are_replaced_not_dropped() -> None:
    output = fed([b"ok \xff\xfe end"], 100)
    assert output.text("stdout") == "ok \ufffd\ufffd end"


def test_a_zero_cap_keeps_nothing_and_reports_every_byte() -> None:
    output = fed([b"hello"], 0)
    assert output.kept_bytes == 0
    assert output.text("stdout") == "\n[stdout truncated: 5 bytes in the middle were discarded]\n"
    assert fed([], 0).text("stdout") == ""


@pytest.mark.parametrize("cap", [-1, True, 1.5, "10"])
def test_a_cap_that_is_not_a_nonnegative_int_is_refused(cap: object) -> None:
    with pytest.raises(ValueError, match="HeadTailOutput cap"):
        HeadTailOutput(cap)  # pyright: ignore[reportArgumentType]


def test_memory_stays_bounded_for_a_stream_far_larger_than_the_cap() -> None:
    cap = MIB
    block = b"z" * (64 * 1024)
    output = HeadTailOutput(cap)
    tracemalloc.start()
    try:
        for _ in range(4096):  # 256 MiB, read in the chunk size ``drain`` uses.
            output.feed(block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * cap  # The head, the tail and one chunk, with the allocator's slack.
    assert output.kept_bytes == cap
    assert output.dropped == 4096 * len(block) - cap


async def test_drain_reads_a_stream_to_its_end_and_then_sets_closed() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    output = HeadTailOutput(8)

    async def write() -> None:
        for piece in (b"0123", b"4567", b"89ab", b"cdef"):
            await send.send_all(piece)
        await send.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await output.drain(receive)
    assert output.closed.is_set()
    assert output.text("stdout") == "0123\n[stdout truncated: 8 bytes in the middle were discarded]\ncdef"
