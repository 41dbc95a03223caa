"""Benchmark: LocalWorkspace read_file/write_file through the dispatcher vs plain ``open()``.

Run with ``uv run python benchmarks/local_workspace.py``. Prints µs per operation and the
ratios for 1 KiB and 1 MiB files. ``write_file`` is atomic and durable (temporary file,
fsync, rename, fsync of the directory), so it is also compared with the same sequence done
by hand; plain ``open().write()`` does none of that.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Awaitable, Callable

import trio

from harness_workspace import Workspace, bind_workspace, invoke_workspace_operation
from harness_workspace.local import LocalWorkspace

SIZES = {"1 KiB": 1024, "1 MiB": 1024 * 1024}


async def timed_async(function: Callable[[], Awaitable[object]], repeat: int) -> float:
    await function()
    started = time.perf_counter()
    for _ in range(repeat):
        await function()
    return (time.perf_counter() - started) / repeat * 1e6


def timed(function: Callable[[], object], repeat: int) -> float:
    function()
    started = time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.perf_counter() - started) / repeat * 1e6


def plain_read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def plain_write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def plain_atomic_write(directory: str, name: str, text: str) -> None:
    temporary = os.path.join(directory, f".{name}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(temporary, os.path.join(directory, name))
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        for resolver in ("openat2", "walk"):
            adapter = LocalWorkspace(directory, resolver=resolver)
            ws = bind_workspace(adapter)
            print(f"resolver={resolver}")
            print(f"{'operation':<28}{'size':>7}{'local µs':>12}{'plain µs':>12}{'ratio':>8}")
            for label, size in SIZES.items():
                text = "x" * size
                name = f"file-{size}.txt"
                path = os.path.join(directory, name)
                plain_write(path, text)
                repeat = 2000 if size < 65536 else 200
                write_repeat = 200 if size < 65536 else 50

                async def read(name: str = name, ws: Workspace = ws) -> object:
                    return await invoke_workspace_operation(ws, {"operation": "read_file", "path": name})

                async def write(name: str = name, text: str = text, ws: Workspace = ws) -> object:
                    return await invoke_workspace_operation(
                        ws, {"operation": "write_file", "path": name, "contents": text}
                    )

                local_read = await timed_async(read, repeat)
                open_read = timed(lambda path=path: plain_read(path), repeat)
                local_write = await timed_async(write, write_repeat)
                open_write = timed(lambda path=path, text=text: plain_write(path, text), write_repeat)
                atomic_write = timed(
                    lambda name=name, text=text: plain_atomic_write(directory, name, text), write_repeat
                )
                rows = [
                    ("read_file vs open().read()", local_read, open_read),
                    ("write_file vs open().write()", local_write, open_write),
                    ("write_file vs atomic by hand", local_write, atomic_write),
                ]
                for operation, local_us, plain_us in rows:
                    ratio = local_us / plain_us
                    print(f"{operation:<28}{label:>7}{local_us:>12.1f}{plain_us:>12.1f}{ratio:>8.2f}")
            await adapter.dispose()


if __name__ == "__main__":
    trio.run(main)
