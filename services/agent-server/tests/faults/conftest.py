"""Makes this folder's helper modules importable and prints the agent-server crash summary."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from faults.crash_harness import SUMMARIES

# The server trial helpers live beside the tests; with --import-mode=importlib only the
# kernel tests folder is on sys.path, so this folder is added for them (and the zygote).
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    summaries = [summary for summary in SUMMARIES if summary.target.startswith("agent-server")]
    if summaries:
        terminalreporter.section("agent-server crash consistency (HARNESS_FAULT_SEED, HARNESS_FAULT_TRIALS)")
        for summary in summaries:
            for line in summary.lines():
                terminalreporter.write_line(line)
