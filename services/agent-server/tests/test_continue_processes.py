"""A real server killed (SIGKILL) in the middle of a tool's effect, its turn continued by another (issue #23).

Server A runs ``process.exec`` (on the host, ``--allow-host-effects``): the command appends a
line to ``effects.txt`` and sleeps. While it sleeps, A is killed with SIGKILL: the call is
stored, its result never is. Server B (a restart on the same SQLite file, or a second replica
on the same PostgreSQL) then continues the turn — by ``session/continue`` from a client, or
by itself at start-up with ``--resume-interrupted`` — and the command never runs again: one
line in ``effects.txt``, one ``tool.call``, an interrupted ``tool.result``, the turn completed.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import trio
from pg_cluster import Cluster, session_cluster
from psycopg.conninfo import conninfo_to_dict

from agent_server.client import AcpClient, AcpClientError, ConnectionClosedError, JsonObject, connect
from harness_kernel.store import SessionStore, SqliteSessionStore
from harness_store_postgres import PostgresSessionStore

pytestmark = pytest.mark.slow

COMMAND = ["sh", "-c", "echo ran >> effects.txt; sleep 3"]
CRASHING = f"""\
- toolCalls:
    - {{id: call-1, name: process.exec, arguments: {{argv: {json.dumps(COMMAND)}}}}}
- content: never sent
"""
CONTINUING = """\
- content: continued after the crash
"""


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    yield from session_cluster()


@dataclass
class Setup:
    """Where the servers keep their sessions: ``--db FILE`` or a PostgreSQL URL."""

    directory: Path
    store_flags: list[str]
    environment: dict[str, str]
    conninfo: str | None = None

    def store(self) -> SessionStore:
        """The same store, opened by the test (to watch a session without touching it)."""
        if self.conninfo is not None:
            return PostgresSessionStore(self.conninfo)
        return SqliteSessionStore(self.directory / "state" / "sessions.sqlite")


@pytest.fixture(params=["sqlite", "postgres"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Setup:
    (tmp_path / "root" / "ws").mkdir(parents=True)
    (tmp_path / "crashing.yaml").write_text(CRASHING)
    (tmp_path / "continuing.yaml").write_text(CONTINUING)
    token_file = tmp_path / "token"
    token_file.write_text(f"{secrets.token_urlsafe(32)}\n")
    token_file.chmod(0o600)
    if request.param == "sqlite":
        return Setup(tmp_path, ["--db", str(tmp_path / "state" / "sessions.sqlite")], {})
    cluster: Cluster = request.getfixturevalue("postgres")
    conninfo = cluster.new_database()
    parts = conninfo_to_dict(conninfo)
    user, host, name = str(parts["user"]), str(parts["host"]), str(parts["dbname"])
    url = f"postgresql://{quote(user)}@/{quote(name)}?host={quote(host, safe='')}"
    return Setup(tmp_path, ["--store", "postgres"], {"HARNESS_DATABASE_URL": url}, conninfo)


@asynccontextmanager
async def server(
    setup: Setup, name: str, scenario: str, *extra: str
) -> AsyncGenerator[tuple[trio.Process, str]]:
    """One ``agent-server serve`` process and its URL (with the token); SIGTERM at the end."""
    directory = setup.directory
    token = (directory / "token").read_text().strip()
    command = [
        sys.executable,
        "-m",
        "agent_server",
        "serve",
        "--port",
        "0",
        "--workspace-root",
        str(directory / "root"),
        *setup.store_flags,
        "--scenario",
        str(directory / scenario),
        "--tools",
        "process.exec",
        "--workspace-adapter",
        "local",
        "--allow-host-effects",
        "--token-file",
        str(directory / "token"),
        "--session-lease-seconds",
        "1",
        *extra,
    ]
    log = (directory / f"{name}.log").open("wb")
    environment = {**os.environ, **setup.environment}
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
        yield process, f"{url}?token={token}"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        log.close()


async def _killed_during_the_command(setup: Setup) -> str:
    """A session whose ``process.exec`` is running (its line written) when its server is SIGKILLed."""
    effects = setup.directory / "root" / "ws" / "effects.txt"
    async with server(setup, "a", "crashing.yaml") as (process, url), connect(url) as client:
        await client.initialize()
        session_id: str = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]

        async def prompt() -> None:
            with pytest.raises(ConnectionClosedError):
                await client.request("session/prompt", {"sessionId": session_id, "content": "run it"})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            with trio.fail_after(30):
                async for note in client.notifications:
                    event = note["params"]["event"]
                    if event["type"] == "permission.requested":
                        answer = {"sessionId": session_id, "permissionId": event["data"]["permissionId"]}
                        await client.request("permission/respond", {**answer, "decision": "allow"})
                        break
                while not effects.exists():  # noqa: ASYNC110 - the command's effect is a file
                    await trio.sleep(0.01)
            process.kill()
            await process.wait()
    assert process.returncode == -signal.SIGKILL
    return session_id


async def _replay(client: AcpClient, session_id: str) -> list[JsonObject]:
    """Every stored event, restored once the session's lease allows it (-32013 is waited out)."""
    with trio.fail_after(30):
        while True:
            try:
                notes: list[JsonObject] = []
                after = -1
                while True:
                    params = {"sessionId": session_id, "afterSeq": after, "limit": 1000}
                    page = await client.request("session/restore", params)
                    notes.extend(note["params"]["event"] for note in client.drain_notifications())
                    after = page["replayedThroughSeq"]
                    if not page["hasMore"]:
                        return notes
            except AcpClientError as error:
                if error.code != -32013:
                    raise
                client.drain_notifications()
            await trio.sleep(0.2)


async def _finished(store: SessionStore, session_id: str) -> bool:
    if (await store.get(session_id)).status != "closed":
        return False
    size = await store.size(session_id)
    return (await store.slice(session_id, size - 1, size))[-1].event.type == "agent.stopped"


def _check_the_command_ran_once(setup: Setup, events: list[JsonObject]) -> None:
    effects = setup.directory / "root" / "ws" / "effects.txt"
    assert effects.read_text().splitlines() == ["ran"]
    types = [event["type"] for event in events]
    assert types.count("tool.call") == 1
    assert types.count("turn.resumed") == 1
    result = next(event["data"] for event in events if event["type"] == "tool.result")
    assert (result["ok"], result["error"]["code"]) == (False, "TOOL_INTERRUPTED")
    assert types[-2:] == ["turn.completed", "agent.stopped"]
    assert events[-1]["data"]["status"] == "completed"


async def test_session_continue_after_a_sigkill_never_runs_the_command_again(setup: Setup) -> None:
    session_id = await _killed_during_the_command(setup)
    async with server(setup, "b", "continuing.yaml") as (_, url), connect(url) as client:
        await client.initialize()
        with trio.fail_after(30):
            while True:
                try:
                    result = await client.request("session/continue", {"sessionId": session_id})
                    break
                except AcpClientError as error:
                    if error.code != -32013:  # the dead server's lease: waited out
                        raise
                await trio.sleep(0.2)
        assert (result["status"], result["finalText"]) == ("completed", "continued after the crash")
        streamed = [note["params"]["event"]["type"] for note in client.drain_notifications()]
        assert streamed[0] == "turn.resumed"
        # The session lives on here: a follow-up, then it is closed and replayed.
        follow_up, _ = await client.prompt(session_id, "and now?")
        assert follow_up["status"] == "completed"
        assert await client.request("session/close", {"sessionId": session_id}) == {"closed": True}
        events = await _replay(client, session_id)
    assert [event["type"] for event in events].count("agent.stopped") == 2
    _check_the_command_ran_once(setup, events)


async def test_resume_interrupted_continues_the_turn_at_start_up(setup: Setup) -> None:
    session_id = await _killed_during_the_command(setup)
    resuming = server(setup, "b", "continuing.yaml", "--resume-interrupted")
    async with resuming as (_, url), connect(url) as client, setup.store() as store:
        # Watched in the store, not restored (a restore would itself take the session up):
        # closed, and ended with a terminal event (it is closed for a moment before B reopens it).
        with trio.fail_after(30):
            while not await _finished(store, session_id):  # noqa: ASYNC110 - another process writes it
                await trio.sleep(0.1)
        await client.initialize()
        events = await _replay(client, session_id)
    _check_the_command_ran_once(setup, events)
    answers = [
        event["data"]["content"]
        for event in events
        if event["type"] == "message.completed" and event["data"]["role"] == "assistant"
    ]
    assert answers[-1] == "continued after the crash"
