"""Fixtures: the session's PostgreSQL server (see ``pg_cluster``) and a fresh database per call."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from faults.crash_harness import SUMMARIES
from pg_cluster import Cluster, session_cluster


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """The session's PostgreSQL server (skipped, or failed under HARNESS_REQUIRE_POSTGRES=1, without one)."""
    yield from session_cluster()


@pytest.fixture
def new_database(postgres: Cluster) -> Callable[[], str]:
    """Creates a fresh, empty database on each call; its connection string."""
    return postgres.new_database


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The crash target's seed, kill points, their distribution and violations (as the kernel's)."""
    summaries = [summary for summary in SUMMARIES if summary.target.startswith("postgres")]
    if summaries:
        terminalreporter.section("postgres crash consistency (HARNESS_FAULT_SEED, HARNESS_FAULT_TRIALS)")
        for summary in summaries:
            for line in summary.lines():
                terminalreporter.write_line(line)
