"""Fixtures: the session's PostgreSQL server (see ``pg_cluster``) and a fresh database per call."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from pg_cluster import Cluster, session_cluster


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """The session's PostgreSQL server (skipped, or failed under HARNESS_REQUIRE_POSTGRES=1, without one)."""
    yield from session_cluster()


@pytest.fixture
def new_database(postgres: Cluster) -> Callable[[], str]:
    """Creates a fresh, empty database on each call; its connection string."""
    return postgres.new_database
