"""Step 5: examples/downstream-adapter against the *published* harness-workspace wheel.

The example is a separate project (no workspace member): it is copied out of the checkout,
its explicit index pointed at this run's pypiserver, resolved in a fresh venv with an empty
cache, and tested with pytest and pyright (strict).
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path
from typing import Final

from ._index import PrivateIndex
from ._shell import StageFailure, output_of, run, step, uv

_PLACEHOLDER: Final = 'url = "http://127.0.0.1:8080/simple/"'
# uv settings a developer's shell may carry that would point the example elsewhere.
_UV_INHERITED: Final = (
    "UV_INDEX",
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_PROJECT_ENVIRONMENT",
)


def _point_at_index(pyproject: Path, url: str) -> None:
    """Rewrite the copy's ``harness-private`` index URL to ``url``.

    uv has no per-index URL environment variable (``UV_INDEX_<NAME>_USERNAME``/``_PASSWORD``
    exist, a ``_URL`` does not), so the file itself is rewritten.
    """
    text = pyproject.read_text()
    if text.count(_PLACEHOLDER) != 1:
        raise StageFailure(f"{pyproject}: expected exactly one {_PLACEHOLDER!r}")
    text = text.replace(_PLACEHOLDER, f'url = "{url}"')
    uv_config = tomllib.loads(text)["tool"]["uv"]
    indexes = [entry for entry in uv_config["index"] if entry["name"] == "harness-private"]
    if indexes != [{"name": "harness-private", "url": url, "explicit": True}]:
        raise StageFailure(f"{pyproject}: the harness-private index reads {indexes}")
    if uv_config["sources"]["harness-workspace"] != {"index": "harness-private"}:
        raise StageFailure(f"{pyproject}: harness-workspace is not pinned to the harness-private index")
    pyproject.write_text(text)
    print(f"  harness-private -> {url} (explicit, pinned for harness-workspace)")


def _check_locked_from_index(lock: Path, url: str) -> None:
    """``uv.lock`` must take harness-workspace from the private index, not a path or editable."""
    packages = tomllib.loads(lock.read_text())["package"]
    (entry,) = [package for package in packages if package["name"] == "harness-workspace"]
    source = entry["source"]
    registry = str(source.get("registry", ""))
    if registry.rstrip("/") != url.rstrip("/") or "editable" in source or "path" in source:
        raise StageFailure(f"harness-workspace locked from {source}, not the private index")
    print(f"  locked harness-workspace {entry['version']} from {registry}")


def _check_imported_from_venv(example: Path, environment: dict[str, str]) -> None:
    probe = "import harness_workspace; print(harness_workspace.__file__)"
    command = uv("run", "--locked", "--no-sync", "python", "-c", probe)
    origin = Path(output_of(command, cwd=example, env=environment).strip()).resolve()
    if not origin.is_relative_to((example / ".venv").resolve()):
        raise StageFailure(f"harness_workspace imported from {origin}, not the example's .venv")
    print("  imported from", origin)


def _copy_example(repo: Path, work: Path) -> Path:
    """A copy of the example without a developer's ``.venv`` or ``uv.lock``: it resolves afresh."""
    source = repo / "examples" / "downstream-adapter"

    def left_out(folder: str, names: list[str]) -> list[str]:
        return [name for name in names if name in (".venv", "uv.lock")] if Path(folder) == source else []

    example = work / "downstream-adapter"
    shutil.copytree(source, example, ignore=left_out)
    return example


def check_downstream_example(repo: Path, work: Path, index: PrivateIndex) -> None:
    """Lock, sync, test and type-check a copy of the example against the private index.

    Raises:
        StageFailure: any of those fails, or harness-workspace comes from anywhere but the
            private index's published wheel.
    """
    step("examples/downstream-adapter: tests and pyright strict against the published wheel")
    example = _copy_example(repo, work)
    _point_at_index(example / "pyproject.toml", index.simple)
    environment = {name: value for name, value in os.environ.items() if name not in _UV_INHERITED}
    environment |= {"UV_CACHE_DIR": str(work / "uv-cache-example"), "UV_PYTHON_DOWNLOADS": "never"}
    try:
        run(uv("lock", "--quiet"), cwd=example, env=environment)
        run(uv("sync", "--locked", "--quiet"), cwd=example, env=environment)
        _check_locked_from_index(example / "uv.lock", index.simple)
        _check_imported_from_venv(example, environment)
        run(
            uv("run", "--locked", "--no-sync", "pytest", "-q", "-p", "no:cacheprovider"),
            cwd=example,
            env=environment,
        )
        run(uv("run", "--locked", "--no-sync", "pyright"), cwd=example, env=environment)
    except StageFailure as failure:
        raise StageFailure(f"examples/downstream-adapter against the published wheel: {failure}") from failure
