"""SandboxLimits refuses nonsense (the bounded output stream is tested in harness-workspace)."""

from __future__ import annotations

import pytest

from harness_sandbox import SandboxLimits


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
