"""Migrations: a fresh database is created at the current version, a re-open changes nothing,
a newer database is refused unchanged, and replicas opening one database at once migrate it once."""

from __future__ import annotations

from collections.abc import Callable
from typing import LiteralString

import psycopg
import pytest
import trio

from harness_kernel.events import Event, create_event
from harness_kernel.store import SESS_SCHEMA_VERSION, SessionStoreError
from harness_kernel.store.conformance import ManualClock
from harness_store_postgres import SCHEMA_VERSION, PostgresSessionStore
from harness_store_postgres._schema import MIGRATIONS

pytestmark = pytest.mark.usefixtures("postgres")


AT = "2024-05-01T12:30:00.125Z"


def created(session_id: str, event_id: str, workspace: str = "/w") -> Event:
    return create_event(
        "session.created", {"sessionId": session_id, "workspace": workspace}, event_id=event_id, at=AT
    )


def _rows(conninfo: str, query: LiteralString) -> list[tuple[object, ...]]:
    with psycopg.connect(conninfo) as connection:
        return connection.execute(query).fetchall()


def _tables(conninfo: str) -> set[object]:
    return {row[0] for row in _rows(conninfo, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def test_the_schema_has_one_migration_per_version() -> None:
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 1


async def test_a_fresh_database_is_created_at_the_current_version(new_database: Callable[[], str]) -> None:
    conninfo = new_database()
    async with PostgresSessionStore(conninfo, now=ManualClock()):
        pass
    assert _rows(conninfo, "SELECT version FROM harness_schema") == [(SCHEMA_VERSION,)]
    assert _tables(conninfo) == {"harness_schema", "harness_meta", "harness_sessions", "harness_events"}


async def test_reopening_keeps_every_event_and_the_version(new_database: Callable[[], str]) -> None:
    conninfo = new_database()
    async with PostgresSessionStore(conninfo, now=ManualClock()) as store:
        await store.create("s")
        first = await store.append("s", created("s", "e1"))
    async with PostgresSessionStore(conninfo, now=ManualClock()) as store:
        assert (await store.read("s")).events == (first,)
        second = await store.append("s", created("s", "e2", "w"))
    assert (second.seq, second.global_seq) == (1, 1)
    assert _rows(conninfo, "SELECT version FROM harness_schema") == [(SCHEMA_VERSION,)]


async def test_a_newer_schema_is_refused_and_left_unchanged(new_database: Callable[[], str]) -> None:
    conninfo = new_database()
    with psycopg.connect(conninfo) as connection:
        connection.execute("CREATE TABLE harness_schema (version INTEGER NOT NULL)")
        connection.execute("INSERT INTO harness_schema(version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    store = PostgresSessionStore(conninfo, now=ManualClock())
    with pytest.raises(SessionStoreError) as raised:
        await store.create("s")
    assert raised.value.code == SESS_SCHEMA_VERSION
    assert str(SCHEMA_VERSION + 1) in str(raised.value)
    await store.aclose()
    assert _rows(conninfo, "SELECT version FROM harness_schema") == [(SCHEMA_VERSION + 1,)]
    assert _tables(conninfo) == {"harness_schema"}


async def test_replicas_opening_a_fresh_database_at_once_migrate_it_once(
    new_database: Callable[[], str],
) -> None:
    conninfo = new_database()
    stores = [PostgresSessionStore(conninfo, now=ManualClock(), readers=1) for _ in range(4)]
    async with trio.open_nursery() as nursery:
        for index, store in enumerate(stores):
            nursery.start_soon(store.create, f"s{index}")
    for store in stores:
        await store.aclose()
    assert _rows(conninfo, "SELECT version FROM harness_schema") == [(SCHEMA_VERSION,)]
    assert _rows(conninfo, "SELECT COUNT(*) FROM harness_sessions") == [(4,)]
