"""Race tests: paths inside the root are swapped for symlinks to the outside while operations run.

An *escape* is any content of the outside directory returned, any outside name listed, or
any file created or changed outside. The attempt counts are recorded in ``RACE_ATTEMPTS``
and printed (run with ``-s`` to see them); together the tests make at least
``MIN_TOTAL_ATTEMPTS`` attempts.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import trio

from harness_workspace.local import LocalWorkspace, LocalWorkspaceError, ResolverChoice

MIN_TOTAL_ATTEMPTS = 10_000
DIRECTORY_SWAP_ATTEMPTS = 3_000  # per resolver: reads, writes and listings
FILE_SWAP_ATTEMPTS = 2_500  # per resolver: reads and writes
RACE_ATTEMPTS: dict[str, int] = {}
RACE_ESCAPES: dict[str, int] = {}
INSIDE = "INSIDE-CONTENT"
OUTSIDE = "OUTSIDE-SECRET"


def digest(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


class Swapper:
    """A thread that keeps replacing ``entry`` by a symlink to the outside and back."""

    def __init__(self, step: Callable[[int], None]) -> None:
        self._step = step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.swaps = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self._step(self.swaps)
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> ResolverChoice:
    return request.param


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text(OUTSIDE)
    (outside / "outside_only").write_text(OUTSIDE)
    root = tmp_path / "root"
    root.mkdir()
    before = digest(outside)
    yield root, outside
    assert digest(outside) == before, "ESCAPE: the outside directory changed"


def record(name: str, attempts: int, escapes: int) -> None:
    RACE_ATTEMPTS[name] = attempts
    RACE_ESCAPES[name] = escapes
    print(f"\n{name}: {attempts} attempts, {escapes} escapes, total so far {sum(RACE_ATTEMPTS.values())}")


async def run_split(total: int, workers: dict[str, Callable[[int], Awaitable[None]]]) -> None:
    """Run ``total`` attempts, spread over the workers, each worker in its own task."""
    share = total // len(workers)

    async def loop(worker: Callable[[int], Awaitable[None]]) -> None:
        for index in range(share):
            await worker(index)

    async with trio.open_nursery() as nursery:
        for worker in workers.values():
            nursery.start_soon(loop, worker)


async def test_swapping_a_directory_for_an_outside_symlink_never_leaks(
    layout: tuple[Path, Path], resolver: ResolverChoice
) -> None:
    root, outside = layout
    swap, parked = root / "swap", root / "parked"
    swap.mkdir()
    (swap / "f").write_text(INSIDE)
    targets = (str(outside), "../outside")

    def step(index: int) -> None:
        os.rename(swap, parked)
        os.symlink(targets[index % 2], root / "link.tmp")
        os.replace(root / "link.tmp", swap)  # the name now points outside
        os.unlink(swap)
        os.rename(parked, swap)

    ws = LocalWorkspace(root, resolver=resolver)
    attempts = escapes = succeeded = 0

    async def read(_: int) -> None:
        nonlocal attempts, escapes, succeeded
        attempts += 1
        try:
            text = await ws.read_file("swap/f")
        except LocalWorkspaceError:
            return
        succeeded += 1
        escapes += text != INSIDE

    async def write(index: int) -> None:
        nonlocal attempts, succeeded
        attempts += 1
        try:
            await ws.write_file(f"swap/new-{index % 7}", "written")
        except LocalWorkspaceError:
            return
        succeeded += 1

    async def listing(index: int) -> None:
        nonlocal attempts, escapes, succeeded
        attempts += 1
        try:
            names = await ws.list_files("swap" if index % 2 else "")
        except LocalWorkspaceError:
            return
        succeeded += 1
        escapes += any(name.endswith("outside_only") for name in names)

    try:
        with Swapper(step) as swapper:
            await run_split(DIRECTORY_SWAP_ATTEMPTS, {"read": read, "write": write, "list": listing})
    finally:
        await ws.dispose()
    escapes += sorted(os.listdir(outside)) != ["f", "outside_only"]
    record(f"directory swap [{resolver}]", attempts, escapes)
    assert swapper.swaps > 0
    assert succeeded > 0
    assert attempts >= DIRECTORY_SWAP_ATTEMPTS - 2
    assert escapes == 0


async def test_swapping_a_file_for_an_outside_symlink_never_leaks(
    layout: tuple[Path, Path], resolver: ResolverChoice
) -> None:
    root, outside = layout
    (root / "dir").mkdir()
    target = root / "dir" / "f"
    target.write_text(INSIDE)

    def step(index: int) -> None:
        if index % 2:
            (root / "dir" / "file.tmp").write_text(INSIDE)
            os.replace(root / "dir" / "file.tmp", target)
        else:
            os.symlink(outside / "f" if index % 4 else "../../outside/f", root / "dir" / "link.tmp")
            os.replace(root / "dir" / "link.tmp", target)

    ws = LocalWorkspace(root, resolver=resolver)
    attempts = escapes = succeeded = 0

    async def read(_: int) -> None:
        nonlocal attempts, escapes, succeeded
        attempts += 1
        try:
            text = await ws.read_file("dir/f")
        except LocalWorkspaceError:
            return
        succeeded += 1
        escapes += text not in (INSIDE, "written")

    async def write(_: int) -> None:
        nonlocal attempts, succeeded
        attempts += 1
        try:
            await ws.write_file("dir/f", "written")
        except LocalWorkspaceError:
            return
        succeeded += 1

    try:
        with Swapper(step) as swapper:
            await run_split(FILE_SWAP_ATTEMPTS, {"read": read, "write": write})
    finally:
        await ws.dispose()
    escapes += (outside / "f").read_text() != OUTSIDE
    record(f"file swap [{resolver}]", attempts, escapes)
    assert swapper.swaps > 0
    assert succeeded > 0
    assert attempts >= FILE_SWAP_ATTEMPTS - 1
    assert escapes == 0


def test_the_race_tests_make_enough_attempts_in_total() -> None:
    # Static: 2 resolvers x (directory swap + file swap).
    assert 2 * (DIRECTORY_SWAP_ATTEMPTS + FILE_SWAP_ATTEMPTS) >= MIN_TOTAL_ATTEMPTS
