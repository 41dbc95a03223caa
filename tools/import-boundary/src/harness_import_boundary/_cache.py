"""The content-hash cache (spec §11): each file's analysis, stored under a key of its bytes.

The key covers the checker's version, the digest of the file's policy and the file's bytes, so
an entry is reused only for the same bytes checked the same way. A bad entry is a miss; a
failed write is a warning, and the run goes on without the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeGuard, cast

from harness_import_boundary._model import RULES, RawFinding
from harness_import_boundary._suppress import SuppressionComment
from harness_import_boundary._version import TOOL_NAME, __version__

__all__ = ["AnalysisCache", "FileAnalysis", "cache_key"]

_CACHE_FORMAT: Final = 1


@dataclass(frozen=True, slots=True)
class FileAnalysis:
    """What the cache stores for one file's bytes: its raw findings and suppression comments."""

    raw: tuple[RawFinding, ...]
    suppressions: tuple[SuppressionComment, ...]


def cache_key(policy_digest: str, source: bytes) -> str:
    """The key of a file's analysis: the checker's version, its policy's digest and its bytes."""
    digest = hashlib.sha256()
    for part in (__version__.encode(), policy_digest.encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    digest.update(source)
    return digest.hexdigest()


class AnalysisCache:
    """Per-file analyses stored as ``<key>.json``; a bad entry is a miss, a failed write a warning."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._writable = True
        self._created = False

    def load(self, key: str) -> FileAnalysis | None:
        try:
            document: object = json.loads((self._directory / f"{key}.json").read_bytes())
        except (OSError, ValueError):
            return None
        return _decode_entry(document, key)

    def store(self, key: str, analysis: FileAnalysis) -> None:
        if not self._writable:
            return
        payload = json.dumps(_encode_entry(key, analysis), separators=(",", ":")).encode()
        try:
            if not self._created:
                self._directory.mkdir(parents=True, exist_ok=True)
                self._created = True
            descriptor, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self._directory)
            try:
                with open(descriptor, "wb") as stream:
                    stream.write(payload)
                os.replace(temporary, self._directory / f"{key}.json")
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as error:
            self._writable = False
            print(
                f"{TOOL_NAME}: warning: cannot write the cache in {self._directory} "
                f"({error.strerror or error}); continuing without it",
                file=sys.stderr,
            )


def _encode_entry(key: str, analysis: FileAnalysis) -> dict[str, object]:
    return {
        "format": _CACHE_FORMAT,
        "version": __version__,
        "key": key,
        "findings": [
            [item.rule, item.line, item.column, item.module, item.form, item.message] for item in analysis.raw
        ],
        "suppressions": [
            [comment.line, comment.column, list(comment.rules), comment.reason, comment.error]
            for comment in analysis.suppressions
        ],
    }


def _decode_entry(document: object, key: str) -> FileAnalysis | None:
    """Rebuild a cached analysis, or ``None`` for anything that is not exactly a current entry."""
    if not _is_dict(document) or set(document) != {"format", "version", "key", "findings", "suppressions"}:
        return None
    if not _is_int(document["format"]) or document["format"] != _CACHE_FORMAT:
        return None
    if document["version"] != __version__ or document["key"] != key:
        return None
    findings, comments = document["findings"], document["suppressions"]
    if not _is_list(findings) or not _is_list(comments):
        return None
    raw: list[RawFinding] = []
    for item in findings:
        if not _is_list(item) or len(item) != 6:
            return None
        rule, line, column, module, form, message = item
        if not (
            _is_str(rule)
            and rule in RULES
            and _is_int(line)
            and _is_int(column)
            and _is_str(module)
            and _is_str(form)
            and _is_str(message)
        ):
            return None
        raw.append(RawFinding(rule, line, column, module, form, message))
    suppressions: list[SuppressionComment] = []
    for item in comments:
        if not _is_list(item) or len(item) != 5:
            return None
        line, column, rules, reason, error = item
        if not (_is_int(line) and _is_int(column) and _is_list(rules) and _is_str(reason)):
            return None
        if not (error is None or _is_str(error)):
            return None
        if not all(_is_str(rule) and rule in RULES for rule in rules):
            return None
        suppressions.append(SuppressionComment(line, column, tuple(cast("list[str]", rules)), reason, error))
    return FileAnalysis(raw=tuple(raw), suppressions=tuple(suppressions))


def _is_dict(value: object) -> TypeGuard[dict[str, object]]:
    return type(value) is dict


def _is_list(value: object) -> TypeGuard[list[object]]:
    return type(value) is list


def _is_str(value: object) -> TypeGuard[str]:
    return type(value) is str


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int
