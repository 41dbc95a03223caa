"""Findings, rules, forbidden entries and the configuration record.

This module imports nothing heavy (no libcst), so a warm run that answers every file from
the cache never pays libcst's import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from harness_import_boundary._allow import DEFAULT_ALLOW, DEFAULT_PER_FILE_ALLOW, AllowList

__all__ = [
    "DEFAULT_ALLOW",
    "DEFAULT_FORBIDDEN",
    "DEFAULT_PER_FILE_ALLOW",
    "DEFAULT_ROOTS",
    "PATHLIB_WRITE",
    "RULES",
    "BoundaryConfig",
    "FilePolicy",
    "Finding",
    "Forbidden",
    "RawFinding",
    "Rule",
    "Severity",
    "parse_forbidden",
]

Severity = Literal["error", "warning"]

DEFAULT_ROOTS: Final[tuple[str, ...]] = ("packages/kernel/src", "packages/tools/src")
"""The production trees scanned by default; ``packages/workspace/src`` is the adapter layer."""

PATHLIB_WRITE: Final = "pathlib:write"
"""The special forbidden entry for writes through ``pathlib`` (spec §5)."""

DEFAULT_FORBIDDEN: Final[tuple[str, ...]] = (
    "os",
    "subprocess",
    "shutil",
    "io",
    "builtins.open",
    PATHLIB_WRITE,
)
"""The default host-authority entries (spec §3)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of the checker, as listed in SARIF and the docs."""

    id: str
    name: str
    default_severity: Severity
    suppressible: bool
    short_description: str
    full_description: str
    help: str


RULES: Final[dict[str, Rule]] = {
    rule.id: rule
    for rule in (
        Rule(
            "IB001",
            "host-authority",
            "error",
            True,
            "Host authority outside the Workspace boundary",
            "The code obtains host filesystem or process authority directly (a forbidden module, "
            "builtin open, or a pathlib write), or names a module or object that is not on the "
            "import allow-list, instead of using an injected Workspace capability.",
            "Reach files and processes through the Workspace capability the runtime injects; "
            "import only what the allow-list admits.",
        ),
        Rule(
            "IB002",
            "unverifiable",
            "error",
            True,
            "Dynamic loading or introspection that cannot be verified statically",
            "The code loads modules or builtins dynamically (computed names, exec/eval, builtins "
            "access, runtime loaders), uses a module as a value, reads attributes by computed "
            "names, or reaches frames, globals, code objects or subclasses, so the checker cannot "
            "tell whether it reaches host authority.",
            "Use a static import, or suppress the line with a reason after review.",
        ),
        Rule(
            "IB003",
            "refused-entry",
            "error",
            False,
            "Symbolic link, non-regular entry or importable non-source file among the sources",
            "A symbolic link, FIFO, socket or device, or a file Python could import that is not "
            "source (bytecode without its source, an extension module, a .pth or zip file), was "
            "found where source files are scanned; what it holds would go unchecked.",
            "Replace the link with a regular file or directory, and remove compiled or packed files.",
        ),
        Rule(
            "IB004",
            "unparsable-source",
            "error",
            False,
            "Source file could not be parsed",
            "The file is not valid UTF-8 (or its declared encoding), contains NUL bytes, has a "
            "syntax error, is nested too deeply to parse safely, or exceeds 4 MiB.",
            "Fix the file so that it parses; the checker cannot vouch for what it cannot read.",
        ),
        Rule(
            "IB005",
            "invalid-suppression",
            "error",
            False,
            "Malformed suppression comment",
            "A suppression comment lacks '--' or a reason of at least 10 characters, names an "
            "unknown rule, or names a rule that cannot be suppressed.",
            "Write '# harness-import-boundary: allow IB001 -- <reason of 10+ characters>'.",
        ),
        Rule(
            "IB006",
            "unused-suppression",
            "warning",
            False,
            "Suppression comment that suppresses nothing",
            "A well-formed suppression comment matches no finding on its line.",
            "Remove the comment.",
        ),
    )
}
"""The six rules, by id."""


@dataclass(frozen=True, slots=True)
class RawFinding:
    """A finding as the per-file analysis produces it: no path, severity or suppression yet.

    This is what the content-hash cache stores, so it depends only on the file's bytes and
    the forbidden entries.
    """

    rule: str
    line: int
    column: int
    module: str
    form: str
    message: str


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """One reported finding.

    Attributes:
        path: POSIX path relative to the config root (as given, for explicit paths outside it).
        line: 1-based line.
        column: 1-based column, in characters.
        module: The forbidden target (``"os.path"``, ``"builtins.open"``), or ``""``.
        form: How it was reached (``import``, ``from-import:type-checking``, …).
        message: Human-readable explanation.
        rule: ``IB001`` … ``IB006``.
        severity: ``"error"`` or ``"warning"``.
        suppression: The reason given by a suppression comment, when suppressed.
    """

    path: str
    line: int
    column: int
    module: str
    form: str
    message: str
    rule: str = "IB001"
    severity: Severity = "error"
    suppression: str | None = None

    def sort_key(self) -> tuple[str, int, int, str, str, str, str]:
        """The order findings are reported in: path, line, column, rule, module."""
        return (self.path, self.line, self.column, self.rule, self.module, self.form, self.message)


_DOTTED: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True, slots=True)
class Forbidden:
    """Validated forbidden entries: dotted names, and whether pathlib writes are forbidden."""

    names: tuple[str, ...]
    pathlib_write: bool

    def match(self, target: str) -> str | None:
        """Return the entry ``target`` falls under (equal, or below it after a dot), if any."""
        for name in self.names:
            if target == name or target.startswith(name + "."):
                return name
        return None

    def digest_text(self) -> str:
        """A canonical text of the entries, for the cache key."""
        parts = sorted(self.names)
        if self.pathlib_write:
            parts.append(PATHLIB_WRITE)
        return "\n".join(parts)


def parse_forbidden(entries: tuple[str, ...] | list[str]) -> Forbidden:
    """Validate forbidden entries (dotted names or ``pathlib:write``).

    Raises:
        ValueError: an entry is not a ``str``, is empty, or is not a dotted name.
    """
    names: list[str] = []
    pathlib_write = False
    for entry in entries:
        if not isinstance(entry, str):  # pyright: ignore[reportUnnecessaryIsInstance] - config data
            raise ValueError(f"forbidden entry must be a string, got {type(entry).__name__}")
        if entry == PATHLIB_WRITE:
            pathlib_write = True
        elif _DOTTED.fullmatch(entry) is None:
            raise ValueError(f"forbidden entry {entry!r} is not a dotted name or {PATHLIB_WRITE!r}")
        elif entry not in names:
            names.append(entry)
    return Forbidden(names=tuple(names), pathlib_write=pathlib_write)


@dataclass(frozen=True, slots=True)
class FilePolicy:
    """What one file is checked against.

    Attributes:
        forbidden: The forbidden entries (host authority whatever the allow-list says).
        allow: The file's allow-list, or ``None`` to apply the forbidden entries alone.
        package: The file's dotted package, for relative imports (``""`` at the top of its
            root); ``None`` when unknown.
    """

    forbidden: Forbidden
    allow: AllowList | None
    package: str | None

    def digest_text(self) -> str:
        """A canonical text of the policy, for the cache key."""
        allow = "-" if self.allow is None else self.allow.digest_text()
        package = "-" if self.package is None else f"={self.package}"
        return "\0".join((self.forbidden.digest_text(), allow, package))


@dataclass(frozen=True, slots=True)
class BoundaryConfig:
    """The checker's configuration; the defaults are those of ``[tool.harness-import-boundary]``.

    Attributes:
        root: The config root (the folder holding ``pyproject.toml``, or the cwd).
        roots: Root-relative directories scanned when no paths are given.
        forbidden: Effective forbidden entries (``forbidden`` plus ``extend-forbidden``).
        unverifiable: Severity of IB002 findings: ``"error"`` or ``"warn"`` (a warning).
        exclude: Globs matched against root-relative paths.
        cache_dir: Root-relative cache directory.
        jobs: Worker processes; 0 means min(CPU count, 8).
        allow: Effective allow entries for every file (``allow`` plus ``extend-allow``).
        per_file_allow: ``(glob, entries)`` pairs: entries added for the files whose
            root-relative path matches the glob.
        adapters: ``(name, globs)`` pairs: a host adapter of the project (a module or an
            object, and everything below it) that only the files matching one of the globs
            may name; every other scanned file is refused it, whatever else allows it.
    """

    root: Path = field(default_factory=Path.cwd)
    roots: tuple[str, ...] = DEFAULT_ROOTS
    forbidden: tuple[str, ...] = DEFAULT_FORBIDDEN
    unverifiable: Literal["error", "warn"] = "error"
    exclude: tuple[str, ...] = ()
    cache_dir: str = ".cache/harness-import-boundary"
    jobs: int = 0
    allow: tuple[str, ...] = DEFAULT_ALLOW
    per_file_allow: tuple[tuple[str, tuple[str, ...]], ...] = tuple(DEFAULT_PER_FILE_ALLOW.items())
    adapters: tuple[tuple[str, tuple[str, ...]], ...] = ()
