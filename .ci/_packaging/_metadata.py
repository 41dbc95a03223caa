"""Step 2: build every sdist and wheel, then read their metadata back and check it."""

from __future__ import annotations

import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path
from typing import Final

from ._distributions import Distribution
from ._shell import StageFailure, run, step, uv

_REQUIRED_FIELDS: Final = ("Name", "Version", "Summary", "Requires-Python", "Description-Content-Type")


def build_all(repo: Path, dist: Path) -> None:
    """``uv build --all-packages`` into ``dist``, then list what it built."""
    step("build every sdist and wheel")
    run(uv("build", "--all-packages", "--out-dir", dist, "--quiet"), cwd=repo)
    for built in sorted(path.name for path in dist.iterdir() if not path.name.startswith(".")):
        print(built)  # what ``ls -1`` would show: uv also writes a .gitignore there


def _missing_fields(meta: Message, version: str) -> list[str]:
    """What one METADATA or PKG-INFO lacks of what every published distribution must carry."""
    missing = [field for field in _REQUIRED_FIELDS if not (meta.get(field) or "").strip()]
    if not (meta.get("License-Expression") or meta.get("License")):
        missing.append("License-Expression")
    if not meta.get_all("License-File"):
        missing.append("License-File")
    payload = meta.get_payload()
    if not isinstance(payload, str) or len(payload) < 40:
        missing.append("the readme as long description")
    if "Typing :: Typed" not in (meta.get_all("Classifier") or []):
        missing.append("classifier 'Typing :: Typed'")
    if meta.get("Version") != version:
        missing.append(f"version {version} (found {meta.get('Version')})")
    return missing


def _problems_of(dist: Path, distribution: Distribution) -> list[str]:
    name, stem = distribution.name, distribution.stem
    wheel, sdist = dist / distribution.wheel, dist / distribution.sdist
    if not wheel.is_file() or not sdist.is_file():
        return [f"{name}: missing {wheel.name} or {sdist.name}"]
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
        metadata_text = archive.read(f"{stem}.dist-info/METADATA").decode()
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{stem}/PKG-INFO")
        if member is None:
            return [f"{name}: {sdist.name} has no {stem}/PKG-INFO file"]
        pkg_info_text = member.read().decode()
    problems: list[str] = []
    for label, text in (("wheel METADATA", metadata_text), ("sdist PKG-INFO", pkg_info_text)):
        missing = _missing_fields(HeaderParser().parsestr(text), distribution.version)
        if missing:
            problems.append(f"{name} {label}: missing {', '.join(missing)}")
    for required in (f"{distribution.module}/py.typed", f"{stem}.dist-info/licenses/LICENSE"):
        if required not in files:
            problems.append(f"{name} wheel: no {required}")
    return problems


def check_metadata(dist: Path, distributions: tuple[Distribution, ...]) -> None:
    """Read each built wheel's METADATA and sdist's PKG-INFO back and check them.

    Raises:
        StageFailure: any distribution lacks a field, a file or the right version (each
            problem is printed first).
    """
    step("metadata of the built dists")
    problems: list[str] = []
    for distribution in distributions:
        found = _problems_of(dist, distribution)
        problems += found
        if not found:
            print(
                f"{distribution.name} {distribution.version}:"
                " summary, readme, license, requires-python, classifiers, py.typed"
            )
    for problem in problems:
        print(f"metadata: {problem}", file=sys.stderr)
    if problems:
        raise StageFailure(f"{len(problems)} metadata problem(s) in the built dists")
