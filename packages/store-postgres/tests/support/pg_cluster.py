"""The store tests' PostgreSQL: a throwaway cluster of their own, or HARNESS_TEST_DATABASE_URL.

Where the server binaries exist the session starts its own cluster: ``initdb`` into a
fresh temporary folder, a server listening only on a Unix socket in that folder (no TCP),
run as ``nobody`` when the tests run as root (PostgreSQL refuses root). With
``HARNESS_TEST_DATABASE_URL`` that server is used instead (its role needs ``CREATEDB``).
Each test gets fresh databases. With ``HARNESS_REQUIRE_POSTGRES=1`` (CI) a missing server
is a failure, not a skip. A cluster started here can also be restarted (``pg_ctl restart -m
fast``, the connection-fault tests); one given by URL cannot. ``throwaway_cluster`` is the
same cluster for scripts (``benchmarks/``), without pytest.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import NoReturn

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

_HOW = (
    "no PostgreSQL server binaries (initdb, pg_ctl): `apt-get install postgresql` or set"
    " HARNESS_TEST_DATABASE_URL=postgresql://… (a role with CREATEDB) to run these tests"
)


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("HARNESS_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"HARNESS_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _server_bin() -> Path | None:
    """The folder of the newest installed server's initdb, pg_ctl and postgres."""
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        if all(os.access(Path(folder, name), os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    initdb = shutil.which("initdb")
    if initdb is None:
        return None
    folder = Path(initdb).resolve().parent
    return folder if (folder / "pg_ctl").exists() and (folder / "postgres").exists() else None


def _version_key(folder: str) -> tuple[int, ...]:
    name = Path(folder).parent.name
    return tuple(int(part) for part in name.split(".") if part.isdigit())


class ClusterError(RuntimeError):
    """The throwaway cluster could not be created, started or restarted."""


class Cluster:
    """A PostgreSQL server the tests may create databases in (restartable when started here)."""

    def __init__(self, admin_conninfo: str, *, control: Callable[[list[str]], None] | None = None) -> None:
        self.admin_conninfo = admin_conninfo
        self._names = itertools.count()
        self._prefix = f"harness_test_{secrets.token_hex(4)}"
        self._control = control

    @property
    def restartable(self) -> bool:
        """Whether :meth:`restart` can run: the cluster was started here, not given by URL."""
        return self._control is not None

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m MODE``, blocking until the server accepts connections again.

        ``fast`` ends every session (open transactions roll back) after a shutdown checkpoint;
        ``immediate`` is a server crash, recovered from the WAL at start.

        Raises:
            ClusterError: the cluster was given by URL, or ``pg_ctl`` failed.
        """
        if self._control is None:
            raise ClusterError("only a cluster started by these tests can be restarted")
        self._control(["-m", mode, "-w", "-t", "60", "restart"])

    def conninfo(self, dbname: str) -> str:
        """The connection string of database ``dbname`` on this server."""
        return make_conninfo(self.admin_conninfo, dbname=dbname)

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """An autocommit connection to the server's maintenance database."""
        return psycopg.connect(self.admin_conninfo, autocommit=True)

    def new_database(self) -> str:
        """Create an empty UTF8 database; its connection string."""
        name = f"{self._prefix}_{next(self._names)}"
        with self.admin() as connection:
            connection.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(name))
            )
        return self.conninfo(name)


def _run_as(user: str | None, command: list[str]) -> subprocess.CompletedProcess[str]:
    prefix = [] if user is None else ["runuser", "-u", user, "--"]
    return subprocess.run(prefix + command, capture_output=True, text=True, check=False, timeout=120)


def server_binaries() -> Path | None:
    """The folder of the newest installed server's ``initdb``, ``pg_ctl`` and ``postgres``, if any."""
    return _server_bin()


@contextlib.contextmanager
def _own_cluster(binaries: Path) -> Generator[Cluster]:
    try:
        with throwaway_cluster(binaries) as cluster:
            yield cluster
    except ClusterError as error:
        pytest.fail(str(error), pytrace=False)


@contextlib.contextmanager
def throwaway_cluster(binaries: Path, *, fsync: bool = False) -> Generator[Cluster]:
    """A fresh cluster in a temporary folder (Unix socket only), stopped and removed on exit.

    ``fsync`` is off unless asked for (the tests are about semantics; a benchmark may want it).

    Raises:
        ClusterError: ``initdb`` or ``pg_ctl start`` failed.
    """
    user = None
    folder = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    try:
        if os.geteuid() == 0:
            user = "nobody"
            entry = pwd.getpwnam(user)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        data = folder / "data"
        done = _run_as(
            user,
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "harness",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
        )
        if done.returncode != 0:
            raise ClusterError(f"initdb failed: {done.stderr.strip()}")
        # Only a Unix socket in the private folder; fsync off: these tests are about semantics.
        durable = "on" if fsync else "off"
        options = f"-k {folder} -c listen_addresses='' -c fsync={durable} -c max_connections=200"
        log_file = folder / "server.log"

        def control(arguments: list[str]) -> None:
            # restart keeps the options of the last start (postmaster.opts); they are given
            # again anyway so that a restart never depends on that file.
            command = [str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log_file), "-o", options]
            done = _run_as(user, command + arguments)
            if done.returncode != 0:
                log = log_file.read_text(errors="replace") if log_file.exists() else ""
                raise ClusterError(f"pg_ctl {arguments[-1]} failed: {done.stderr.strip()} {log[-2000:]}")

        control(["-w", "-t", "60", "start"])
        try:
            yield Cluster(make_conninfo(host=str(folder), user="harness", dbname="postgres"), control=control)
        finally:
            _run_as(user, [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def session_cluster() -> Generator[Cluster]:
    """The session's server: ``HARNESS_TEST_DATABASE_URL``, else a cluster started here.

    Skips (fails under ``HARNESS_REQUIRE_POSTGRES=1``) when there is neither.
    """
    url = os.environ.get("HARNESS_TEST_DATABASE_URL")
    if url:
        cluster = Cluster(url)
        try:
            cluster.admin().close()
        except psycopg.OperationalError as error:
            _unavailable(f"HARNESS_TEST_DATABASE_URL does not answer: {error}")
        yield cluster
        return
    binaries = _server_bin()
    if binaries is None:
        _unavailable(_HOW)
    with _own_cluster(binaries) as cluster:
        yield cluster
