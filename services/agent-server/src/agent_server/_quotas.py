"""Per-principal quotas and the retention of finished sessions (decisions 007, 008, 058).

A principal may hold at most ``max_sessions_per_principal`` live sessions (by default its
fair share: ``max_sessions`` divided among the configured principals), so one token cannot
take every server-wide slot. With ``max_stored_bytes_per_principal`` it may keep at most that
many bytes of events in the store, across its sessions, live and finished: the server counts
each event's serialized size as it records it, and measures what the store already holds
once, at start-up, so no append pays for a scan. Retention deletes finished sessions closed
longer ago than ``retention_days`` and, with ``retention_max_bytes``, the oldest finished
sessions until the finished ones fit in that many bytes; live sessions are never deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from agent_server._config import ServerConfig
from agent_server._errors import PrincipalQuotaError
from harness_kernel.events import serialize_event
from harness_kernel.store import SessionStore

__all__ = ["PrincipalQuotas", "apply_retention"]

_log: Final = logging.getLogger("agent_server")

RETENTION_BATCH: Final = 100
_MEASURE_PAGE: Final = 500


@dataclass(eq=False, slots=True)
class PrincipalQuotas:
    """Live sessions and stored event bytes per principal, and each stored session's size.

    Args:
        max_sessions: Live sessions one principal may hold.
        max_stored_bytes: Event bytes one principal may keep in the store; ``None``: no limit.
        counting: Whether stored bytes are counted at all (a byte quota or a retention by
            size needs them); without, :meth:`record` keeps nothing.
    """

    max_sessions: int
    max_stored_bytes: int | None
    counting: bool = True
    live: dict[str, int] = field(default_factory=dict[str, int])
    stored: dict[str, int] = field(default_factory=dict[str, int])
    sizes: dict[str, tuple[str, int]] = field(default_factory=dict[str, tuple[str, int]])
    """Session id → (its principal, its stored event bytes)."""

    @classmethod
    def of(cls, config: ServerConfig) -> PrincipalQuotas:
        """The quotas ``config`` sets (the session quota's fair share among its principals)."""
        quota = config.limits.max_sessions_per_principal
        if quota is None:
            tokens = config.network.configured_tokens()
            quota = max(1, config.limits.max_sessions // (1 if tokens is None else len(tokens)))
        limit = config.limits.max_stored_bytes_per_principal
        counting = limit is not None or config.storage.retention_max_bytes is not None
        return cls(max_sessions=quota, max_stored_bytes=limit, counting=counting)

    def reserve(self, principal: str) -> None:
        """Count one more live session of ``principal``, synchronously.

        Raises:
            AcpError: ``-32024`` when it already holds ``max_sessions``.
        """
        held = self.live.get(principal, 0)
        if held >= self.max_sessions:
            raise PrincipalQuotaError(
                f"this principal holds its quota of {self.max_sessions} live sessions; close one first"
            )
        self.live[principal] = held + 1

    def release(self, principal: str) -> None:
        """Give back a session counted by :meth:`reserve`."""
        held = self.live.get(principal, 0) - 1
        if held > 0:
            self.live[principal] = held
        else:
            self.live.pop(principal, None)

    def check_stored(self, principal: str) -> None:
        """Refuse new work of a principal whose stored events fill its byte quota.

        Raises:
            AcpError: ``-32024`` when it keeps ``max_stored_bytes`` or more.
        """
        limit = self.max_stored_bytes
        if limit is not None and self.stored.get(principal, 0) >= limit:
            raise PrincipalQuotaError(
                f"this principal's sessions keep {self.stored[principal]} bytes of events, its"
                f" quota is {limit}; finished sessions are freed by the retention policy"
            )

    def record(self, session_id: str, principal: str, size: int) -> None:
        """Add ``size`` stored bytes to ``session_id``, counted for the principal it was first
        recorded for (a session taken up by the server itself stays its creator's)."""
        if not self.counting:
            return
        owner, held = self.sizes.get(session_id, (principal, 0))
        self.sizes[session_id] = (owner, held + size)
        self.stored[owner] = self.stored.get(owner, 0) + size

    def forget(self, session_ids: Iterable[str]) -> None:
        """Deleted sessions: their bytes no longer count."""
        for session_id in session_ids:
            entry = self.sizes.pop(session_id, None)
            if entry is not None:
                owner, size = entry
                left = self.stored.get(owner, 0) - size
                if left > 0:
                    self.stored[owner] = left
                else:
                    self.stored.pop(owner, None)

    async def measure(self, store: SessionStore) -> None:
        """Count what the store already holds: every session's events, read once at start-up.

        A session without a ``principal`` in its metadata (not this server's) counts for
        nobody's quota but still has a size for the retention by size.
        """
        for listing in await store.list():
            record = listing.record
            principal = record.metadata.get("principal")
            size = 0
            after = -1
            while True:
                page = await store.read(record.session_id, after_seq=after, limit=_MEASURE_PAGE)
                size += sum(len(serialize_event(item.event)) for item in page.events)
                after = page.next_after_seq
                if not page.has_more:
                    break
            owner = principal if type(principal) is str else ""
            self.record(record.session_id, owner, size)


async def apply_retention(
    store: SessionStore,
    quotas: PrincipalQuotas,
    *,
    max_age_days: int | None,
    max_bytes: int | None,
) -> tuple[str, ...]:
    """Delete finished sessions by age, then by size; the ids deleted, oldest first.

    By age: every session closed before ``now - max_age_days``. By size: while the finished
    sessions keep more than ``max_bytes`` of events, the oldest closed ones (a session closed
    at the same instant as the newest one deleted goes with it). Deletions run in batches,
    so appends get the store's writer in between. Live sessions are never deleted.
    """
    deleted: list[str] = []
    if max_age_days is not None:
        cutoff = await store.current_time() - timedelta(days=max_age_days)
        deleted += await _delete_closed_before(store, quotas, cutoff)
    if max_bytes is not None:
        cutoff = await _size_cutoff(store, quotas, max_bytes)
        if cutoff is not None:
            deleted += await _delete_closed_before(store, quotas, cutoff)
    return tuple(deleted)


async def _delete_closed_before(store: SessionStore, quotas: PrincipalQuotas, cutoff: datetime) -> list[str]:
    deleted: list[str] = []
    while True:
        batch = await store.delete_closed(closed_before=cutoff, limit=RETENTION_BATCH)
        quotas.forget(batch)
        deleted += batch
        if len(batch) < RETENTION_BATCH:
            return deleted


async def _size_cutoff(store: SessionStore, quotas: PrincipalQuotas, max_bytes: int) -> datetime | None:
    """Just after the close of the newest finished session that no longer fits, or ``None``."""
    finished: list[tuple[datetime, str]] = []
    for listing in await store.list():
        record = listing.record
        if record.status == "active" or record.closed_at is None:
            continue
        try:
            closed = datetime.fromisoformat(record.closed_at)
        except ValueError:
            continue  # a time the store cannot compare is never deleted (as delete_closed keeps it)
        if closed.tzinfo is not None:
            finished.append((closed, record.session_id))
    kept = 0
    for closed, session_id in sorted(finished, reverse=True):
        kept += quotas.sizes.get(session_id, ("", 0))[1]
        if kept > max_bytes:
            return closed + timedelta(milliseconds=1)  # stored times are kept to the millisecond
    return None
