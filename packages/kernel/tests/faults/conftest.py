"""Prints each kernel crash target's seed, trials, kill-point distribution and violations."""

from __future__ import annotations

import pytest
from faults.crash_harness import SUMMARIES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    summaries = [summary for summary in SUMMARIES if summary.target.startswith("kernel")]
    if summaries:
        terminalreporter.section("kernel crash consistency (HARNESS_FAULT_SEED, HARNESS_FAULT_TRIALS)")
        for summary in summaries:
            for line in summary.lines():
                terminalreporter.write_line(line)
