"""Running commands for the packaging stage: argument lists, loud failures, steps."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

Argument: TypeAlias = str | Path

# pip must see only what each command names: no user or site config, no inherited index.
_PIP_SETTINGS = {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
_INHERITED = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PYTHONPATH", "VIRTUAL_ENV")


class StageFailure(Exception):
    """A check of the packaging stage failed; the message says which and why."""


def step(title: str) -> None:
    """Print the heading of one step of the stage."""
    print(f"\n--> {title}", flush=True)


def isolate_pip_environment() -> None:
    """Set this process's environment so every pip it starts sees only the index a command names."""
    os.environ.update(_PIP_SETTINGS)
    for name in _INHERITED:
        os.environ.pop(name, None)


def uv(*arguments: Argument) -> list[Argument]:
    """``python3 -m uv ARGUMENTS``: uv as the README and ``.ci/run`` use it."""
    return [sys.executable, "-m", "uv", *arguments]


def venv_bin(venv: Path, program: str) -> Path:
    """The path of ``program`` in the venv at ``venv``."""
    return venv / "bin" / program


def make_venv(path: Path) -> Path:
    """A fresh ``python3 -m venv`` at ``path``; returns ``path``."""
    run([sys.executable, "-m", "venv", path])
    return path


def _argv(command: Sequence[Argument]) -> list[str]:
    return [str(part) for part in command]


def _describe(command: Sequence[Argument]) -> str:
    return " ".join(_argv(command))


def run(
    command: Sequence[Argument], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> None:
    """Run ``command`` with its output passed through.

    Raises:
        StageFailure: it exits non-zero (the message names the command and its status).
    """
    sys.stdout.flush()
    status = subprocess.run(_argv(command), cwd=cwd, env=env, check=False).returncode
    if status != 0:
        raise StageFailure(f"{_describe(command)} exited {status}")


def output_of(
    command: Sequence[Argument], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> str:
    """What ``command`` prints on its standard output (its standard error is passed through).

    Raises:
        StageFailure: it exits non-zero.
    """
    sys.stdout.flush()
    done = subprocess.run(_argv(command), cwd=cwd, env=env, check=False, stdout=subprocess.PIPE)
    if done.returncode != 0:
        raise StageFailure(f"{_describe(command)} exited {done.returncode}")
    return done.stdout.decode(errors="replace")


def run_logged(
    command: Sequence[Argument], log: Path, *, cwd: Path | None = None, errors_too: bool = False
) -> int:
    """Run ``command`` with its standard output written to ``log``; its exit status.

    With ``errors_too`` its standard error goes to ``log`` as well, else it is passed through.
    The caller decides what a non-zero status means (some commands here must fail).
    """
    sys.stdout.flush()
    errors = subprocess.STDOUT if errors_too else None
    with log.open("wb") as sink:
        return subprocess.run(_argv(command), cwd=cwd, stdout=sink, stderr=errors, check=False).returncode


def succeeds(command: Sequence[Argument], *, cwd: Path | None = None) -> bool:
    """Whether ``command`` exits 0, its output passed through (for commands that must fail)."""
    sys.stdout.flush()
    return subprocess.run(_argv(command), cwd=cwd, check=False).returncode == 0
