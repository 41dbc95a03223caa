"""Another role of the database cannot capture the store's tables.

A role with ``CREATE`` on the database can create a schema named after the store's role,
which the default ``search_path`` (``"$user", public``) puts first, and plant tables of the
store's names in it; on a database where ``public`` still grants ``CREATE`` to everyone it
can plant them in ``public`` before the store first runs. The store names every table by its
schema and searches only ``pg_catalog``, so the first never sees it; it refuses the second at
start-up with ``SESS_SCHEMA_OWNER``, before reading or writing anything.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import LiteralString

import psycopg
import pytest
from pg_cluster import Cluster
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from harness_kernel.events import create_event
from harness_kernel.store.conformance import ManualClock
from harness_store_postgres import SESS_SCHEMA_OWNER, PostgresSessionStore, SchemaOwnerError
from harness_store_postgres._schema import MIGRATIONS

AT = "2024-05-01T12:30:00.125Z"
# The store's tables, as the store's migration writes them, with their schema left to search_path.
_PLANTED: tuple[str, ...] = tuple(statement.replace("public.", "") for statement in MIGRATIONS[0])


@pytest.fixture
def intruder(postgres: Cluster) -> Iterator[str]:
    """A second login role of the cluster (no superuser), dropped afterwards; its name."""
    name = f"intruder_{secrets.token_hex(4)}"
    with postgres.admin() as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield name
    with postgres.admin() as admin:
        for database in _databases_of(admin, name):
            with psycopg.connect(postgres.conninfo(database), autocommit=True) as connection:
                connection.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _databases_of(admin: psycopg.Connection[tuple[object, ...]], role: str) -> list[str]:
    rows = admin.execute(
        "SELECT datname FROM pg_database WHERE has_database_privilege(%s, oid, 'CREATE')"
        " AND datname LIKE 'harness_test_%%'",
        (role,),
    ).fetchall()
    return [str(row[0]) for row in rows]


def _store_role(conninfo: str) -> str:
    """The role the store connects as: ``"$user"`` of its default search_path."""
    return str(_count(conninfo, "SELECT current_user::text"))


def _as(conninfo: str, role: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(make_conninfo(conninfo, user=role), autocommit=True)


def _grant_create(conninfo: str, role: str, *, on_public: bool) -> None:
    database = str(conninfo_to_dict(conninfo)["dbname"])
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(database), sql.Identifier(role)
            )
        )
        if on_public:
            # As every database created before PostgreSQL 15 still has it.
            admin.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(role)))


def _plant(connection: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    """The store's tables at the current version in ``schema``, open to everyone."""
    connection.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(schema)))
    for statement in _PLANTED:
        connection.execute(sql.SQL(statement))  # pyright: ignore[reportArgumentType]
    connection.execute("CREATE TABLE harness_schema (version INTEGER NOT NULL)")
    connection.execute("INSERT INTO harness_schema(version) VALUES (1)")
    connection.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO PUBLIC").format(sql.Identifier(schema)))
    connection.execute(
        sql.SQL("GRANT ALL ON ALL TABLES IN SCHEMA {} TO PUBLIC").format(sql.Identifier(schema))
    )


def _count(conninfo: str, query: LiteralString) -> object:
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(query).fetchone()
    return None if row is None else row[0]


async def _store_one_event(conninfo: str) -> None:
    async with PostgresSessionStore(conninfo, now=ManualClock()) as store:
        await store.create("s")
        await store.append(
            "s", create_event("session.created", {"sessionId": "s", "workspace": "/w"}, event_id="e1", at=AT)
        )


async def test_tables_planted_in_a_schema_named_after_the_store_role_are_never_used(
    new_database: Callable[[], str], intruder: str
) -> None:
    conninfo = new_database()
    _grant_create(conninfo, intruder, on_public=False)
    with _as(conninfo, intruder) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(_store_role(conninfo))))
        _plant(connection, _store_role(conninfo))
    await _store_one_event(conninfo)
    planted = sql.SQL("SELECT COUNT(*) FROM {}.harness_events").format(sql.Identifier(_store_role(conninfo)))
    with _as(conninfo, intruder) as connection:
        row = connection.execute(planted).fetchone()
    assert row == (0,)
    assert _count(conninfo, "SELECT COUNT(*) FROM public.harness_events") == 1
    assert _count(conninfo, "SELECT version FROM public.harness_schema") == 1


async def test_an_empty_schema_named_after_the_store_role_does_not_receive_the_tables(
    new_database: Callable[[], str], intruder: str
) -> None:
    conninfo = new_database()
    _grant_create(conninfo, intruder, on_public=False)
    role = _store_role(conninfo)
    with _as(conninfo, intruder) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(role)))
        connection.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO PUBLIC").format(sql.Identifier(role)))
    await _store_one_event(conninfo)
    with psycopg.connect(conninfo) as connection:
        rows = connection.execute(
            "SELECT schemaname FROM pg_tables WHERE tablename LIKE 'harness_%%' GROUP BY schemaname"
        ).fetchall()
    assert rows == [("public",)]


async def test_store_tables_another_role_owns_are_refused_at_start_and_left_unchanged(
    new_database: Callable[[], str], intruder: str
) -> None:
    conninfo = new_database()
    _grant_create(conninfo, intruder, on_public=True)
    with _as(conninfo, intruder) as connection:
        _plant(connection, "public")
    store = PostgresSessionStore(conninfo, now=ManualClock())
    with pytest.raises(SchemaOwnerError) as raised:
        await store.create("s")
    await store.aclose()
    assert raised.value.code == SESS_SCHEMA_OWNER == "SESS_SCHEMA_OWNER"
    assert intruder in str(raised.value)
    assert _count(conninfo, "SELECT COUNT(*) FROM public.harness_sessions") == 0
    assert _count(conninfo, "SELECT version FROM public.harness_schema") == 1


async def test_one_planted_table_among_the_store_s_own_is_refused(
    new_database: Callable[[], str], intruder: str
) -> None:
    conninfo = new_database()
    _grant_create(conninfo, intruder, on_public=True)
    with _as(conninfo, intruder) as connection:
        connection.execute("CREATE TABLE public.harness_schema (version INTEGER NOT NULL)")
        connection.execute("GRANT ALL ON public.harness_schema TO PUBLIC")
    store = PostgresSessionStore(conninfo, now=ManualClock())
    with pytest.raises(SchemaOwnerError):
        await store.create("s")
    await store.aclose()
    assert _count(conninfo, "SELECT to_regclass('public.harness_sessions') IS NULL") is True


async def test_tables_of_the_configured_owner_are_accepted(
    new_database: Callable[[], str], intruder: str
) -> None:
    conninfo = new_database()
    _grant_create(conninfo, intruder, on_public=True)
    async with PostgresSessionStore(make_conninfo(conninfo, user=intruder), now=ManualClock()) as store:
        await store.create("s")
    async with PostgresSessionStore(conninfo, now=ManualClock(), owner=intruder) as store:
        assert [listing.record.session_id for listing in await store.list()] == ["s"]


async def test_an_owner_that_is_no_role_is_refused_with_the_typed_error(
    new_database: Callable[[], str],
) -> None:
    conninfo = new_database()
    store = PostgresSessionStore(conninfo, now=ManualClock(), owner="nobody_by_that_name")
    with pytest.raises(SchemaOwnerError, match="nobody_by_that_name"):
        await store.create("s")
    await store.aclose()
    assert _count(conninfo, "SELECT to_regclass('public.harness_schema') IS NULL") is True
