"""Per-principal quotas and the retention of finished sessions (decision 058).

One principal cannot hold every server-wide session slot, nor keep unbounded event bytes in
the store: past its quota its new work is refused with ``-32024 ACP_PRINCIPAL_QUOTA`` while
other principals carry on. Retention deletes finished sessions by age and by total size,
never a live one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from agent_server import LimitsConfig, StorageConfig
from agent_server._cli import _parser, build_config  # pyright: ignore[reportPrivateUsage]
from agent_server._quotas import PrincipalQuotas, apply_retention
from agent_server.client import AcpClient, AcpClientError
from harness_kernel.events import create_event
from harness_kernel.store import MemorySessionStore, SqliteSessionStore
from harness_kernel.store.conformance import ManualClock

if TYPE_CHECKING:
    from conftest import ServerFactory

ALICE = "alice-" + "a1" * 16
BOB = "bob-" + "b2" * 16
PRINCIPALS = {"alice": ALICE, "bob": BOB}


async def _new(client: AcpClient) -> str:
    return (await client.request("session/new", {"workspace": "ws"}))["sessionId"]


async def _refused_for_quota(client: AcpClient, method: str, params: dict[str, object]) -> str:
    with pytest.raises(AcpClientError) as refused:
        await client.request(method, params)
    assert (refused.value.code, refused.value.data_code) == (-32024, "ACP_PRINCIPAL_QUOTA")
    return str(refused.value)


async def test_by_default_a_principal_holds_at_most_its_share_of_the_server_s_sessions(
    running: ServerFactory,
) -> None:
    async with (
        running(auth_tokens=PRINCIPALS, max_sessions=4) as handle,
        handle.connect(token=ALICE) as alice,
        handle.connect(token=ALICE) as alice_again,
        handle.connect(token=BOB) as bob,
    ):
        for client in (alice, alice_again, bob):
            await client.initialize()
        first = await _new(alice)
        await _new(alice_again)
        # The share counts the principal's sessions on every connection.
        await _refused_for_quota(alice, "session/new", {"workspace": "ws"})
        await _refused_for_quota(alice_again, "session/new", {"workspace": "ws"})
        # The other principal still gets its share of the server.
        await _new(bob)
        await _new(bob)
        # A finished session gives its principal's slot back.
        await alice.request("session/cancel", {"sessionId": first})
        await _new(alice)


async def test_the_session_quota_can_be_set_and_one_principal_keeps_the_whole_server_by_default(
    running: ServerFactory,
) -> None:
    async with (
        running(auth_tokens=PRINCIPALS, max_sessions_per_principal=1) as handle,
        handle.connect(token=ALICE) as alice,
        handle.connect(token=BOB) as bob,
    ):
        await alice.initialize()
        await bob.initialize()
        await _new(alice)
        message = await _refused_for_quota(alice, "session/new", {"workspace": "ws"})
        assert "1 live sessions" in message
        await _new(bob)
    async with running(max_sessions=3) as handle, handle.connect() as client:
        await client.initialize()
        for _ in range(3):
            await _new(client)


async def test_a_principal_over_its_byte_quota_is_refused_new_sessions_and_prompts(
    running: ServerFactory,
) -> None:
    async with (
        running(auth_tokens=PRINCIPALS, max_stored_bytes_per_principal=1) as handle,
        handle.connect(token=ALICE) as alice,
        handle.connect(token=BOB) as bob,
    ):
        await alice.initialize()
        await bob.initialize()
        session_id = await _new(alice)
        await alice.prompt(session_id, "fill the store")
        await _refused_for_quota(alice, "session/new", {"workspace": "ws"})
        await _refused_for_quota(alice, "session/prompt", {"sessionId": session_id, "content": "more"})
        # Bob's sessions are his own account.
        bobs = await _new(bob)
        await bob.prompt(bobs, "mine")


async def test_without_persistence_a_closed_session_s_events_no_longer_count(running: ServerFactory) -> None:
    async with (
        running(db_path=None, persistence=False, max_stored_bytes_per_principal=1) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        session_id = await _new(client)
        await client.prompt(session_id, "kept while the session lives")
        await _refused_for_quota(client, "session/new", {"workspace": "ws"})
        await client.request("session/close", {"sessionId": session_id})
        await _new(client)


@pytest.mark.parametrize("running", ["sqlite"], indirect=True)
async def test_the_byte_quota_counts_what_the_store_held_before_the_server_started(
    running: ServerFactory,
) -> None:
    async with running(auth_tokens=PRINCIPALS) as handle, handle.connect(token=ALICE) as alice:
        await alice.initialize()
        await alice.prompt(await _new(alice), "an earlier conversation")
    async with (
        running(auth_tokens=PRINCIPALS, max_stored_bytes_per_principal=1) as handle,
        handle.connect(token=ALICE) as alice,
        handle.connect(token=BOB) as bob,
    ):
        await alice.initialize()
        await bob.initialize()
        await _refused_for_quota(alice, "session/new", {"workspace": "ws"})
        await _new(bob)


def test_quota_settings_are_checked() -> None:
    records: dict[str, Callable[..., object]] = {
        "max_sessions_per_principal": LimitsConfig,
        "max_stored_bytes_per_principal": LimitsConfig,
    }
    records |= {"retention_max_bytes": StorageConfig}
    for name, record in records.items():
        for bad in (0, -1, "1", 1.5, True):
            with pytest.raises(ValueError, match=name):
                record(**{name: bad})


# ------------------------------------------------------------------ retention


async def _finished(store: MemorySessionStore, clock: ManualClock, name: str, *, days_ago: float) -> None:
    await store.create(name)
    await store.close(name, at=(clock() - timedelta(days=days_ago)).isoformat())


async def test_retention_by_age_deletes_finished_sessions_older_than_the_age_and_keeps_live_ones() -> None:
    clock = ManualClock()
    quotas = PrincipalQuotas(max_sessions=8, max_stored_bytes=None)
    async with MemorySessionStore(now=clock) as store:
        await _finished(store, clock, "old", days_ago=31)
        await _finished(store, clock, "recent", days_ago=29)
        await store.create("live")
        for name in ("old", "recent", "live"):
            quotas.record(name, "alice", 100)
        assert await apply_retention(store, quotas, max_age_days=30, max_bytes=None) == ("old",)
        assert sorted(listing.record.session_id for listing in await store.list()) == ["live", "recent"]
        assert quotas.stored == {"alice": 200}
        clock.advance(seconds=2 * 86_400)  # time passes: the recent one ages out too
        assert await apply_retention(store, quotas, max_age_days=30, max_bytes=None) == ("recent",)
        assert [listing.record.session_id for listing in await store.list()] == ["live"]


async def test_retention_by_size_deletes_the_oldest_finished_sessions_until_the_rest_fit() -> None:
    clock = ManualClock()
    quotas = PrincipalQuotas(max_sessions=8, max_stored_bytes=None)
    async with MemorySessionStore(now=clock) as store:
        for name, days in (("first", 3), ("second", 2), ("third", 1)):
            await _finished(store, clock, name, days_ago=days)
            quotas.record(name, "alice", 100)
        await store.create("live")
        quotas.record("live", "bob", 10_000)  # live sessions count for nothing here
        assert await apply_retention(store, quotas, max_age_days=None, max_bytes=250) == ("first",)
        assert quotas.stored == {"alice": 200, "bob": 10_000}
        assert await apply_retention(store, quotas, max_age_days=None, max_bytes=250) == ()
        assert await apply_retention(store, quotas, max_age_days=None, max_bytes=50) == ("second", "third")
        assert [listing.record.session_id for listing in await store.list()] == ["live"]


async def test_the_server_applies_the_size_retention_to_what_the_store_held_at_start(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir(exist_ok=True)
    path = tmp_path / "state" / "kept.sqlite"
    async with SqliteSessionStore(path) as store:
        for name in ("finished", "live"):
            await store.create(name)
            event = create_event(
                "session.created", {"sessionId": name, "workspace": "/w"}, event_id=f"e-{name}"
            )
            await store.append(name, event)
        await store.close("finished")
    async with (
        running(db_path=str(path), retention_max_bytes=1, retention_days=None),
        SqliteSessionStore(path) as store,
    ):
        # Retention runs in the server's background, which signals nothing: poll the store.
        with trio.fail_after(30):
            while "finished" in {listing.record.session_id for listing in await store.list()}:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert [listing.record.session_id for listing in await store.list()] == ["live"]


def test_serve_sets_the_quotas_from_flags_or_variables_the_flag_first(tmp_path: Path) -> None:
    argv = ["serve", "--workspace-root", str(tmp_path)]
    plain = build_config(_parser().parse_args(argv), {})
    assert (plain.limits.max_sessions_per_principal, plain.limits.max_stored_bytes_per_principal) == (
        None,
        None,
    )
    assert (plain.storage.retention_days, plain.storage.retention_max_bytes) == (30, None)
    environ = {
        "HARNESS_AGENT_MAX_SESSIONS_PER_PRINCIPAL": "8",
        "HARNESS_AGENT_MAX_STORED_BYTES_PER_PRINCIPAL": "1048576",
        "HARNESS_AGENT_RETENTION_MAX_BYTES": "1073741824",
    }
    from_variables = build_config(_parser().parse_args(argv), environ)
    assert from_variables.limits.max_sessions_per_principal == 8
    assert from_variables.limits.max_stored_bytes_per_principal == 1_048_576
    assert from_variables.storage.retention_max_bytes == 1_073_741_824
    flags = [*argv, "--max-sessions-per-principal", "2", "--max-stored-bytes-per-principal", "5"]
    from_flags = build_config(_parser().parse_args([*flags, "--retention-max-bytes", "7"]), environ)
    assert from_flags.limits.max_sessions_per_principal == 2
    assert from_flags.limits.max_stored_bytes_per_principal == 5
    assert from_flags.storage.retention_max_bytes == 7
    acp = build_config(_parser().parse_args(["acp", "--workspace-root", str(tmp_path)]), {})
    assert acp.limits.max_sessions_per_principal is None


@pytest.mark.parametrize("value", ["0", "-1", "1e3", " 5", "", "9" * 40])
def test_a_malformed_quota_variable_is_refused(tmp_path: Path, value: str) -> None:
    arguments = _parser().parse_args(["serve", "--workspace-root", str(tmp_path)])
    with pytest.raises(ValueError, match="HARNESS_AGENT_RETENTION_MAX_BYTES must be a positive integer"):
        build_config(arguments, {"HARNESS_AGENT_RETENTION_MAX_BYTES": value})
