"""The runnable example (`python -m harness_workspace`) works, in process and as a program."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from harness_workspace._demo import run_demo


async def test_demo_walks_the_contract_and_reports_success() -> None:
    out = io.StringIO()
    assert await run_demo(out) == 0
    text = out.getvalue()
    assert "read_file README.md -> '# demo\\n'" in text
    assert "view refuses write_file -> WORKSPACE_OPERATION_UNSUPPORTED" in text
    assert "camelCase operation name -> WORKSPACE_OPERATION_UNKNOWN" in text
    assert "shell string instead of argv -> WORKSPACE_OPERATION_MALFORMED" in text
    assert text.rstrip().endswith("demo finished: ok")


@pytest.mark.slow
def test_module_runs_as_a_program() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "harness_workspace"], capture_output=True, text=True, check=False, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.rstrip().endswith("demo finished: ok")
