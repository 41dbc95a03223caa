"""The store backend interface: what a ``SessionStore`` on another database builds on.

Every rule of the session store (spec §6.3: ids, sequence numbers, leases, transitions,
checkpoints, retention) is written once in the kernel, over :class:`Tables` — the reads and
writes of one transaction. A backend supplies only that: how each primitive reads or writes
its tables, inside a transaction it opens and commits. The SQLite store is built exactly so,
and harness-store-postgres is too.

* :class:`Tables` — the primitives; rows are tuples (:data:`Row`) in the column order
  :data:`COLUMNS` names (``COLUMNS.session``, ``COLUMNS.checkpoint``, ``COLUMNS.event``); an
  event to insert is an :data:`EventColumns` tuple.
* :class:`ThreadedStore` — the whole ``SessionStore`` (arguments checked in the calling
  task, then one transaction per operation), for a backend whose connections live on their
  own threads. A subclass implements ``_start()`` (open the connections and start their
  threads; it returns an object with a blocking ``stop()``) and ``_transact(work, *,
  write)`` (run ``work(tables)`` in one transaction on the right thread, after ``await
  self._running()``); the store opens on first use and ``aclose`` stops the threads after
  what was queued.
* :class:`ConnectionThread` — one long-lived thread that owns one connection and runs the
  jobs trio tasks hand it (grouped, for a writer that commits many at once). Its
  ``run_jobs(connection, jobs)`` function calls each :class:`Job`'s ``work(tables)`` and
  records the outcome with ``succeed``/``fail``, or, in a group transaction, keeps
  ``job.settlement(ok, value)`` and calls it only once the transaction committed. A task
  cancelled before its job was taken withdraws it; a taken job always finishes.

A backend passes :mod:`harness_kernel.store.conformance`. This interface follows the
kernel's versioning: a breaking change to it raises the kernel's minor version and is named
in the kernel's changelog, so a backend states the kernel's minor line as its range.
"""

from __future__ import annotations

from harness_kernel.store._tables import COLUMNS, EventColumns, Row, Tables
from harness_kernel.store._threaded import ThreadedStore
from harness_kernel.store._worker import ConnectionThread, Job

__all__ = ["COLUMNS", "ConnectionThread", "EventColumns", "Job", "Row", "Tables", "ThreadedStore"]
