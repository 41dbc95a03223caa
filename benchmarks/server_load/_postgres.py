"""The levels' PostgreSQL: a throwaway cluster of the benchmark's own, or ``--database-url``.

The cluster is started the way the store tests start theirs (``initdb`` into a fresh
temporary folder, a server listening only on a Unix socket there, run as ``nobody`` when the
benchmark runs as root, since PostgreSQL refuses root), but with durable commits: ``fsync``,
``synchronous_commit`` and ``full_page_writes`` keep their defaults, because the figures are
meant to be those of a real deployment, not of the tests' ``fsync=off``. Its settings are
printed. Each pass of levels gets a fresh database, so one pass's rows do not slow the next.
The cluster's CPU time is the postmaster's own, the time of the backends it has already reaped
(``cutime``/``cstime``) and that of its live children, all read from ``/proc``. While a level
runs, ``pg_stat_activity`` is sampled every 50 ms: how many backends were running, waiting for a
lock, for the WAL's flush, or mid-transaction for the server's next statement.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import AsyncGenerator, Generator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Final
from urllib.parse import quote

import psycopg
import trio
from psycopg import sql

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
USER: Final = "harness"


def server_binaries() -> Path | None:
    """The folder of the newest installed server's ``initdb``, ``pg_ctl`` and ``postgres``."""
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for folder in folders:
        if all(os.access(Path(folder, name), os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    initdb = shutil.which("initdb")
    if initdb is None:
        return None
    folder = Path(initdb).resolve().parent
    return folder if (folder / "pg_ctl").exists() and (folder / "postgres").exists() else None


def _version_key(folder: str) -> tuple[int, ...]:
    return tuple(int(part) for part in Path(folder).parent.name.split(".") if part.isdigit())


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


class Database:
    """Where the levels' replicas store their sessions: a server and how to make databases on it."""

    def __init__(self, admin_url: str, postmaster: int | None, *, owned: bool) -> None:
        self.admin_url = admin_url
        self.postmaster = postmaster
        """The cluster's postmaster (``None`` for a server given by URL: its CPU is not ours to read)."""
        self.owned = owned
        self.current: str | None = None
        """The database of the pass under way (``None``: the given database itself)."""
        self._names = itertools.count()

    def settings(self) -> dict[str, str]:
        """The server settings that bound a commit's cost, as ``SHOW`` reports them."""
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            return {name: str(_show(connection, name)) for name in SETTINGS}

    def fresh_database(self, label: str) -> str:
        """A new empty database for one pass (the given one itself when the server is not ours)."""
        if not self.owned:
            return self.admin_url
        name = f"levels_{next(self._names)}_{label}"
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            connection.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(name))
            )
        self.current = name
        return self.admin_url.replace("/postgres?", f"/{quote(name)}?", 1)

    def cpu_seconds(self) -> float | None:
        """CPU time of the cluster's processes so far (``None`` when it is not ours)."""
        return None if self.postmaster is None else process_tree_cpu_seconds(self.postmaster)


def _show(connection: psycopg.Connection[tuple[object, ...]], name: str) -> object:
    row = connection.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    return row[0] if row is not None else "?"


def _run_as(user: str | None, command: list[str]) -> subprocess.CompletedProcess[str]:
    prefix = [] if user is None else ["runuser", "-u", user, "--"]
    return subprocess.run(prefix + command, capture_output=True, text=True, check=False, timeout=120)


def _start(binaries: Path, folder: Path, user: str | None) -> None:
    """``initdb`` and ``pg_ctl start`` into ``folder``: a Unix socket there only, durable commits."""
    data = folder / "data"
    initdb = [str(binaries / "initdb"), "-D", str(data), "-U", USER, "-A", "trust", "-E", "UTF8"]
    done = _run_as(user, [*initdb, "--no-locale"])
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
    # No TCP; fsync and synchronous_commit stay on (their defaults): every commit is durable.
    options = f"-k {folder} -c listen_addresses=''"
    log = folder / "server.log"
    start = [str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options]
    done = _run_as(user, [*start, "-w", "-t", "60", "start"])
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()} {tail}")


@contextmanager
def throwaway_cluster() -> Generator[Database]:
    """A PostgreSQL cluster of the benchmark's own, stopped and deleted on the way out.

    Raises:
        RuntimeError: no server binaries, or ``initdb`` or ``pg_ctl`` failed.
    """
    binaries = server_binaries()
    if binaries is None:
        raise RuntimeError(
            "--store postgres: no PostgreSQL server binaries (initdb, pg_ctl): install postgresql"
            " or give --database-url postgresql://…"
        )
    user = None
    folder = Path(tempfile.mkdtemp(prefix="harness-bench-pg-"))
    try:
        if os.geteuid() == 0:
            user = "nobody"
            entry = pwd.getpwnam(user)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        _start(binaries, folder, user)
        try:
            postmaster = int((folder / "data" / "postmaster.pid").read_text().split()[0])
            admin = f"postgresql://{USER}@/postgres?host={quote(str(folder), safe='')}"
            yield Database(admin, postmaster, owned=True)
        finally:
            _run_as(user, [str(binaries / "pg_ctl"), "-D", str(folder / "data"), "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def levels_database(database_url: str | None) -> Generator[Database]:
    """The server given by ``database_url``, else a throwaway cluster; its settings printed."""
    if database_url is not None:
        database = Database(database_url, None, owned=False)
        print("PostgreSQL: the server at --database-url (every pass shares its database)", flush=True)
        _print_settings(database)
        yield database
        return
    with throwaway_cluster() as database:
        where = f"postmaster {database.postmaster}, Unix socket only"
        print(f"PostgreSQL: a throwaway cluster, {where}", flush=True)
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
    connection = await trio.to_thread.run_sync(partial(psycopg.connect, database.admin_url, autocommit=True))

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
