"""The store's free-space check reads the disk at most once per moment (issue #21).

``check_storage`` used to cost a worker-thread round trip on every ``session/new`` and
``session/prompt``; under load that was a tenth of the server's time. One reading now serves
every check for ``FREE_SPACE_TTL_SECONDS``, and concurrent checks share a reading.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest
import trio
import trio.testing

from agent_server import NetworkConfig, ServerConfig, StorageConfig, WorkspaceConfig
from agent_server._errors import StorageFullError
from agent_server._state import FREE_SPACE_TTL_SECONDS, ServerState
from harness_kernel.store import MemorySessionStore


class Usage(NamedTuple):
    total: int
    used: int
    free: int


class Disk:
    """A stand-in for ``shutil.disk_usage`` that counts its readings."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.readings = 0

    def __call__(self, path: str) -> Usage:
        self.readings += 1
        return Usage(total=self.free * 2, used=self.free, free=self.free)


def _state(tmp_path: Path, floor: int) -> ServerState:
    config = ServerConfig(
        network=NetworkConfig(port=0),
        storage=StorageConfig(min_free_disk_bytes=floor),
        workspace=WorkspaceConfig(workspace_root=str(tmp_path)),
    )
    return ServerState(
        config=config, root=str(tmp_path), store=MemorySessionStore(), storage_directory=str(tmp_path)
    )


async def test_one_reading_serves_every_check_for_a_moment_then_the_disk_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    disk = Disk(free=10_000)
    monkeypatch.setattr(shutil, "disk_usage", disk)
    state = _state(tmp_path, floor=1_000)
    for _ in range(20):
        await state.check_storage()
    assert disk.readings == 1
    await trio.sleep(FREE_SPACE_TTL_SECONDS)
    disk.free = 10
    with pytest.raises(StorageFullError):
        await state.check_storage()
    assert disk.readings == 2


async def test_concurrent_checks_share_one_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = Disk(free=10)
    monkeypatch.setattr(shutil, "disk_usage", disk)
    state = _state(tmp_path, floor=1_000)
    refused = 0

    async def check() -> None:
        nonlocal refused
        try:
            await state.check_storage()
        except StorageFullError:
            refused += 1

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(check)
    assert (disk.readings, refused) == (1, 50)


async def test_an_unreadable_disk_is_logged_and_not_refused_then_read_again_later(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = 0

    def broken(path: str) -> Usage:
        nonlocal calls
        calls += 1
        raise OSError("no such device")

    monkeypatch.setattr(shutil, "disk_usage", broken)
    state = _state(tmp_path, floor=1_000)
    await state.check_storage()
    await state.check_storage()
    assert calls == 1
    assert "checking free space" in caplog.text
    await trio.sleep(FREE_SPACE_TTL_SECONDS)
    await state.check_storage()
    assert calls == 2
