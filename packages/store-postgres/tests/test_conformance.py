"""The kernel's SessionStore conformance suite, run against PostgresSessionStore on a real server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness_kernel.store import SessionStore
from harness_kernel.store.conformance import CHECKS, ConformanceCheck
from harness_store_postgres import PostgresSessionStore


@pytest.mark.parametrize("check", CHECKS, ids=str)
async def test_the_store_passes_every_conformance_check(
    check: ConformanceCheck, new_database: Callable[[], str]
) -> None:
    await check.run(lambda now: PostgresSessionStore(new_database(), now=now))


def test_the_store_is_a_session_store() -> None:
    assert isinstance(PostgresSessionStore("dbname=unused"), SessionStore)
