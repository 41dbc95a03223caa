"""The levels' PostgreSQL: a throwaway cluster of the benchmark's own, or ``--database-url``.

The cluster is the store tests' ``pg_cluster.throwaway_cluster`` (``initdb`` into a fresh
temporary folder, a server listening only on a Unix socket there, run as ``nobody`` when the
benchmark runs as root, since PostgreSQL refuses root), started with ``fsync=True``: the
figures are meant to be those of durable commits, not of the tests' ``fsync=off``
(``synchronous_commit`` and ``full_page_writes`` keep their defaults). Its settings are
printed. Each pass of levels gets a fresh database, so one pass's rows do not slow the next.
The cluster's CPU time is the postmaster's own, the time of the backends it has already reaped
(``cutime``/``cstime``) and that of its live children, all read from ``/proc``. While a level
runs, ``pg_stat_activity`` is sampled every 50 ms: how many backends were running, waiting for a
lock, for the WAL's flush, or mid-transaction for the server's next statement.

Only the driver imports this module, and only with ``--store postgres``: psycopg and
``pg_cluster`` (which imports pytest) stay out of the levels' servers, the client workers and
the default run.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import AsyncGenerator, Generator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Final
from urllib.parse import quote

import psycopg
import trio
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "packages/store-postgres/tests/support"))

from pg_cluster import Cluster, server_binaries, throwaway_cluster

SETTINGS: Final = (
    "server_version",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
    "commit_delay",
    "shared_buffers",
    "max_connections",
)


def _clock_ticks(fields: list[str], first: int, last: int) -> int:
    return sum(int(value) for value in fields[first : last + 1])


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``None`` once it has gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def process_tree_cpu_seconds(root: int) -> float:
    """CPU time of ``root``, of its reaped children and of its live children (one level down).

    PostgreSQL forks a backend per connection and a few auxiliary processes, all children of
    the postmaster; a backend that exited was reaped by it, so its time is in the postmaster's
    ``cutime`` and ``cstime``.
    """
    ticks = 0
    fields = _stat_fields(root)
    if fields is None:
        return 0.0
    ticks += _clock_ticks(fields, 11, 14)  # utime, stime, cutime, cstime
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        child = _stat_fields(entry)
        if child is not None and child[1] == str(root):  # field 4, ppid
            ticks += _clock_ticks(child, 11, 12)
    return ticks / os.sysconf("SC_CLK_TCK")


def _url(conninfo: str) -> str:
    """The ``postgresql://`` URL of a keyword/value connection string (a Unix-socket host)."""
    parts = conninfo_to_dict(conninfo)
    user, host, dbname = str(parts["user"]), str(parts["host"]), str(parts["dbname"])
    return f"postgresql://{quote(user)}@/{quote(dbname)}?host={quote(host, safe='')}"


class Database:
    """Where the levels' replicas store their sessions: a server and how to make databases on it."""

    def __init__(self, admin: str, cluster: Cluster | None = None) -> None:
        self.admin = admin
        """A connection string for the server's maintenance database (or the given database)."""
        self.cluster = cluster
        """The throwaway cluster (``None`` for a server given by URL: every pass shares it)."""
        self.current: str | None = None
        """The database of the pass under way (``None``: the given database itself)."""
        self.postmaster: int | None = None
        """The cluster's postmaster (``None`` for a server given by URL: its CPU is not ours to read)."""
        if cluster is not None:
            with psycopg.connect(admin, autocommit=True) as connection:
                row = connection.execute("SELECT pg_backend_pid()").fetchone()
            fields = _stat_fields(str(row[0])) if row is not None else None
            self.postmaster = int(fields[1]) if fields is not None else None  # the backend's parent

    def settings(self) -> dict[str, str]:
        """The server settings that bound a commit's cost, as ``SHOW`` reports them."""
        with psycopg.connect(self.admin, autocommit=True) as connection:
            return {name: str(_show(connection, name)) for name in SETTINGS}

    def fresh_database(self) -> str:
        """A new empty database for one pass, as a URL (the given one itself when not ours)."""
        if self.cluster is None:
            return self.admin
        conninfo = self.cluster.new_database()
        self.current = str(conninfo_to_dict(conninfo)["dbname"])
        return _url(conninfo)

    def cpu_seconds(self) -> float | None:
        """CPU time of the cluster's processes so far (``None`` when it is not ours)."""
        return None if self.postmaster is None else process_tree_cpu_seconds(self.postmaster)

    def sampled_waits(self) -> AbstractAsyncContextManager[WaitSampler]:
        """What the pass's busy backends do, sampled every 50 ms while the block runs."""
        return sampled_waits(self)


def _show(connection: psycopg.Connection[tuple[object, ...]], name: str) -> object:
    row = connection.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    return row[0] if row is not None else "?"


@contextmanager
def levels_database(database_url: str | None) -> Generator[Database]:
    """The server given by ``database_url``, else a throwaway cluster with fsync on; settings printed.

    Raises:
        RuntimeError: no URL and no PostgreSQL server binaries.
    """
    if database_url is not None:
        database = Database(database_url)
        print("PostgreSQL: the server at --database-url (every pass shares its database)", flush=True)
        _print_settings(database)
        yield database
        return
    binaries = server_binaries()
    if binaries is None:
        raise RuntimeError(
            "--store postgres: no PostgreSQL server binaries (initdb, pg_ctl): install postgresql"
            " or give --database-url postgresql://…"
        )
    with throwaway_cluster(binaries, fsync=True) as cluster:
        database = Database(cluster.admin_conninfo, cluster)
        where = f"{binaries.parent.name}, postmaster {database.postmaster}, Unix socket only"
        print(f"PostgreSQL: a throwaway cluster ({where})", flush=True)
        _print_settings(database)
        yield database


def _print_settings(database: Database) -> None:
    settings = database.settings()
    print(f"  settings: {', '.join(f'{name}={value}' for name, value in settings.items())}", flush=True)


WAIT_SAMPLE_SECONDS: Final = 0.05
_ACTIVITY: Final = """
SELECT state, wait_event_type, wait_event FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle'
  AND datname = coalesce(%s, current_database())
"""


class WaitSampler:
    """What the cluster's busy client backends were doing, from ``pg_stat_activity`` samples.

    Idle backends (a pool's spare connections, waiting for their next transaction) are left
    out; ``idle in transaction`` is a backend mid-transaction waiting for its client's next
    statement, so a round trip through the server's store thread.
    """

    def __init__(self) -> None:
        self.samples = 0
        self.counts: Counter[str] = Counter()

    def add(self, rows: list[tuple[object, object, object]]) -> None:
        """One sample: each busy backend under its state and wait event."""
        self.samples += 1
        for state, kind, event in rows:
            if state == "active":
                self.counts["running" if kind is None else f"{kind}:{event}"] += 1
            else:
                self.counts[str(state)] += 1

    def mean_backends(self) -> dict[str, float]:
        """Per state or wait event, how many backends were in it on average (most first)."""
        if not self.samples:
            return {}
        return {name: round(count / self.samples, 2) for name, count in self.counts.most_common()}


@asynccontextmanager
async def sampled_waits(database: Database) -> AsyncGenerator[WaitSampler]:
    """Sample the busy backends of the pass's database every 50 ms while the block runs."""
    sampler = WaitSampler()
    connection = await trio.to_thread.run_sync(partial(psycopg.connect, database.admin, autocommit=True))

    def sample() -> list[tuple[object, object, object]]:
        rows = connection.execute(_ACTIVITY, (database.current,)).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    async def keep_sampling() -> None:
        while True:
            sampler.add(await trio.to_thread.run_sync(sample))
            await trio.sleep(WAIT_SAMPLE_SECONDS)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_sampling)
            yield sampler
            nursery.cancel_scope.cancel()
    finally:
        connection.close()
