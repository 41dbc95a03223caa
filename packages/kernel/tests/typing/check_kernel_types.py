"""Typed downstream usage of harness-kernel, checked by pyright strict in CI (never executed)."""

from __future__ import annotations

from typing import assert_type

from harness_kernel.events import Event, create_event, deserialize_event, redact_event, serialize_event
from harness_kernel.models import FakeModel, ModelRequest, ScriptedTurn, UserMessage
from harness_kernel.policy import Decision, PermissionMap, RulePermissionController, compile_rules, decide
from harness_kernel.store import (
    EventStore,
    MemorySessionStore,
    SequencedEvent,
    SessionEventLog,
    SessionLease,
    SessionRecord,
    SessionStore,
    SqliteSessionStore,
)
from harness_kernel.store.conformance import CHECKS, ConformanceCheck, run_conformance
from harness_tools import ToolPermissionIntent


async def typed_usage(permissions: PermissionMap) -> None:
    event = create_event("session.created", {"sessionId": "s1"})
    assert_type(event, Event)
    assert_type(serialize_event(event), bytes)
    assert_type(deserialize_event(serialize_event(event)), Event)
    assert_type(redact_event(event), Event)

    assert_type(decide(permissions, "fs.read", "README.md"), Decision)
    assert_type(compile_rules(permissions).decide("fs.read"), Decision)
    controller = RulePermissionController(permissions)
    controller.decide(ToolPermissionIntent(action="fs.read", subject="README.md", scope="once"))

    model = FakeModel([ScriptedTurn(content="hello")])
    async for frame in model.stream(ModelRequest(messages=[UserMessage(content="hi")])):
        del frame

    async with SqliteSessionStore("events.db") as store:
        await store.create("s1")
        assert_type(await store.append("s1", event), SequencedEvent)


async def any_session_store(store: SessionStore, event: Event) -> None:
    record = await store.create(None, metadata={"kind": "k"}, owner_id="w1", lease_ms=30_000)
    lease = record.lease
    if lease is not None:
        assert_type(lease.live_at(await store.current_time()), bool)
    assert_type(await store.renew_lease(record.session_id, "w1", lease_ms=30_000), SessionLease)
    log = store.event_log(record.session_id, owner_id="w1")
    assert_type(log, SessionEventLog)
    runtime_store: EventStore = log
    await runtime_store.append(event)
    await store.close(record.session_id, owner_id="w1")
    reopened = await store.reopen(
        record.session_id, owner_id="w2", lease_ms=30_000, expected_metadata=record.metadata
    )
    assert_type(reopened, SessionRecord)


async def both_stores_are_session_stores(event: Event) -> None:
    async with MemorySessionStore() as memory, SqliteSessionStore("events.db") as sqlite:
        await any_session_store(memory, event)
        await any_session_store(sqlite, event)
    assert_type(CHECKS[0], ConformanceCheck)
    await run_conformance(lambda now: MemorySessionStore(now=now))
