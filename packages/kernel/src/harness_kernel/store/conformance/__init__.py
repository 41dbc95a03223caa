"""The ``SessionStore`` conformance suite: what any session store must do, as runnable checks.

Every implementation of :class:`harness_kernel.store.SessionStore` — the two in this
package and any other distribution's — runs the same checks, so all of them agree on
sequences, idempotent appends, leases and their expiry, pages, metadata, transitions,
checkpoints, recovery, reopening, retention, closing, and every ``SESS_*`` code (each refusal leaving
the store unchanged). ``SESS_SCHEMA_VERSION`` is raised only while opening a persistent
store, so it is left to each store's own tests.

A check is a coroutine function taking a *store factory*: a callable that, given a clock
(a callable returning an aware ``datetime``), returns a new, empty, unopened store using it
as its store clock. Checks run under trio. This module imports neither pytest nor
hypothesis; with pytest (and pytest-trio) a distribution runs the suite like this::

    import itertools

    import pytest

    from harness_kernel.store.conformance import CHECKS, ConformanceCheck

    @pytest.mark.parametrize("check", CHECKS, ids=str)
    async def test_my_store_conforms(check: ConformanceCheck, tmp_path) -> None:
        names = itertools.count()
        await check.run(lambda now: MyStore(tmp_path / f"{next(names)}.db", now=now))

or, outside pytest, ``await run_conformance(factory)`` runs every check in turn.
"""

from __future__ import annotations

from typing import Final

from harness_kernel.store.conformance import _events, _leases, _lifecycle, _refusals, _reopen, _sessions
from harness_kernel.store.conformance._support import (
    START,
    ConformanceCheck,
    ManualClock,
    StoreFactory,
)

__all__ = ["CHECKS", "START", "ConformanceCheck", "ManualClock", "StoreFactory", "run_conformance"]

CHECKS: Final[tuple[ConformanceCheck, ...]] = (
    *_sessions.CHECKS,
    *_events.CHECKS,
    *_leases.CHECKS,
    *_lifecycle.CHECKS,
    *_reopen.CHECKS,
    *_refusals.CHECKS,
)
"""Every check of the suite, in a stable order; their names are unique."""


async def run_conformance(open_store: StoreFactory) -> None:
    """Run every check against stores made by ``open_store``, in order.

    Args:
        open_store: Returns a new, empty, unopened store whose store clock is the given
            callable.

    Raises:
        AssertionError: The first check the store fails, naming it; the failure is chained.
    """
    for check in CHECKS:
        try:
            await check.run(open_store)
        except Exception as error:
            raise AssertionError(f"conformance check {check.name!r} failed: {error}") from error
