"""The PostgreSQL schema, created and migrated by numbered migrations (decision 049).

``harness_schema`` holds one row, the schema version. Each migration runs in its own
transaction under a transaction-scoped advisory lock, so replicas opening one database at
once migrate it once; a database at a newer version than this code knows is refused with
``SESS_SCHEMA_VERSION`` and left unchanged. Every text column the store sorts or compares
uses the ``"C"`` collation: code point order, as the SQLite store and the in-memory store
sort (the ``Tables`` contract).

Every name is qualified by its schema, ``public``, and the store's connections search only
``pg_catalog`` (``_store``): a schema another role creates — one named after the store's
role comes first in the default ``"$user", public`` — can neither hold the tables the store
creates nor stand in for them. Before a migration reads or writes anything, the schema and
every relation of the store's names in it must belong to the expected owner (the connecting
role unless configured); otherwise ``SESS_SCHEMA_OWNER``, nothing changed.
"""

from __future__ import annotations

from typing import Final

import psycopg

from harness_kernel.store import SESS_SCHEMA_VERSION, SessionStoreError
from harness_store_postgres._errors import SchemaOwnerError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "STORE_SCHEMA", "check_owners", "prepare_schema", "stored_version"]

STORE_SCHEMA: Final = "public"
"""The schema every table of the store is in (each name is written qualified by it)."""

# pg_advisory_xact_lock key: "harness" in ASCII, so unrelated applications are unlikely to share it.
_MIGRATION_LOCK: Final = 0x68_61_72_6E_65_73_73

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # Version 1: sessions, events, the store-wide sequence.
    (
        """CREATE TABLE public.harness_meta (
            key TEXT COLLATE "C" PRIMARY KEY,
            value BIGINT NOT NULL CHECK (value >= 0)
        )""",
        "INSERT INTO public.harness_meta(key, value) VALUES ('next_global_seq', 0)",
        """CREATE TABLE public.harness_sessions (
            session_id TEXT COLLATE "C" PRIMARY KEY,
            task_id TEXT COLLATE "C",
            status TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'closed', 'archived')),
            created_at TEXT COLLATE "C" NOT NULL,
            closed_at TEXT COLLATE "C",
            metadata TEXT COLLATE "C" NOT NULL DEFAULT '{}',
            next_seq BIGINT NOT NULL DEFAULT 0,
            checkpoint_revision BIGINT NOT NULL DEFAULT 0,
            checkpoint_seq BIGINT,
            checkpoint_payload TEXT COLLATE "C",
            checkpoint_updated_at TEXT COLLATE "C"
        )""",
        """CREATE TABLE public.harness_events (
            session_id TEXT COLLATE "C" NOT NULL
                REFERENCES public.harness_sessions(session_id) ON DELETE RESTRICT,
            seq BIGINT NOT NULL,
            global_seq BIGINT NOT NULL,
            event_id TEXT COLLATE "C" NOT NULL,
            at TEXT COLLATE "C" NOT NULL,
            actor TEXT COLLATE "C",
            type TEXT COLLATE "C" NOT NULL,
            payload TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (session_id, seq),
            CONSTRAINT harness_events_event_id_uq UNIQUE (event_id),
            CONSTRAINT harness_events_global_seq_uq UNIQUE (global_seq)
        )""",
        "CREATE INDEX harness_sessions_closed ON public.harness_sessions(closed_at, session_id)"
        " WHERE status <> 'active'",
    ),
)
SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The schema version this code writes and reads."""

# Every relation a migration creates: a planted one of these names is refused, not used.
_STORE_RELATIONS: Final = (
    "harness_schema",
    "harness_meta",
    "harness_meta_pkey",
    "harness_sessions",
    "harness_sessions_pkey",
    "harness_sessions_closed",
    "harness_events",
    "harness_events_pkey",
    "harness_events_event_id_uq",
    "harness_events_global_seq_uq",
)
# A schema owner the store must trust anyway: the database's owner (PostgreSQL 15 gives it
# ``public``) can drop the whole database, and a superuser can do anything.
_DATABASE_OWNER: Final = "pg_database_owner"


def check_owners(connection: psycopg.Connection[tuple[object, ...]], owner: str | None) -> None:
    """Refuse a store schema, or a relation of the store's names, that ``owner`` does not own.

    ``owner`` ``None`` is the connecting role. The schema may also belong to a superuser or
    to the database's owner (``pg_database_owner``).

    Raises:
        SchemaOwnerError: ``SESS_SCHEMA_OWNER`` — ``owner`` is no role, the schema is missing
            or another role's, or a relation of the store's names belongs to another role.
    """
    expected = owner
    if expected is None:
        row = connection.execute("SELECT current_user::text").fetchone()
        expected = str(row[0]) if row is not None else ""
    role = connection.execute(
        "SELECT oid FROM pg_catalog.pg_roles WHERE rolname = %s", (expected,)
    ).fetchone()
    if role is None:
        raise SchemaOwnerError(f"the session store's owner {expected!r} is not a role of this server")
    schema = connection.execute(
        "SELECT r.rolname::text, r.rolsuper FROM pg_catalog.pg_namespace n"
        " JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner WHERE n.nspname = %s",
        (STORE_SCHEMA,),
    ).fetchone()
    if schema is None:
        raise SchemaOwnerError(f"the database has no schema {STORE_SCHEMA!r} for the session store")
    if schema[0] not in (expected, _DATABASE_OWNER) and schema[1] is not True:
        raise SchemaOwnerError(
            f"the schema {STORE_SCHEMA!r} belongs to role {schema[0]!r}, not to {expected!r} (the"
            " session store's owner), a superuser or the database's owner: that role could"
            " replace the store's tables"
        )
    foreign = connection.execute(
        "SELECT c.relname::text, pg_catalog.pg_get_userbyid(c.relowner)::text FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relowner <> %s ORDER BY c.relname",
        (STORE_SCHEMA, list(_STORE_RELATIONS), role[0]),
    ).fetchall()
    if foreign:
        named = ", ".join(f"{STORE_SCHEMA}.{name} (role {role!r})" for name, role in foreign)
        raise SchemaOwnerError(
            f"the session store's relations must belong to {expected!r}, but {named} do not:"
            " another role could read and change the stored events; drop them or set the"
            " store's owner"
        )


def stored_version(connection: psycopg.Connection[tuple[object, ...]]) -> int:
    """The version ``harness_schema`` records (0 for a database without the table or row)."""
    row = connection.execute(
        "SELECT version FROM public.harness_schema" if _has_schema_table(connection) else "SELECT 0"
    ).fetchone()
    if row is None:
        return 0
    version = row[0]
    if type(version) is not int or version < 0:
        raise SessionStoreError(SESS_SCHEMA_VERSION, f"stored schema version {version!r} is not valid")
    return version


def _has_schema_table(connection: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = connection.execute("SELECT to_regclass('public.harness_schema') IS NOT NULL").fetchone()
    return row is not None and row[0] is True


def prepare_schema(connection: psycopg.Connection[tuple[object, ...]], *, owner: str | None = None) -> None:
    """Bring the database to :data:`SCHEMA_VERSION`, one transaction per migration.

    The connection must be in autocommit mode (each step issues its own ``BEGIN``). Each
    transaction first checks the owners (:func:`check_owners`).

    Raises:
        SchemaOwnerError: ``SESS_SCHEMA_OWNER`` — a store relation or the schema is another
            role's; nothing is changed.
        SessionStoreError: ``SESS_SCHEMA_VERSION`` — the stored version is newer than this
            code knows, or not a version; nothing is changed.
        psycopg.Error: the database refused a statement (the migration is rolled back).
    """
    while True:
        connection.execute("BEGIN")
        try:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            check_owners(connection, owner)
            connection.execute("CREATE TABLE IF NOT EXISTS public.harness_schema (version INTEGER NOT NULL)")
            version = stored_version(connection)
            if version > SCHEMA_VERSION:
                raise SessionStoreError(
                    SESS_SCHEMA_VERSION,
                    f"the database holds session store schema version {version}; this"
                    f" harness-store-postgres knows versions up to {SCHEMA_VERSION}",
                )
            if version == SCHEMA_VERSION:
                connection.execute("COMMIT")
                return
            for statement in MIGRATIONS[version]:
                connection.execute(statement)
            if version == 0:
                connection.execute("DELETE FROM public.harness_schema")
                connection.execute("INSERT INTO public.harness_schema(version) VALUES (%s)", (version + 1,))
            else:
                connection.execute("UPDATE public.harness_schema SET version = %s", (version + 1,))
            connection.execute("COMMIT")
        except BaseException:
            if not connection.closed:
                connection.execute("ROLLBACK")
            raise
