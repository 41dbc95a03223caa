#!/usr/bin/env python3
"""Build the sandbox's Docker image locally, with no registry: a root filesystem, then ``docker import``.

Two recipes:

- the default image: ``debootstrap --variant=minbase --include=python3,python3-pytest,git`` of Debian
  bookworm from the host's Debian mirror (about a minute), for real work;
- ``--busybox``: the host's statically linked ``busybox`` and its applet links (a fraction of
  a second), for fast tests that need only a shell and the basic tools.

The script prints the image as ``sha256:<image id>``: that is the pinned form that works for
an imported image. ``name@sha256:…`` names a *registry manifest* digest, which an image that
never went through a registry does not have (``docker run name@sha256:<image id>`` tries to
pull and fails). The image id is itself a content digest (of the image configuration, which
names the layers' digests), so it pins the image just as well.

A build is cached: the image carries the label ``io.harness.sandbox.recipe=<hash of the
recipe>``, and when an image with that label exists it is printed without rebuilding
(``--rebuild`` forces a new one). Standard library only: CI runs it before anything is
installed. Run as root (``debootstrap`` needs it) on a Debian-like host.

Usage::

    python3 packages/sandbox/scripts/build_image.py [--busybox] [--mirror URL] [--rebuild]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Final

RECIPE_LABEL: Final = "io.harness.sandbox.recipe"
"""The label whose value is the hash of the recipe an image was built from."""
DEFAULT_MIRROR: Final = "http://deb.debian.org/debian"
SUITE: Final = "bookworm"
PACKAGES: Final = ("python3", "python3-pytest", "git")
# Bump when the recipe changes in a way its parameters do not show.
_RECIPE_VERSION: Final = "1"
_BUSYBOX: Final = "/bin/busybox"


class BuildError(Exception):
    """The image could not be built; the message says which step failed and why."""


def find_mirror(
    sources_dir: str = "/etc/apt/sources.list.d", sources_list: str = "/etc/apt/sources.list"
) -> str:
    """Return the host's Debian mirror for :data:`SUITE`, or :data:`DEFAULT_MIRROR`.

    Reads the deb822 ``*.sources`` files, then the one-line ``*.list`` files and
    ``sources.list``; the first ``deb`` entry whose suites include :data:`SUITE` wins.
    """
    for path in sorted(glob.glob(os.path.join(sources_dir, "*.sources"))):
        for stanza in _read(path).split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                key, separator, value = line.partition(":")
                if separator and not line.startswith((" ", "#")):
                    fields[key.strip().lower()] = value.strip()
            if "deb" in fields.get("types", "").split() and SUITE in fields.get("suites", "").split():
                uris = fields.get("uris", "").split()
                if uris:
                    return uris[0]
    for path in [*sorted(glob.glob(os.path.join(sources_dir, "*.list"))), sources_list]:
        for line in _read(path).splitlines():
            words = [word for word in line.split() if not word.startswith("[")]
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                return words[1]
    return DEFAULT_MIRROR


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def recipe_hash(kind: str) -> str:
    """The hash that names one recipe: what it builds from, never when or where it ran."""
    parts = [_RECIPE_VERSION, kind]
    if kind == "busybox":
        parts.append(hashlib.sha256(Path(_BUSYBOX).read_bytes()).hexdigest())
    else:
        parts += [SUITE, "minbase", *PACKAGES]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def cached_image(recipe: str, *, docker: str = "docker") -> str | None:
    """Return ``sha256:<id>`` of the newest image built from ``recipe``, or ``None``."""
    found = _docker_output(
        docker, "images", "--no-trunc", "--quiet", "--filter", f"label={RECIPE_LABEL}={recipe}"
    )
    ids = found.split()  # Newest first.
    return ids[0] if ids else None


def build_busybox_image(*, docker: str = "docker", rebuild: bool = False) -> str:
    """Build (or find) the busybox test image and return it as ``sha256:<id>``.

    Raises:
        BuildError: ``busybox`` is missing or not static, or Docker failed.
    """
    if not os.path.isfile(_BUSYBOX):
        raise BuildError(f"{_BUSYBOX} is missing: install busybox-static")
    recipe = recipe_hash("busybox")
    if not rebuild and (image := cached_image(recipe, docker=docker)):
        return image
    with _temporary_root() as root:
        for directory in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "tmp", "proc", "sys", "dev"):
            (root / directory).mkdir(parents=True, exist_ok=True)
        shutil.copy2(_BUSYBOX, root / "bin/busybox")
        listing = subprocess.run(
            [_BUSYBOX, "--list-full"], capture_output=True, text=True, check=False
        ).stdout.split()
        for applet in listing:
            link = root / applet
            if applet != "bin/busybox" and not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(os.path.relpath("/bin/busybox", "/" + os.path.dirname(applet)))
        (root / "etc/passwd").write_text(
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"
        )
        (root / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")
        (root / "tmp").chmod(0o1777)
        image = _import(root, "harness-sandbox-busybox", recipe, docker=docker)
    _check_image(image, ["/bin/sh", "-c", "kill -0 $$ && sleep 0"], docker=docker)
    return image


def build_debian_image(*, docker: str = "docker", mirror: str | None = None, rebuild: bool = False) -> str:
    """Build (or find) the default image, Debian minbase with python3 and git, as ``sha256:<id>``.

    Raises:
        BuildError: ``debootstrap`` is missing or failed, or Docker failed.
    """
    recipe = recipe_hash("debian")
    if not rebuild and (image := cached_image(recipe, docker=docker)):
        return image
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise BuildError("debootstrap is missing: apt-get install debootstrap")
    source = mirror or find_mirror()
    with _temporary_root() as root:
        command = [
            debootstrap,
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(root),
            source,
        ]
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            tail = (completed.stdout + completed.stderr).strip().splitlines()[-5:]
            raise BuildError(f"debootstrap from {source} failed: " + " | ".join(tail))
        # Downloaded packages and lists are not part of the image.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (root / leftover).glob("*"):
                if entry.is_file():
                    entry.unlink()
        image = _import(root, "harness-sandbox", recipe, docker=docker)
    _check_image(image, ["python3", "-c", "import sqlite3, ssl"], docker=docker)
    _check_image(image, ["git", "--version"], docker=docker)
    return image


@contextlib.contextmanager
def _temporary_root() -> Generator[Path]:
    root = Path(tempfile.mkdtemp(prefix="harness-sandbox-rootfs-", dir="/var/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _import(root: Path, name: str, recipe: str, *, docker: str) -> str:
    """``tar -C root -c . | docker import`` with the recipe label; returns ``sha256:<id>``."""
    tag = f"{name}:{datetime.date.today():%Y%m%d}"
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    try:
        imported = subprocess.run(
            [docker, "import", "--change", f"LABEL {RECIPE_LABEL}={recipe}", "-", tag],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        tar_status = tar.wait()
    if tar_status != 0 or imported.returncode != 0:
        raise BuildError(f"docker import of {root} failed (tar {tar_status}): {imported.stderr.strip()}")
    image = imported.stdout.strip()
    if not image.startswith("sha256:") or len(image) != 71:
        raise BuildError(f"docker import printed {image!r}, not an image id")
    return image


def _check_image(image: str, argv: Sequence[str], *, docker: str) -> None:
    """Run ``argv`` once in ``image`` with no network, as the sandbox will."""
    completed = subprocess.run(
        [docker, "run", "--rm", "--pull=never", "--network=none", "--user=65534:65534", image, *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise BuildError(f"the new image {image} cannot run {list(argv)}: {completed.stderr.strip()}")


def _docker_output(docker: str, *args: str) -> str:
    try:
        completed = subprocess.run([docker, *args], capture_output=True, text=True, check=False)
    except OSError as error:
        raise BuildError(f"cannot run {docker}: {error}") from error
    if completed.returncode != 0:
        raise BuildError(f"{docker} {args[0]} failed: {completed.stderr.strip()}")
    return completed.stdout


def main(argv: Sequence[str] | None = None) -> int:
    """Build the image the options name and print ``sha256:<id>`` on stdout (timing on stderr)."""
    parser = argparse.ArgumentParser(description="Build the sandbox's Docker image locally.")
    parser.add_argument("--busybox", action="store_true", help="the tiny busybox test image")
    parser.add_argument("--mirror", help="the Debian mirror (default: the host's apt sources)")
    parser.add_argument("--rebuild", action="store_true", help="build even when a cached image exists")
    parser.add_argument("--docker", default="docker", help="the docker CLI (default: docker)")
    options = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        if options.busybox:
            image = build_busybox_image(docker=options.docker, rebuild=options.rebuild)
        else:
            image = build_debian_image(docker=options.docker, mirror=options.mirror, rebuild=options.rebuild)
    except BuildError as error:
        print(f"build_image: {error}", file=sys.stderr)
        return 1
    print(image)
    print(f"build_image: {image} ready in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
