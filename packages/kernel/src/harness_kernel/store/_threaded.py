"""``ThreadedStore``: the open/close life of a store whose connections live on their own threads.

The SQLite store and harness-store-postgres both open lazily (first operation or ``async
with``), start their connection threads once under a lock, and on :meth:`ThreadedStore.aclose`
let what was queued finish before the threads end. That life is written here once; each store
says how its threads start (:meth:`ThreadedStore._start`) and which thread runs a transaction.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from datetime import datetime
from typing import Generic, Protocol, TypeVar

import trio

from harness_kernel.store._records import SESS_INVALID_RECORD, SessionStoreError
from harness_kernel.store._transactional import TransactionalStore

__all__ = ["ConnectionThreads", "ThreadedStore", "closed_store"]


class ConnectionThreads(Protocol):
    """An open store's threads: :meth:`stop` finishes what is queued and ends them (blocking)."""

    def stop(self) -> None: ...


_Threads = TypeVar("_Threads", bound=ConnectionThreads)


def closed_store() -> SessionStoreError:
    """The error of an operation on a closed store."""
    return SessionStoreError(SESS_INVALID_RECORD, "session store is closed")


class ThreadedStore(TransactionalStore, Generic[_Threads]):
    """A :class:`TransactionalStore` whose connections are owned by threads it starts on open."""

    def __init__(self, *, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(now=now)
        self._threads: _Threads | None = None
        self._opening = trio.Lock()
        self._closed = False

    @abc.abstractmethod
    def _start(self) -> _Threads:
        """Open the connections (creating or migrating the schema) and start their threads.

        Runs in a worker thread, never abandoned: what it opens is kept or closed, not leaked.
        """

    async def _open(self) -> None:
        await self._opened()

    async def aclose(self) -> None:
        """Close the store: operations already running finish, later ones raise ``SESS_INVALID_RECORD``.

        Writes queued before the close are committed (and their callers answered) first.
        """
        self._closed = True
        with trio.CancelScope(shield=True):
            # An open in progress finishes first; a second aclose waits for the first.
            async with self._opening:
                threads, self._threads = self._threads, None
                if threads is not None:
                    await trio.to_thread.run_sync(threads.stop)

    async def _opened(self) -> _Threads:
        if self._closed:
            raise closed_store()
        threads = self._threads
        if threads is None:
            async with self._opening:
                if self._closed:
                    raise closed_store()
                if self._threads is None:
                    # Not abandoned on cancellation: the connections it opens are always kept
                    # (or closed), never leaked; the cancellation lands at the next checkpoint.
                    self._threads = await trio.to_thread.run_sync(self._start, abandon_on_cancel=False)
                threads = self._threads
        return threads

    async def _running(self) -> _Threads:
        """The open threads for one transaction (opening them first), unless the store closed."""
        threads = await self._opened()
        if self._closed:
            raise closed_store()
        return threads
