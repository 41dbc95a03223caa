"""What the sandbox benchmarks share: timing a coroutine, and loading the image build script."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType

BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "packages" / "sandbox" / "scripts" / "build_image.py"


async def samples_ms(
    function: Callable[[], Awaitable[object]], repeat: int, *, warmup: int = 3
) -> list[float]:
    """Milliseconds of ``repeat`` awaited calls of ``function``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        await function()
    samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        await function()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def load_build_script() -> ModuleType:
    """``packages/sandbox/scripts/build_image.py`` as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("harness_sandbox_build_image", BUILD_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
