"""Faults: a lost connection is a typed error and the store serves on; values PostgreSQL cannot hold
are bad input; a server that does not answer is a typed error too."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from pg_cluster import Cluster
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from harness_kernel.events import Event, create_event
from harness_kernel.store import SESS_INVALID_RECORD, SessionStoreError
from harness_kernel.store.conformance import ManualClock
from harness_store_postgres import SESS_UNAVAILABLE, PostgresSessionStore, StoreUnavailableError

AT = "2024-05-01T12:30:00.125Z"


def created(session_id: str, event_id: str) -> Event:
    return create_event(
        "session.created", {"sessionId": session_id, "workspace": "/w"}, event_id=event_id, at=AT
    )


def _terminate_store_connections(conninfo: str) -> int:
    """End every backend of the store (its writer and readers) as a server restart would."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'harness-store'"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_connections_ended_while_idle_are_replaced_without_an_error(
    new_database: Callable[[], str],
) -> None:
    conninfo = new_database()
    async with PostgresSessionStore(conninfo, now=ManualClock(), readers=1) as store:
        await store.create("s")
        committed = await store.append("s", created("s", "e0"))
        assert _terminate_store_connections(conninfo) == 2
        # Nothing was in flight: the write and the read run on new connections.
        second = await store.append("s", created("s", "e1"))
        assert (second.seq, second.global_seq) == (1, 1)
        assert [item.event.event_id for item in (await store.read("s")).events] == ["e0", "e1"]
        assert await store.append("s", created("s", "e0")) == committed
        assert _terminate_store_connections(conninfo) == 2


def _allow_connections(cluster: Cluster, conninfo: str, allowed: bool) -> None:
    name = conninfo_to_dict(conninfo)["dbname"]
    assert isinstance(name, str)
    with cluster.admin() as connection:
        connection.execute(
            sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
                sql.Identifier(name), sql.Literal(allowed)
            )
        )


async def test_a_database_out_of_reach_is_a_typed_error_and_the_store_serves_on_after(
    postgres: Cluster, new_database: Callable[[], str]
) -> None:
    conninfo = new_database()
    async with PostgresSessionStore(conninfo, now=ManualClock(), readers=1) as store:
        await store.create("s")
        committed = await store.append("s", created("s", "e0"))
        _allow_connections(postgres, conninfo, False)
        try:
            _terminate_store_connections_from(postgres, conninfo)
            with pytest.raises(StoreUnavailableError) as raised:
                await store.append("s", created("s", "e1"))
            assert raised.value.code == SESS_UNAVAILABLE
            with pytest.raises(StoreUnavailableError):
                await store.read("s")
            with pytest.raises(StoreUnavailableError):
                await store.create("t")
        finally:
            _allow_connections(postgres, conninfo, True)
        # Back: retries by event id say what is stored, once; other sessions are served.
        assert await store.append("s", created("s", "e0")) == committed
        retried = await store.append("s", created("s", "e1"))
        assert (retried.seq, retried.global_seq) == (1, 1)
        assert await store.append("s", created("s", "e1")) == retried
        await store.create("u")
        assert [item.record.session_id for item in await store.list()] == ["u", "s"]


def _terminate_store_connections_from(cluster: Cluster, conninfo: str) -> None:
    name = conninfo_to_dict(conninfo)["dbname"]
    with cluster.admin() as connection:
        row = connection.execute(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = %s AND application_name = 'harness-store'",
            (name,),
        ).fetchone()
    assert row == (2,)


async def test_a_nul_character_is_refused_as_bad_input_and_stores_nothing(
    new_database: Callable[[], str],
) -> None:
    async with PostgresSessionStore(new_database(), now=ManualClock()) as store:
        with pytest.raises(SessionStoreError) as raised:
            await store.create("a\x00b")
        assert raised.value.code == SESS_INVALID_RECORD
        await store.create("s")
        with pytest.raises(SessionStoreError) as closing:
            await store.close("s", at="2024-01-01\x00")
        assert closing.value.code == SESS_INVALID_RECORD
        assert [item.record.status for item in await store.list()] == ["active"]


async def test_a_server_that_does_not_answer_is_a_typed_error(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    nowhere = tmp_path_factory.mktemp("no-server")
    store = PostgresSessionStore(f"host={nowhere} dbname=none user=none connect_timeout=2")
    with pytest.raises(StoreUnavailableError):
        await store.create("s")
    await store.aclose()
