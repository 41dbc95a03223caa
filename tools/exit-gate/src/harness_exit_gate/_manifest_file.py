"""Reading a manifest file: the kernel's pure model plus the one host read it leaves out."""

from __future__ import annotations

import os
from pathlib import Path

from harness_exit_gate.manifest import (
    MAX_MANIFEST_BYTES,
    ManifestIssue,
    ManifestParseError,
    TaskManifest,
    load_task_manifest,
)

__all__ = ["FILE_ISSUE_PATH", "load_task_manifest_file", "read_manifest_bytes"]

FILE_ISSUE_PATH = "<file>"


def read_manifest_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a manifest file, at most one byte past the size limit.

    Raises:
        ManifestParseError: path ``<file>`` when the file cannot be read.
    """
    try:
        with Path(path).open("rb") as handle:
            return handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ManifestParseError(
            [ManifestIssue(FILE_ISSUE_PATH, f"cannot read {os.fspath(path)}: {reason}")]
        ) from None


def load_task_manifest_file(path: str | os.PathLike[str]) -> TaskManifest:
    """Read and validate one manifest file (exit-gate.md §2.3).

    Raises:
        ManifestParseError: with every issue found; path ``<file>`` when the file cannot be read.
    """
    return load_task_manifest(read_manifest_bytes(path))
