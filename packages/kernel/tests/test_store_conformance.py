"""The shipped SessionStore conformance suite, run against both stores, and shown able to fail."""

from __future__ import annotations

import inspect
import itertools
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness_kernel._json import FrozenDict
from harness_kernel.store import (
    MemorySessionStore,
    SessionEventPage,
    SessionLease,
    SessionRecord,
    SessionStore,
    SqliteSessionStore,
)
from harness_kernel.store.conformance import CHECKS, ConformanceCheck, StoreFactory, run_conformance


def sqlite_factory(folder: Path) -> StoreFactory:
    names = itertools.count()
    return lambda now: SqliteSessionStore(folder / f"store-{next(names)}.db", now=now)


def memory_factory(_folder: Path) -> StoreFactory:
    return lambda now: MemorySessionStore(now=now)


FACTORIES: dict[str, Callable[[Path], StoreFactory]] = {"memory": memory_factory, "sqlite": sqlite_factory}


def test_check_names_are_unique_and_described() -> None:
    names = [check.name for check in CHECKS]
    assert len(names) == len(set(names)) >= 30
    assert all(check.description for check in CHECKS)


@pytest.mark.parametrize("kind", sorted(FACTORIES))
@pytest.mark.parametrize("check", CHECKS, ids=str)
async def test_both_stores_pass_every_conformance_check(
    check: ConformanceCheck, kind: str, tmp_path: Path
) -> None:
    await check.run(FACTORIES[kind](tmp_path))


async def test_run_conformance_runs_the_whole_suite_against_the_memory_store() -> None:
    await run_conformance(lambda now: MemorySessionStore(now=now))


# ---------------------------------------------------------------- the suite can fail


class RenewsExpiredLeases(MemorySessionStore):
    """Renews through a reopen, which also takes over a lease that already ran out."""

    async def renew_lease(self, session_id: str, owner_id: str, *, lease_ms: int) -> SessionLease:
        record = await self.create(session_id, owner_id=owner_id, lease_ms=lease_ms)
        assert record.lease is not None
        return record.lease


class CreatesBeforeChecking(MemorySessionStore):
    """Creates the session first and takes its lease in a second step: a bad lease_ms leaves a row."""

    async def create(
        self,
        session_id: str | None = None,
        *,
        task_id: str | None = None,
        created_at: str | None = None,
        metadata: Any = None,
        owner_id: str | None = None,
        lease_ms: int | None = None,
    ) -> SessionRecord:
        record = await super().create(session_id, task_id=task_id, created_at=created_at, metadata=metadata)
        if owner_id is None and lease_ms is None:
            return record
        return await super().create(record.session_id, owner_id=owner_id, lease_ms=lease_ms)


class NeverHasMore(MemorySessionStore):
    """Reports every page as the last one."""

    async def read(self, session_id: str, *, after_seq: int = -1, limit: int = 100) -> SessionEventPage:
        page = await super().read(session_id, after_seq=after_seq, limit=limit)
        return SessionEventPage(events=page.events, next_after_seq=page.next_after_seq, has_more=False)


async def _overwrite_lease(
    store: MemorySessionStore, record: SessionRecord, owner_id: str, lease_ms: int
) -> SessionRecord:
    """Write ``owner_id``'s lease over the session's through legacy metadata, which checks no lease."""
    expiry = (await store.current_time() + timedelta(milliseconds=lease_ms)).isoformat()
    lease = {"ownerId": owner_id, "leaseExpiresAt": expiry}
    return await store.set_metadata(record.session_id, {**record.metadata, **lease})


class ReopensOverLiveLeases(MemorySessionStore):
    """Reopens an active session by writing the new lease over whatever lease it holds."""

    async def reopen(
        self,
        session_id: str,
        *,
        owner_id: str,
        lease_ms: int,
        expected_metadata: dict[str, object] | FrozenDict | None = None,
    ) -> SessionRecord:
        record = await self.get(session_id)
        if record.status != "active":
            return await super().reopen(
                session_id, owner_id=owner_id, lease_ms=lease_ms, expected_metadata=expected_metadata
            )
        return await _overwrite_lease(self, record, owner_id, lease_ms)


class ReopensAfterLooking(MemorySessionStore):
    """Looks at the session in one transaction and reopens it in others: racing reopeners all win."""

    async def reopen(
        self,
        session_id: str,
        *,
        owner_id: str,
        lease_ms: int,
        expected_metadata: dict[str, object] | FrozenDict | None = None,
    ) -> SessionRecord:
        record = await self.get(session_id)
        if record.status != "closed":
            return await super().reopen(
                session_id, owner_id=owner_id, lease_ms=lease_ms, expected_metadata=expected_metadata
            )
        await self._transact(lambda tables: tables.reactivate_session(session_id), write=True)
        return await _overwrite_lease(self, record, owner_id, lease_ms)


MUTANTS: dict[str, tuple[type[MemorySessionStore], str]] = {
    "renews expired leases": (RenewsExpiredLeases, "renewal"),
    "creates before checking": (CreatesBeforeChecking, "lease_arguments"),
    "never has more": (NeverHasMore, "pages"),
    "reopens over live leases": (ReopensOverLiveLeases, "reopen_active"),
    "reopens after looking": (ReopensAfterLooking, "reopen_is_once"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
async def test_the_suite_catches_a_store_that_breaks_the_contract(mutant: str) -> None:
    store_class, check_name = MUTANTS[mutant]
    check = next(check for check in CHECKS if check.name == check_name)
    await check.run(lambda now: MemorySessionStore(now=now))  # the control passes
    with pytest.raises(AssertionError):
        await check.run(lambda now: store_class(now=now))
    with pytest.raises(AssertionError, match=r"^conformance check "):
        await run_conformance(lambda now: store_class(now=now))


# ---------------------------------------------------------------- one surface, two stores


def _methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") or name in ("__aenter__", "__aexit__")
    }


@pytest.mark.parametrize("store_class", [MemorySessionStore, SqliteSessionStore])
def test_each_store_has_exactly_the_protocol_signatures(store_class: type) -> None:
    protocol = _methods(SessionStore)
    implemented = _methods(store_class)
    extra = set(implemented) - set(protocol)
    assert extra <= {"path"}, extra
    for name, signature in protocol.items():
        assert str(implemented[name]) == str(signature), name


def test_both_stores_are_session_stores(tmp_path: Path) -> None:
    def clock() -> datetime:
        raise AssertionError("not read")

    stores: list[object] = [MemorySessionStore(now=clock), SqliteSessionStore(tmp_path / "s.db", now=clock)]
    assert all(isinstance(store, SessionStore) for store in stores)


def test_importing_the_store_or_its_suite_needs_neither_pytest_nor_hypothesis() -> None:
    probe = (
        "import sys\n"
        "import harness_kernel.store\n"
        "assert 'harness_kernel.store.conformance' not in sys.modules\n"
        "import harness_kernel.store.conformance\n"
        "loaded = sorted(m for m in ('pytest', 'hypothesis', '_pytest') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
