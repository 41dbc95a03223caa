"""The PostgreSQL crash target's workload: the grandchild the zygote forks and SIGKILLs.

``appends`` opens a :class:`PostgresSessionStore`, creates its sessions and starts
``writers`` tasks that append concurrently (several per session, so the writer thread
group-commits batches of them); every fifth operation of a task is an ``append_many`` of
three events (all or none). Each operation is reported to the parent before it starts
(``begin=[event ids]``) and after it returned (``ack=[[event id, seq, global_seq], …]``).

Self-kill points (``params["self_kill"] = {"point": P, "count": N}``) SIGKILL the process the
N-th time it passes P: ``after-ack`` (after reporting an acknowledgement, with the other
tasks' appends in flight), ``before-commit`` (the writer thread is about to send ``COMMIT``
for a batch) and ``after-commit`` (``COMMIT`` returned, no caller of that batch answered
yet). The two commit points wrap ``psycopg.Connection.execute`` in this throwaway process
only; the store under test is unchanged. ``params["drop_every"] = N`` is the harness's
negative control: every N-th write ``COMMIT`` is sent as ``ROLLBACK``, so the store
acknowledges a batch it did not store, and the parent's checks must say so.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any, Final

import psycopg
import trio
from psycopg import sql

from harness_kernel.events import Event, create_event
from harness_store_postgres import PostgresSessionStore

__all__ = ["AT", "BATCH", "MANY_EVERY", "WORKLOADS", "Report", "crash_event", "operations", "session_of"]

AT: Final = "2024-05-01T12:30:00.125Z"
MANY_EVERY: Final = 5
"""Every fifth operation of a task is an ``append_many`` (index 4, 9, …)."""
BATCH: Final = 3
"""Events per ``append_many``."""
Report = Callable[..., None]


def session_of(prefix: str, writer: int, sessions: int) -> str:
    """The session writer ``writer`` appends to."""
    return f"{prefix}-s{writer % sessions}"


def crash_event(prefix: str, session_id: str, writer: int, index: int, part: int) -> Event:
    """The event a writer appends as (``index``, ``part``): rebuilt identically by the parent's retry."""
    return create_event(
        "message.delta",
        {
            "runId": f"{prefix}-run",
            "sessionId": session_id,
            "turnId": f"{prefix}-w{writer}",
            "requestId": f"{prefix}-w{writer}-r{index}",
            "messageId": f"{prefix}-w{writer}-m{index}",
            "role": "assistant",
            "sequence": index * BATCH + part,
            "delta": f"writer {writer} operation {index} part {part} " + "x" * (index % 7 * 40),
        },
        event_id=f"{prefix}-w{writer}-o{index}-p{part}",
        at=AT,
        actor="kernel",
    )


def operations(prefix: str, writer: int, sessions: int, count: int) -> list[tuple[str, list[Event]]]:
    """Writer ``writer``'s operations in order: (session id, its events: one, or ``BATCH``)."""
    session_id = session_of(prefix, writer, sessions)
    return [
        (
            session_id,
            [
                crash_event(prefix, session_id, writer, index, part)
                for part in range(BATCH if index % MANY_EVERY == MANY_EVERY - 1 else 1)
            ],
        )
        for index in range(count)
    ]


class _SelfKill:
    """SIGKILLs this process the ``count``-th time any thread passes ``point``."""

    def __init__(self, spec: dict[str, Any] | None, report: Report) -> None:
        self.point: str | None = None if spec is None else spec["point"]
        self._left = 0 if spec is None else int(spec["count"])
        self._report = report
        self._lock = threading.Lock()
        self.passed: dict[str, int] = {}

    def passing(self, point: str) -> None:
        with self._lock:
            self.passed[point] = self.passed.get(point, 0) + 1
            if point != self.point:
                return
            self._left -= 1
            if self._left == 0:
                self._report(self_killed=point)
                os.kill(os.getpid(), signal.SIGKILL)


def _watch_commits(kill: _SelfKill, drop_every: int | None) -> threading.Event:
    """Pass ``before-commit``/``after-commit`` around each write transaction's ``COMMIT``.

    A write transaction is recognised by its first statement, the ``harness_meta`` row lock
    (decision 049); a reader's ``COMMIT`` passes no point. With ``drop_every`` every such
    ``COMMIT`` whose count it divides is sent as ``ROLLBACK`` (the negative control),
    counted only once the returned event is set (after the sessions were created).
    """
    original: Callable[..., Any] = psycopg.Connection.execute
    writing: set[int] = set()
    commits = [0]
    armed = threading.Event()

    def execute(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        # A write ends with "COMMIT" alone or with the global sequence's update before it.
        text = query if isinstance(query, str) else ""
        if isinstance(query, sql.Composable):
            text = query.as_string(self)
        committing = text.endswith("COMMIT") and id(self) in writing
        if committing:
            writing.discard(id(self))
            kill.passing("before-commit")
            commits[0] += armed.is_set()
            if drop_every is not None and armed.is_set() and commits[0] % drop_every == 0:
                query = text.removesuffix("COMMIT") + "ROLLBACK"
        elif "harness_meta" in text and text.endswith("FOR UPDATE"):
            writing.add(id(self))
        cursor = original(self, query, *args, **kwargs)
        if committing:
            kill.passing("after-commit")
        return cursor

    setattr(psycopg.Connection, "execute", execute)  # noqa: B010 - this process only, by design
    return armed


async def _appends_main(params: dict[str, Any], report: Report) -> None:
    kill = _SelfKill(params.get("self_kill"), report)
    sessions_created = _watch_commits(kill, params.get("drop_every"))
    prefix: str = params["prefix"]
    sessions: int = params["sessions"]
    async with PostgresSessionStore(params["conninfo"], readers=1) as store:
        for number in range(sessions):
            await store.create(f"{prefix}-s{number}")
        sessions_created.set()

        async def writer(number: int) -> None:
            for session_id, events in operations(prefix, number, sessions, params["operations"]):
                report(begin=[event.event_id for event in events])
                if len(events) == 1:
                    stored = (await store.append(session_id, events[0]),)
                else:
                    stored = await store.append_many(session_id, events)
                report(ack=[[item.event.event_id, item.seq, item.global_seq] for item in stored])
                kill.passing("after-ack")

        async with trio.open_nursery() as nursery:
            for number in range(params["writers"]):
                nursery.start_soon(writer, number)
    report(passed=kill.passed)


def _appends(params: dict[str, Any], report: Report) -> None:
    trio.run(_appends_main, params, report)


WORKLOADS: Final = {"appends": _appends}
