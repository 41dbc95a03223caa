"""What every connection of one server shares: configuration, root, store and session slots."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

import trio

from agent_server._config import ServerConfig, ServerHooks
from agent_server._errors import ServerSessionLimitError, StorageFullError
from agent_server._quotas import PrincipalQuotas
from harness_kernel.store import SessionStore

__all__ = ["FREE_SPACE_TTL_SECONDS", "ServerState"]

_log: Final = logging.getLogger("agent_server")

FREE_SPACE_TTL_SECONDS: Final = 0.5
"""How long one reading of the store's free disk space serves ``check_storage``."""


@dataclass(eq=False, slots=True)
class ServerState:
    """What every connection shares: configuration, root, store, session ids and session slots.

    ``live_sessions`` counts sessions from admission at ``session/new`` until they finish,
    server-wide; ``storage_directory`` is the folder of the store's file, whose free space is
    checked before a session is created or prompted. ``quotas`` counts live sessions and
    stored event bytes per principal (decision 058).
    """

    config: ServerConfig
    root: str
    store: SessionStore
    hooks: ServerHooks = field(default_factory=ServerHooks)
    persistent: bool = True
    storage_directory: str | None = None
    active_session_ids: set[str] = field(default_factory=set[str])
    live_sessions: int = 0
    quotas: PrincipalQuotas = field(init=False)
    _free_bytes: int | None = None
    _free_read_at: float | None = None
    _free_reading: trio.Event | None = None

    def __post_init__(self) -> None:
        self.quotas = PrincipalQuotas.of(self.config)

    async def clock(self) -> datetime:
        """The store clock, which also judges the sessions' leases."""
        return await self.store.current_time()

    def reserve_session(self) -> None:
        """Take one server-wide session slot, synchronously (so pipelined requests cannot overrun it).

        Raises:
            AcpError: ``-32014`` when ``max_sessions`` sessions are live.
        """
        if self.live_sessions >= self.config.limits.max_sessions:
            raise ServerSessionLimitError()
        self.live_sessions += 1

    def release_session(self) -> None:
        """Give back a slot taken by :meth:`reserve_session`."""
        self.live_sessions -= 1

    async def check_storage(self) -> None:
        """Refuse new work while the store's file system has less than ``min_free_disk_bytes`` free.

        Raises:
            AcpError: ``-32015`` when the disk is too full.
        """
        directory = self.storage_directory
        floor = self.config.storage.min_free_disk_bytes
        if directory is None or floor == 0:
            return
        free = await self._free_space(directory)
        if free is not None and free < floor:
            _log.warning("refusing new work: %d bytes free in %s, below %d", free, directory, floor)
            raise StorageFullError()

    async def _free_space(self, directory: str) -> int | None:
        """Free bytes in ``directory``, read at most once per :data:`FREE_SPACE_TTL_SECONDS`.

        Reading it costs a worker-thread round trip, which dominated ``session/new`` under
        load; one reading serves every check for a moment, and checks that arrive while a
        reading is under way share it. ``None`` when it cannot be read (logged; not refused).
        """
        now = trio.current_time()
        if self._free_read_at is not None and now - self._free_read_at < FREE_SPACE_TTL_SECONDS:
            return self._free_bytes
        if self._free_reading is not None:
            await self._free_reading.wait()
            return self._free_bytes
        reading = self._free_reading = trio.Event()
        try:
            self._free_bytes = (await trio.to_thread.run_sync(shutil.disk_usage, directory)).free
        except OSError:
            _log.exception("checking free space in %s failed", directory)
            self._free_bytes = None
        finally:
            self._free_read_at = trio.current_time()
            self._free_reading = None
            reading.set()
        return self._free_bytes
