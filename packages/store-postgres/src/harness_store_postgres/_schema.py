"""The PostgreSQL schema, created and migrated by numbered migrations (decision 049).

``harness_schema`` holds one row, the schema version. Each migration runs in its own
transaction under a transaction-scoped advisory lock, so replicas opening one database at
once migrate it once; a database at a newer version than this code knows is refused with
``SESS_SCHEMA_VERSION`` and left unchanged. Every text column the store sorts or compares
uses the ``"C"`` collation: code point order, as the SQLite store and the in-memory store
sort (the ``Tables`` contract).
"""

from __future__ import annotations

from typing import Final

import psycopg

from harness_kernel.store import SESS_SCHEMA_VERSION, SessionStoreError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "prepare_schema", "stored_version"]

# pg_advisory_xact_lock key: "harness" in ASCII, so unrelated applications are unlikely to share it.
_MIGRATION_LOCK: Final = 0x68_61_72_6E_65_73_73

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # Version 1: sessions, events, the store-wide sequence.
    (
        """CREATE TABLE harness_meta (
            key TEXT COLLATE "C" PRIMARY KEY,
            value BIGINT NOT NULL CHECK (value >= 0)
        )""",
        "INSERT INTO harness_meta(key, value) VALUES ('next_global_seq', 0)",
        """CREATE TABLE harness_sessions (
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
        """CREATE TABLE harness_events (
            session_id TEXT COLLATE "C" NOT NULL
                REFERENCES harness_sessions(session_id) ON DELETE RESTRICT,
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
        "CREATE INDEX harness_sessions_closed ON harness_sessions(closed_at, session_id)"
        " WHERE status <> 'active'",
    ),
)
SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The schema version this code writes and reads."""


def stored_version(connection: psycopg.Connection[tuple[object, ...]]) -> int:
    """The version ``harness_schema`` records (0 for a database without the table or row)."""
    row = connection.execute(
        "SELECT version FROM harness_schema" if _has_schema_table(connection) else "SELECT 0"
    ).fetchone()
    if row is None:
        return 0
    version = row[0]
    if type(version) is not int or version < 0:
        raise SessionStoreError(SESS_SCHEMA_VERSION, f"stored schema version {version!r} is not valid")
    return version


def _has_schema_table(connection: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = connection.execute("SELECT to_regclass('harness_schema') IS NOT NULL").fetchone()
    return row is not None and row[0] is True


def prepare_schema(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    """Bring the database to :data:`SCHEMA_VERSION`, one transaction per migration.

    The connection must be in autocommit mode (each step issues its own ``BEGIN``).

    Raises:
        SessionStoreError: ``SESS_SCHEMA_VERSION`` — the stored version is newer than this
            code knows, or not a version; nothing is changed.
        psycopg.Error: the database refused a statement (the migration is rolled back).
    """
    while True:
        connection.execute("BEGIN")
        try:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            connection.execute("CREATE TABLE IF NOT EXISTS harness_schema (version INTEGER NOT NULL)")
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
                connection.execute("DELETE FROM harness_schema")
                connection.execute("INSERT INTO harness_schema(version) VALUES (%s)", (version + 1,))
            else:
                connection.execute("UPDATE harness_schema SET version = %s", (version + 1,))
            connection.execute("COMMIT")
        except BaseException:
            if not connection.closed:
                connection.execute("ROLLBACK")
            raise
