"""Workloads the zygote forks for the kernel target; each runs in a grandchild that gets SIGKILLed.

Every workload reports to the parent through ``report(**fields)`` (one JSON line on the
zygote's pipe): ``ack=<event id>`` after an append returned, ``checkpoint=<revision>``
after a checkpoint save returned. ``params["self_kill"] = {"point": P, "count": N}`` makes
the grandchild SIGKILL itself the N-th time it passes point P (``before-append``,
``after-append``, ``before-effect``, ``after-effect``, ``after-checkpoint``).
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import trio
from faults.crash_harness import MARK_TOOL, mark_tool

from harness_kernel.events import Event
from harness_kernel.legacy import RunOptions, run_agent
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.policy import PermissionDecision
from harness_kernel.runtime import MinimalAgentRuntime, RunInput, RuntimeBudget
from harness_kernel.store import SqliteEventStore, SqliteSessionStore
from harness_tools import ToolPermissionIntent, ToolRegistry

__all__ = ["OWNER", "SESSION", "WORKLOADS", "Report", "SelfKill", "checkpoint_payload", "scripted_turns"]

SESSION: Final = "sess-crash"
OWNER: Final = "owner-crash"
LEASE: Final = timedelta(minutes=10)
WRITE_BEHIND_BATCH: Final = 8
Report = Callable[..., None]


class SelfKill:
    """SIGKILLs this process the ``count``-th time it passes ``point``."""

    def __init__(self, spec: dict[str, Any] | None, report: Report) -> None:
        self._point: str | None = None if spec is None else spec["point"]
        self._left = 0 if spec is None else int(spec["count"])
        self._report = report

    def passing(self, point: str) -> None:
        if point == self._point:
            self._left -= 1
            if self._left == 0:
                self._report(self_killed=point)
                os.kill(os.getpid(), signal.SIGKILL)


def scripted_turns(rounds: int, calls: int) -> list[ScriptedTurn]:
    """``rounds`` turns of ``calls`` mark calls each, then a text answer."""
    turns = [
        ScriptedTurn(
            tool_calls=[
                ToolCall(id=f"r{r}c{c}", name=MARK_TOOL, arguments={"r": r, "c": c}) for c in range(calls)
            ]
        )
        for r in range(rounds)
    ]
    return [*turns, ScriptedTurn(content="done")]


async def _open_session(store: SqliteSessionStore) -> None:
    expiry = datetime.now(UTC) + LEASE
    stamp = expiry.strftime("%Y-%m-%dT%H:%M:%S.") + f"{expiry.microsecond // 1000:03d}Z"
    await store.create(SESSION, metadata={"ownerId": OWNER, "leaseExpiresAt": stamp})


class _AckingEventStore:
    """The runtime's port: the real ``SqliteEventStore``, acknowledging each returned append.

    With ``write_behind`` it is deliberately broken (the negative control): it acknowledges
    at once and writes events in batches of ``WRITE_BEHIND_BATCH``, as a store that returns
    before its commit would.
    """

    def __init__(
        self, inner: SqliteEventStore, report: Report, kill: SelfKill, *, write_behind: bool
    ) -> None:
        self._inner = inner
        self._report = report
        self._kill = kill
        self._write_behind = write_behind
        self._pending: list[Event] = []

    async def append(self, event: Event) -> None:
        self._kill.passing("before-append")
        if self._write_behind:
            self._pending.append(event)
            if len(self._pending) >= WRITE_BEHIND_BATCH:
                for pending in self._pending:
                    await self._inner.append(pending)
                self._pending.clear()
        else:
            await self._inner.append(event)
        self._report(ack=event.event_id)
        self._kill.passing("after-append")

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        return self._inner.read_session(session_id)


async def _runtime_main(params: dict[str, Any], report: Report) -> None:
    kill = SelfKill(params.get("self_kill"), report)
    tool = mark_tool(params["marker"], kill.passing)
    async with SqliteSessionStore(params["db"], synchronous=params["synchronous"]) as store:
        await _open_session(store)
        port = _AckingEventStore(
            SqliteEventStore(store, SESSION, owner_id=OWNER),
            report,
            kill,
            write_behind=params.get("write_behind", False),
        )
        rounds, calls = params["rounds"], params["calls"]
        run = RunInput(
            run_id="run-crash",
            session_id=SESSION,
            turn_id="turn-crash",
            input="mark everything",
            model="fake-model/v1",
            model_adapter=FakeModel(scripted_turns(rounds, calls)),
            event_store=port,
            tools=ToolRegistry([tool]),
            budget=RuntimeBudget(max_steps=rounds + 2),
        )
        async with MinimalAgentRuntime().run(run) as stream:
            async for _ in stream:
                pass


class _AllowEverything:
    """A controller that allows every intent, so the legacy loop publishes ``policy.decision``."""

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        return PermissionDecision("allow", "crash harness allows every call", "crash.allow")


async def _legacy_main(params: dict[str, Any], report: Report) -> None:
    kill = SelfKill(params.get("self_kill"), report)
    tool = mark_tool(params["marker"], kill.passing)
    async with SqliteSessionStore(params["db"], synchronous=params["synchronous"]) as store:
        await _open_session(store)

        async def on_event(event: Event) -> None:
            kill.passing("before-append")
            await store.append(SESSION, event, owner_id=OWNER)
            report(ack=event.event_id)
            kill.passing("after-append")

        rounds, calls = params["rounds"], params["calls"]
        await run_agent(
            RunOptions(
                goal="mark everything",
                model=FakeModel(scripted_turns(rounds, calls)),
                tools=ToolRegistry([tool]),
                max_steps=rounds + 2,
                session_id=SESSION,
                on_event=on_event,
                permission=_AllowEverything(),
            )
        )


async def _migrate_main(params: dict[str, Any], report: Report) -> None:
    report(opening=time.monotonic())
    async with SqliteSessionStore(params["db"], synchronous=params["synchronous"]):
        report(migrated=time.monotonic())


def checkpoint_payload(revision: int, size: int) -> dict[str, object]:
    """A payload whose wholeness is checkable: its blob's digest and its own revision."""
    blob = (f"{revision}:" * (size // 4 + 1))[:size]
    return {"revision": revision, "blob": blob, "sha256": hashlib.sha256(blob.encode()).hexdigest()}


async def _checkpoint_main(params: dict[str, Any], report: Report) -> None:
    kill = SelfKill(params.get("self_kill"), report)
    sizes: list[int] = params["sizes"]
    async with SqliteSessionStore(params["db"], synchronous=params["synchronous"]) as store:
        current = await store.get_checkpoint(SESSION)
        revision = 0 if current is None else current.revision
        events = await store.size(SESSION)
        for size in sizes:
            after = min(revision, events - 1)
            saved = await store.save_checkpoint(
                SESSION,
                expected_revision=revision,
                after_seq=after,
                payload=checkpoint_payload(revision + 1, size),
            )
            revision = saved.revision
            report(checkpoint=revision)
            kill.passing("after-checkpoint")


def _in_trio(main: Callable[[dict[str, Any], Report], Any]) -> Callable[[dict[str, Any], Report], None]:
    def workload(params: dict[str, Any], report: Report) -> None:
        trio.run(main, params, report)

    return workload


WORKLOADS: Final = {
    "runtime": _in_trio(_runtime_main),
    "legacy": _in_trio(_legacy_main),
    "migrate": _in_trio(_migrate_main),
    "checkpoint": _in_trio(_checkpoint_main),
}
