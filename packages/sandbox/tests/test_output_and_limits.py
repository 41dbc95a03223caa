"""BoundedOutput keeps a stream's head and tail; SandboxLimits refuses nonsense."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_sandbox import SandboxLimits
from harness_sandbox._output import BoundedOutput


@given(st.lists(st.binary(max_size=300), max_size=30), st.integers(2, 200))
def test_head_and_tail_are_the_ends_of_the_stream_and_the_middle_is_counted(
    chunks: list[bytes], cap: int
) -> None:
    output = BoundedOutput(cap)
    for chunk in chunks:
        output.feed(chunk)
    whole = b"".join(chunks)
    kept = bytes(output.head + output.tail)
    assert len(kept) == min(len(whole), cap)
    assert output.dropped == len(whole) - len(kept)
    assert whole.startswith(bytes(output.head))
    assert whole.endswith(bytes(output.tail))
    assert output.truncated == (len(whole) > cap)


def test_text_marks_the_cut_and_never_splits_a_character() -> None:
    output = BoundedOutput(10)
    output.feed(("é" * 20 + "end").encode())
    text = output.text("stdout")
    assert "[stdout truncated:" in text
    assert "\ufffd" not in text
    assert text.startswith("éé")
    assert text.endswith("end")
    short = BoundedOutput(10)
    short.feed(b"ok\n")
    assert short.text("stderr") == "ok\n"


def test_limits_refuse_out_of_range_values() -> None:
    assert SandboxLimits().pids == 256
    for bad in (
        {"memory_bytes": 0},
        {"memory_bytes": 1024},
        {"pids": -1},
        {"cpus": 0},
        {"cpus": "1"},
        {"default_timeout_ms": 10, "max_timeout_ms": 5},
        {"disk_bytes": True},
    ):
        with pytest.raises(ValueError, match="SandboxLimits"):
            SandboxLimits(**bad)  # pyright: ignore[reportArgumentType]
