"""Issue #15 findings 5, 7 and 8, reproduced as an attacker would: each test failed on the old main.

- 5: no authentication by default; restore open to every connection; one-character tokens.
- 7: idle sockets starving clients; pipelined ``session/new`` overrunning the per-connection
  cap; no server-wide session cap; runs held open by unanswered permissions.
- 8: a store that grows without bound; no disk-space check.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from agent_server import NetworkConfig, ServerConfig, WorkspaceConfig
from agent_server.client import AcpClientError, HandshakeRejectedError, connect
from harness_kernel.store import SessionStoreError, SqliteSessionStore

if TYPE_CHECKING:
    from conftest import ServerFactory

ALICE = "alice-" + "a1" * 16
BOB = "bob-" + "b2" * 16


async def test_a_server_without_a_configured_token_refuses_anonymous_clients(running: ServerFactory) -> None:
    async with running() as handle:
        assert handle.token is not None
        assert len(handle.token) == 43  # 32 random bytes, URL-safe base64
        with pytest.raises(HandshakeRejectedError) as anonymous:
            async with connect(handle.url):
                pass
        assert anonymous.value.status == 403
        async with handle.connect() as client:
            assert (await client.initialize())["protocolVersion"] == "harness/acp/1"


async def test_every_server_generates_its_own_token(running: ServerFactory) -> None:
    async with running() as first, running(persistence=False, db_path=None) as second:
        assert first.token != second.token
        with pytest.raises(HandshakeRejectedError):
            async with connect(second.url, token=first.token):
                pass


@pytest.mark.parametrize("token", ["t", "0" * 31, "has a space" + "x" * 32, "é" * 40, "x" * 513])
def test_weak_or_malformed_tokens_are_refused_for_every_bind(token: str, tmp_path: Path) -> None:
    for host in ("127.0.0.1", "0.0.0.0"):
        with pytest.raises(ValueError, match="auth token must"):
            ServerConfig(
                network=NetworkConfig(host=host, auth_token=token, allow_plaintext_remote=True),
                workspace=WorkspaceConfig(workspace_root=str(tmp_path)),
            )


def test_a_remote_bind_accepts_a_128_bit_token(tmp_path: Path) -> None:
    config = ServerConfig(
        network=NetworkConfig(host="0.0.0.0", auth_token="0123456789abcdef" * 2, allow_plaintext_remote=True),
        workspace=WorkspaceConfig(workspace_root=str(tmp_path)),
    )
    assert config.check_serving() == str(tmp_path.resolve())


async def test_a_session_is_restorable_only_by_the_principal_that_created_it(running: ServerFactory) -> None:
    async with running(auth_tokens={"alice": ALICE, "bob": BOB}) as handle:
        assert handle.token is None  # several principals: each holds its own token
        async with handle.connect(token=ALICE) as alice:
            await alice.initialize()
            session_id = (await alice.request("session/new", {"workspace": "ws"}))["sessionId"]
            await alice.prompt(session_id, "secret plans")
        async with handle.connect(token=BOB) as bob:
            await bob.initialize()
            with pytest.raises(AcpClientError) as foreign:
                await bob.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            assert foreign.value.code == -32010  # indistinguishable from an unknown id
            assert bob.drain_notifications() == []
        async with handle.connect(token=ALICE) as alice:
            await alice.initialize()
            replay = await alice.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            assert replay["replayedEvents"] > 0


async def test_failed_attempts_are_logged_and_answered_ever_more_slowly(
    running: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agent_server")
    async with running() as handle:
        waits: list[float] = []
        for _ in range(3):
            started = trio.current_time()
            with pytest.raises(HandshakeRejectedError):
                async with connect(handle.url, token="guess-" + "0" * 40):
                    pass
            waits.append(trio.current_time() - started)
        started = trio.current_time()
        async with handle.connect() as client:  # the owner is not locked out
            await client.initialize()
        owner_wait = trio.current_time() - started
    # 0.1 s, 0.2 s, 0.4 s at least: a sleep never ends early.
    assert waits[0] >= 0.1
    assert waits[1] >= 0.2
    assert waits[2] >= 0.4
    assert owner_wait < waits[2]
    failures = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
    assert failures == [
        "authentication failed from 127.0.0.1 (1 recent failures)",
        "authentication failed from 127.0.0.1 (2 recent failures)",
    ]


_ATTACK = r"""
if cat "$1" >/dev/null 2>&1; then echo token-readable; else echo token-private; fi
exec 3<>"/dev/tcp/127.0.0.1/$2"
printf 'GET /acp HTTP/1.1
Host: x
Upgrade: websocket
Connection: Upgrade
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==
Sec-WebSocket-Version: 13

' >&3
head -c 12 <&3
"""


def _serve(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "agent_server", "serve", "--port", "0", "--no-db", *arguments]


def _environment(tmp_path: Path) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("HARNESS_")}
    environ["XDG_STATE_HOME"] = str(tmp_path / "state")
    return environ


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another local account (uid 65534)")
def test_another_local_account_cannot_drive_the_server(tmp_path: Path) -> None:
    """The finding's attack: uid 65534 connects to a root-owned server on loopback and is refused.

    The server runs as root with its default token file (mode 0600 in a 0700 folder); the other
    account (a plain shell, as such an attacker would use) can neither read the token nor
    upgrade without it.
    """
    root = tmp_path / "root"
    (root / "ws").mkdir(parents=True)
    server = subprocess.Popen(
        _serve("--workspace-root", str(root)),
        env=_environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip().rsplit(":", 1)[1].split("/")[0]
        note = server.stdout.readline().strip().removeprefix("agent-server: token file ")
        token_file = note.removesuffix(" (created now)")
        attacker = subprocess.run(
            ["bash", "-c", _ATTACK, "attack", token_file, port],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            user=65534,
            cwd="/",
        )
    finally:
        server.terminate()
        server.communicate(timeout=20)
    assert attacker.stdout.split() == ["token-private", "HTTP/1.1", "403"], attacker.stderr


async def test_idle_sockets_beyond_the_handshake_cap_are_evicted_oldest_first(running: ServerFactory) -> None:
    async with running(max_pending_connections=4) as handle:
        idle = [await trio.open_tcp_stream("127.0.0.1", handle.port) for _ in range(12)]
        try:
            async with handle.connect() as client:
                await client.initialize()
            # The oldest eight were evicted: the server ended them without a reply.
            for stream in idle[:8]:
                with trio.fail_after(30):
                    assert await stream.receive_some(1024) == b""
        finally:
            for stream in idle:
                await stream.aclose()


@pytest.mark.slow
def test_an_idle_socket_flood_under_a_low_descriptor_limit_does_not_starve_a_client(tmp_path: Path) -> None:
    """The finding's attack: more idle sockets than descriptors; a client must still get in at once."""
    (tmp_path / "ws").mkdir()
    token = "0123456789abcdef" * 3
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)

    def limit_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    environ = _environment(tmp_path)
    server = subprocess.Popen(
        _serve("--workspace-root", str(tmp_path), "--token-file", str(token_file)),
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit_descriptors,  # noqa: PLW1509 - the child only sets its own limit
    )
    idle: list[socket.socket] = []
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip().removeprefix("agent-server: ")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        for _ in range(400):  # more than the server's 256 descriptors
            idle.append(socket.create_connection(("127.0.0.1", port)))

        async def client() -> float:
            started = trio.current_time()
            with trio.fail_after(5):  # on the old main: until idle heads time out (10 s and more)
                async with connect(url, token=token) as acp:
                    await acp.initialize()
            return trio.current_time() - started

        assert trio.run(client) < 5
    finally:
        for sock in idle:
            sock.close()
        server.terminate()
        server.communicate(timeout=20)


async def test_pipelined_session_new_cannot_overrun_the_per_connection_cap(running: ServerFactory) -> None:
    async with running(max_sessions_per_connection=4) as handle, running.raw_websocket(handle) as raw:
        await raw.send_request(0, "initialize", _initialize_params())
        assert "result" in await raw.next_message()
        for request_id in range(1, 13):  # all sent before any is answered
            await raw.send_request(request_id, "session/new", {"workspace": "ws"})
        answers = [await raw.next_message() for _ in range(12)]
    created = [a for a in answers if "result" in a]
    refused = [a["error"]["data"]["code"] for a in answers if "error" in a]
    assert len(created) == 4
    assert refused == ["ACP_SESSION_LIMIT"] * 8


async def test_a_server_wide_session_cap_refuses_with_a_typed_error_and_frees_slots(
    running: ServerFactory,
) -> None:
    async with running(max_sessions=3) as handle, handle.connect() as first, handle.connect() as second:
        await first.initialize()
        await second.initialize()
        ids = [(await first.request("session/new", {"workspace": "ws"}))["sessionId"] for _ in range(2)]
        await second.request("session/new", {"workspace": "ws"})
        with pytest.raises(AcpClientError) as full:
            await second.request("session/new", {"workspace": "ws"})
        assert (full.value.code, full.value.data_code) == (-32014, "ACP_SERVER_SESSION_LIMIT")
        await first.request("session/cancel", {"sessionId": ids[0]})
        await second.request("session/new", {"workspace": "ws"})


async def test_a_run_with_unanswered_permissions_is_stopped_at_its_wall_time_limit(
    running: ServerFactory,
) -> None:
    async with running(max_run_ms=1000) as handle, handle.connect() as client:
        await client.initialize()
        session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
        started = trio.current_time()
        with trio.fail_after(30), pytest.raises(AcpClientError) as stopped:
            # The echo call asks the operator, who never answers (the permission timeout is 120 s).
            await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
        assert (stopped.value.code, stopped.value.data_code) == (-32016, "ACP_RUN_TIME_LIMIT")
        assert trio.current_time() - started >= 1.0
        events = [note["params"]["event"] for note in client.drain_notifications()]
        resolved = [e["data"] for e in events if e["type"] == "permission.resolved"]
        assert resolved == [resolved[0]]
        assert resolved[0]["decision"] == "deny"
        assert events[-1]["type"] == "agent.stopped"
        assert events[-1]["data"]["status"] == "canceled"


# Only a store in a local file has a disk whose free space the server checks.
@pytest.mark.parametrize("running", ["sqlite"], indirect=True)
async def test_session_new_is_refused_while_the_disk_is_short_of_space_and_stores_nothing(
    running: ServerFactory, tmp_path: Path
) -> None:
    async with running(min_free_disk_bytes=2**62) as handle, handle.connect() as client:
        await client.initialize()
        with pytest.raises(AcpClientError) as full:
            await client.request("session/new", {"workspace": "ws"})
        assert (full.value.code, full.value.data_code) == (-32015, "ACP_STORAGE_FULL")
    async with SqliteSessionStore(tmp_path / "state" / "sessions.sqlite") as store:
        assert await store.list() == ()


async def test_the_server_deletes_sessions_closed_longer_ago_than_the_retention(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "kept.sqlite")
    now = datetime.now(UTC)
    async with store:
        for name, age in (("sess-old", 45), ("sess-recent", 5)):
            await store.create(name)
            await store.close(name, at=(now - timedelta(days=age)).isoformat())
        await store.create("sess-active")
        async with running(db_path=None, session_store=store, retention_days=30):
            # Retention runs in the server's background, which signals nothing: poll the store.
            with trio.fail_after(30):
                while any(listing.record.session_id == "sess-old" for listing in await store.list()):  # noqa: ASYNC110
                    await trio.sleep(0.01)
        assert sorted(listing.record.session_id for listing in await store.list()) == [
            "sess-active",
            "sess-recent",
        ]
        with pytest.raises(SessionStoreError):
            await store.get("sess-old")


@pytest.mark.slow
def test_serve_creates_a_private_token_file_and_prints_where_it_is(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with subprocess.Popen(
        _serve("--workspace-root", str(tmp_path / "root")),
        env=_environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        url = process.stdout.readline().strip().removeprefix("agent-server: ")
        note = process.stdout.readline().strip()
        assert note.startswith("agent-server: token file ")
        assert note.endswith(" (created now)")
        path = Path(note.removeprefix("agent-server: token file ").removesuffix(" (created now)"))
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
        token = path.read_text().strip()

        async def client() -> None:
            async with connect(url, token=token) as acp:
                await acp.initialize()

        trio.run(client)
        process.terminate()
        process.communicate(timeout=20)
    assert process.returncode == 0


def _initialize_params() -> dict[str, object]:
    return json.loads(
        '{"protocolVersion": "harness/acp/1", "clientName": "t",'
        ' "capabilities": {"streaming": true, "permissioning": true}}'
    )
