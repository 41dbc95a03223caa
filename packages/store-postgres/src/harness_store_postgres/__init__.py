"""harness-store-postgres: the kernel's ``SessionStore`` in PostgreSQL, for several agent servers.

:class:`PostgresSessionStore` passes the kernel's store conformance suite
(:mod:`harness_kernel.store.conformance`) and adds what one database shared by replicas
needs: gapless sequences across processes, leases judged inside the writing transaction
under a row lock (a replica whose lease was taken over is refused), group commit, a small
fixed set of connections, versioned migrations (:data:`SCHEMA_VERSION`; a newer database is
refused with ``SESS_SCHEMA_VERSION``), a typed error for a lost connection
(:class:`StoreUnavailableError`, ``SESS_UNAVAILABLE``), and tables named by their schema
(``public``) on connections that search only ``pg_catalog``, whose owner is checked at
start-up (:class:`SchemaOwnerError`, ``SESS_SCHEMA_OWNER``).
"""

from __future__ import annotations

from harness_store_postgres._errors import (
    SESS_SCHEMA_OWNER,
    SESS_UNAVAILABLE,
    SchemaOwnerError,
    StoreUnavailableError,
)
from harness_store_postgres._schema import SCHEMA_VERSION
from harness_store_postgres._store import READERS_MAX, PostgresSessionStore

__all__ = [
    "READERS_MAX",
    "SCHEMA_VERSION",
    "SESS_SCHEMA_OWNER",
    "SESS_UNAVAILABLE",
    "PostgresSessionStore",
    "SchemaOwnerError",
    "StoreUnavailableError",
]
