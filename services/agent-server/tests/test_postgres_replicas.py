"""Two agent-server replicas on one PostgreSQL: a session outlives the replica that ran it (issue #22).

Two real ``agent-server serve --store postgres`` processes share a throwaway PostgreSQL
cluster (``pg_cluster``; skipped without PostgreSQL, a failure under
``HARNESS_REQUIRE_POSTGRES=1``). A client runs a prompt on replica A; while the run waits for
its permission answer, A is killed with SIGKILL. Once A's lease has expired, replica B
restores the session: every event A stored, gapless, nothing twice, marked interrupted exactly
once. B then runs a new prompt to completion.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import trio
from pg_cluster import Cluster, session_cluster
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from agent_server import NetworkConfig, ServerConfig, ServerHandle, StorageConfig, WorkspaceConfig, serve
from agent_server.client import AcpClient, AcpClientError, ConnectionClosedError, connect
from harness_kernel.events import create_event
from harness_kernel.store import SESS_CLOSED, SESS_OWNERSHIP_LOST, SessionStoreError
from harness_store_postgres import PostgresSessionStore

pytestmark = pytest.mark.slow

SCENARIO = """\
- toolCalls:
    - {id: call-1, name: echo, arguments: {message: hi}}
- content: done
"""
LEASE_SECONDS = 1


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    yield from session_cluster()


def _url(conninfo: str) -> str:
    """The ``postgresql://`` URL of a keyword/value connection string (a Unix-socket host)."""
    parts = conninfo_to_dict(conninfo)
    user, host, dbname = str(parts["user"]), str(parts["host"]), str(parts["dbname"])
    return f"postgresql://{quote(user)}@/{quote(dbname)}?host={quote(host, safe='')}"


class Replica:
    """One ``agent-server serve`` process and the URL a client connects to."""

    def __init__(self, process: trio.Process, url: str) -> None:
        self.process = process
        self.url = url


@asynccontextmanager
async def replica(directory: Path, name: str, database_url: str, token: str) -> AsyncGenerator[Replica]:
    token_file = directory / f"{name}.token"
    token_file.write_text(f"{token}\n")
    token_file.chmod(0o600)
    (directory / "scenario.yaml").write_text(SCENARIO)
    command = [
        sys.executable,
        "-m",
        "agent_server",
        "serve",
        "--port",
        "0",
        "--workspace-root",
        str(directory / "root"),
        "--store",
        "postgres",
        "--scenario",
        str(directory / "scenario.yaml"),
        "--tools",
        "echo",
        "--token-file",
        str(token_file),
        "--session-lease-seconds",
        str(LEASE_SECONDS),
    ]
    # The URL goes in the environment, where a password would stay out of the process list.
    environment = {**os.environ, "HARNESS_DATABASE_URL": database_url}
    log = (directory / f"{name}.log").open("wb")
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=log, env=environment)
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, (directory / f"{name}.log").read_text(errors="replace")
                line += chunk
        url = line.decode().strip().removeprefix("agent-server: ")
        yield Replica(process, f"{url}?token={token}")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        log.close()


async def _restore_when_the_lease_has_expired(client: AcpClient, session_id: str) -> dict[str, Any]:
    """``session/restore`` from -1, retried while the dead replica's lease is still live (-32013)."""
    with trio.fail_after(30):
        while True:
            try:
                return await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            except AcpClientError as error:
                if error.code != -32013:  # only "owner lease has not expired" is worth waiting out
                    raise
            await trio.sleep(0.2)


async def _killed_mid_prompt(first: Replica, conninfo: str) -> tuple[str, list[dict[str, Any]], str]:
    """A session prompted on ``first``, which is killed (SIGKILL) while the run awaits a permission.

    Returns the session id, the notifications delivered before the kill and the lease owner
    the killed replica held.
    """
    delivered: list[dict[str, Any]] = []
    async with connect(first.url) as client:
        await client.initialize()
        session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]

        async def prompt() -> None:
            with pytest.raises(ConnectionClosedError):
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            with trio.fail_after(30):
                async for note in client.notifications:
                    delivered.append(note["params"])
                    if note["params"]["event"]["type"] == "permission.requested":
                        break
            # Mid-prompt: the run waits for the permission answer that never comes.
            async with PostgresSessionStore(conninfo) as store:
                lease = (await store.get(session_id)).lease
            assert lease is not None
            first.process.kill()
            await first.process.wait()
    assert first.process.returncode == -signal.SIGKILL
    return session_id, delivered, lease.owner_id


async def test_a_session_outlives_its_replica_killed_mid_prompt(postgres: Cluster, tmp_path: Path) -> None:
    (tmp_path / "root" / "ws").mkdir(parents=True)
    conninfo = postgres.new_database()
    database_url = _url(conninfo)
    token = secrets.token_urlsafe(32)
    async with (
        replica(tmp_path, "a", database_url, token) as first,
        replica(tmp_path, "b", database_url, token) as second,
    ):
        session_id, delivered, stale_owner = await _killed_mid_prompt(first, conninfo)

        async with connect(second.url) as client:
            await client.initialize()
            result = await _restore_when_the_lease_has_expired(client, session_id)
            restored = [note["params"] for note in client.drain_notifications()]
            assert result["status"] == "interrupted"
            seqs = [note["seq"] for note in restored]
            assert seqs == list(range(len(seqs)))  # gapless from 0
            ids = [note["event"]["eventId"] for note in restored]
            assert len(set(ids)) == len(ids)  # nothing twice
            # Everything A delivered was durable first, so B restores it unchanged, in order.
            assert restored[: len(delivered)] == delivered
            markers = [note for note in restored if note["event"]["type"] == "session.restored"]
            assert len(markers) == 1
            assert markers[0]["event"]["data"]["outcome"] == "interrupted"
            # A second restore finds the session already recovered: the same events, one marker.
            again = await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            assert again["status"] == "interrupted"
            assert [note["params"] for note in client.drain_notifications()] == restored

            # A write from A arriving late (its owner id, a fresh event) is refused by the database.
            late = create_event(
                "error", {"code": "LATE", "message": "a stale replica's write", "retryable": False}
            )
            async with PostgresSessionStore(conninfo) as store:
                with pytest.raises(SessionStoreError) as stale:
                    await store.append(session_id, late, owner_id=stale_owner)
                assert stale.value.code in {SESS_OWNERSHIP_LOST, SESS_CLOSED}
                assert await store.size(session_id) == len(restored)

            # B serves new work as usual.
            fresh = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            answer, notes = await client.prompt(fresh, "go")
            assert answer["status"] == "completed"
            assert [note["params"]["seq"] for note in notes] == list(range(len(notes)))


def _allow_connections(cluster: Cluster, conninfo: str, allowed: bool) -> None:
    """Open or close the database to new connections; closing also ends the store's own."""
    name = str(conninfo_to_dict(conninfo)["dbname"])
    with cluster.admin() as connection:
        connection.execute(
            sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
                sql.Identifier(name), sql.Literal(allowed)
            )
        )
        if not allowed:
            connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )


async def test_an_unreachable_database_is_a_typed_reply_and_the_server_serves_on(
    postgres: Cluster, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    (root / "ws").mkdir(parents=True)
    conninfo = postgres.new_database()
    config = ServerConfig(
        network=NetworkConfig(port=0),
        storage=StorageConfig(database_url=_url(conninfo)),
        workspace=WorkspaceConfig(workspace_root=str(root)),
    )
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        async with connect(f"{handle.url}?token={handle.token}") as client:
            await client.initialize()
            await client.request("session/new", {"workspace": "ws"})
            _allow_connections(postgres, conninfo, allowed=False)
            with pytest.raises(AcpClientError) as refused:
                await client.request("session/new", {"workspace": "ws"})
            assert (refused.value.code, refused.value.data_code) == (-32018, "ACP_STORE_UNAVAILABLE")
            # The same server, the same connection: once the database is back, work goes on.
            _allow_connections(postgres, conninfo, allowed=True)
            created = await client.request("session/new", {"workspace": "ws"})
            answer, _ = await client.prompt(created["sessionId"], "hello")
            assert answer["status"] == "completed"
        await handle.aclose()
