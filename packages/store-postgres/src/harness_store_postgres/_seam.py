"""The kernel's store seam: the one module here that imports the kernel's private store modules.

``TransactionalStore`` (argument checks in the calling task, then one transaction), the
``Tables`` protocol every rule of ``_operations`` is written over, the rows' column order,
``ConnectionThread`` (a long-lived connection thread fed by a queue, decision 046) and
``ThreadedStore`` (the open/close life of a store on such threads).
They are private to harness-kernel, so this distribution pins one kernel minor series
(decision 049); should they become a public seam, only this file changes.
"""

from __future__ import annotations

from harness_kernel.store._rows import CHECKPOINT_COLUMNS, EVENT_COLUMNS, SESSION_COLUMNS
from harness_kernel.store._tables import EventColumns, Row, Tables
from harness_kernel.store._threaded import ThreadedStore
from harness_kernel.store._transactional import TransactionalStore
from harness_kernel.store._worker import ConnectionThread, Job, Outcome, hand_out

__all__ = [
    "CHECKPOINT_COLUMNS",
    "EVENT_COLUMNS",
    "SESSION_COLUMNS",
    "ConnectionThread",
    "EventColumns",
    "Job",
    "Outcome",
    "Row",
    "Tables",
    "ThreadedStore",
    "TransactionalStore",
    "hand_out",
]
