"""``--flame PATH``: a py-spy flame graph (SVG) of the levels' server subprocess.

py-spy samples every thread of the server, the store's ``trio.to_thread`` workers included,
which cProfile (``--profile``) cannot see. It is not a dependency of the project: it is looked
up on ``PATH`` (``uv tool install py-spy`` puts it in ``~/.local/bin``), and it needs the right
to read another process's memory (root, or ``CAP_SYS_PTRACE``, or a permissive
``kernel.yama.ptrace_scope``).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import trio

SAMPLES_PER_SECOND: Final = 200
STOP_SECONDS: Final = 30.0
"""How long py-spy may take to write its graph once told to stop."""


def py_spy() -> str | None:
    """The ``py-spy`` executable on ``PATH``, if there is one."""
    return shutil.which("py-spy")


@asynccontextmanager
async def flame_graph(pid: int, path: str, directory: Path) -> AsyncGenerator[None]:
    """Sample process ``pid`` with py-spy while the block runs; then write the graph to ``path``.

    ``--nonblocking``: py-spy reads the server's memory without pausing it, so the sampling
    does not slow the server it measures (a sample may now and then be torn). py-spy's own
    output goes to ``py-spy.log`` under ``directory``; the outcome is printed, never a verdict.
    """
    executable = py_spy()
    assert executable is not None  # the command line checked it
    log_path = directory / "py-spy.log"
    command = [executable, "record", "--pid", str(pid), "--output", path, "--format", "flamegraph"]
    command += ["--rate", str(SAMPLES_PER_SECOND), "--nonblocking"]
    with log_path.open("wb") as log:
        sampler = await trio.lowlevel.open_process(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            sampler.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
            with trio.move_on_after(STOP_SECONDS):
                await sampler.wait()
            if sampler.returncode is None:
                sampler.kill()
                await sampler.wait()
    written = await trio.Path(path).is_file() and sampler.returncode == 0
    log_text = await trio.Path(log_path).read_text(errors="replace")
    last = log_text.strip().splitlines()[-1:] or ["(no output)"]
    print(
        f"  flame graph {'written to ' + path if written else 'NOT written'}"
        f" (py-spy exit {sampler.returncode}: {last[0]})",
        flush=True,
    )
