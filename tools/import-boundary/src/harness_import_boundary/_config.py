"""Finding, reading and validating ``[tool.harness-import-boundary]`` (spec §8), and exclude globs."""

from __future__ import annotations

import os
import posixpath
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Final, TypeGuard, cast

from harness_import_boundary._allow import parse_allow
from harness_import_boundary._model import BoundaryConfig, parse_forbidden

__all__ = [
    "CONFIG_FILE_NAME",
    "TABLE_NAME",
    "ConfigError",
    "ExcludeMatcher",
    "find_pyproject",
    "glob_to_regex",
    "load_config",
    "validate_glob",
]

CONFIG_FILE_NAME: Final = "pyproject.toml"
TABLE_NAME: Final = "tool.harness-import-boundary"

_KEYS: Final = (
    "roots",
    "forbidden",
    "extend-forbidden",
    "allow",
    "extend-allow",
    "per-file-allow",
    "adapters",
    "unverifiable",
    "exclude",
    "cache-dir",
    "jobs",
)


class ConfigError(Exception):
    """The configuration cannot be used: unreadable, not TOML, or invalid (the CLI exits 2).

    Attributes:
        path: The ``pyproject.toml`` concerned, when there is one.
        key: The key of ``[tool.harness-import-boundary]`` at fault, when there is one.
    """

    path: Path | None
    key: str | None

    def __init__(self, message: str, *, path: Path | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.key = key


def find_pyproject(start: Path) -> Path | None:
    """Return the nearest ``pyproject.toml`` in ``start`` or one of its parents, if any."""
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_FILE_NAME
        if candidate.is_file():
            return candidate
    return None


def load_config(pyproject: str | Path | None = None) -> BoundaryConfig:
    """Read the checker's configuration.

    Args:
        pyproject: The ``pyproject.toml`` to read. Without it, the nearest one from the
            current directory upward is used. The folder holding the file is the config root;
            with no file at all, the defaults apply with the current directory as root.

    Raises:
        ConfigError: the named file does not exist or cannot be read, is not valid TOML, or
            its ``[tool.harness-import-boundary]`` table is invalid.
    """
    if pyproject is None:
        cwd = Path.cwd()
        found = find_pyproject(cwd)
        if found is None:
            return BoundaryConfig(root=cwd)
        path = found
    else:
        path = Path(pyproject).resolve()
        if not path.is_file():
            raise ConfigError(f"{path}: configuration file not found", path=path)
    try:
        with path.open("rb") as stream:
            document = tomllib.load(stream)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}", path=path) from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: invalid TOML: {error}", path=path) from error
    root = path.parent
    tool: object = document.get("tool")
    if tool is None:
        return BoundaryConfig(root=root)
    if not _is_table(tool):
        raise ConfigError(f"{path}: [tool] must be a table, got {_toml_type(tool)}", path=path)
    table = tool.get("harness-import-boundary")
    if table is None:
        return BoundaryConfig(root=root)
    if not _is_table(table):
        raise ConfigError(f"{path}: [{TABLE_NAME}] must be a table, got {_toml_type(table)}", path=path)
    return _Validator(path, root).config(table)


class _Validator:
    """Turns one ``[tool.harness-import-boundary]`` table into a ``BoundaryConfig``."""

    def __init__(self, path: Path, root: Path) -> None:
        self._path = path
        self._root = root

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self._path}: [{TABLE_NAME}] {key}: {problem}", path=self._path, key=key)

    def config(self, table: dict[str, object]) -> BoundaryConfig:
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise self.fail(unknown[0], f"unknown key (known keys: {', '.join(sorted(_KEYS))})")
        defaults = BoundaryConfig(root=self._root)
        roots = defaults.roots
        if "roots" in table:
            roots = self.roots(table["roots"])
        forbidden = defaults.forbidden
        if "forbidden" in table:
            forbidden = self.forbidden("forbidden", table["forbidden"])
        if "extend-forbidden" in table:
            extension = self.forbidden("extend-forbidden", table["extend-forbidden"])
            forbidden = tuple(dict.fromkeys((*forbidden, *extension)))
        allow = defaults.allow
        if "allow" in table:
            allow = self.allow("allow", table["allow"])
        if "extend-allow" in table:
            allow = tuple(dict.fromkeys((*allow, *self.allow("extend-allow", table["extend-allow"]))))
        per_file_allow = defaults.per_file_allow
        if "per-file-allow" in table:
            per_file_allow = self.per_file_allow(table["per-file-allow"])
        adapters = defaults.adapters
        if "adapters" in table:
            adapters = self.adapters(table["adapters"])
        unverifiable = defaults.unverifiable
        if "unverifiable" in table:
            value = table["unverifiable"]
            if value == "error":
                unverifiable = "error"
            elif value == "warn":
                unverifiable = "warn"
            else:
                raise self.fail("unverifiable", f'must be "error" or "warn", got {_describe(value)}')
        exclude = defaults.exclude
        if "exclude" in table:
            exclude = self.exclude(table["exclude"])
        cache_dir = defaults.cache_dir
        if "cache-dir" in table:
            cache_dir = self.cache_dir(table["cache-dir"])
        jobs = defaults.jobs
        if "jobs" in table:
            value = table["jobs"]
            if type(value) is not int or value < 0:
                raise self.fail("jobs", f"must be an integer >= 0, got {_describe(value)}")
            jobs = value
        return BoundaryConfig(
            root=self._root,
            roots=roots,
            forbidden=forbidden,
            unverifiable=unverifiable,
            exclude=exclude,
            cache_dir=cache_dir,
            jobs=jobs,
            allow=allow,
            per_file_allow=per_file_allow,
            adapters=adapters,
        )

    def strings(self, key: str, value: object) -> list[str]:
        if not isinstance(value, list):
            raise self.fail(key, f"must be an array of strings, got {_toml_type(value)}")
        items = cast("list[object]", value)
        strings: list[str] = []
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise self.fail(key, f"item {index} must be a string, got {_toml_type(item)}")
            strings.append(item)
        return strings

    def relative_directory(self, key: str, text: str) -> str:
        if not text:
            raise self.fail(key, "a directory must not be empty")
        if text.startswith("/"):
            raise self.fail(key, f"{text!r} must be relative to the config root {self._root}")
        normal = posixpath.normpath(text)
        if normal == ".." or normal.startswith("../"):
            raise self.fail(key, f"{text!r} is outside the config root {self._root}")
        return normal

    def roots(self, value: object) -> tuple[str, ...]:
        roots: list[str] = []
        for text in self.strings("roots", value):
            normal = self.relative_directory("roots", text)
            location = self._root / normal
            # A root that is itself a link is not a configuration error: the scan reports it as IB003.
            if not os.path.lexists(location):
                raise self.fail("roots", f"{text!r} does not exist under the config root {self._root}")
            if not location.is_symlink() and not location.is_dir():
                raise self.fail("roots", f"{text!r} is not a directory")
            roots.append(normal)
        if not roots:
            raise self.fail("roots", "must list at least one directory")
        return tuple(dict.fromkeys(roots))

    def forbidden(self, key: str, value: object) -> tuple[str, ...]:
        entries = self.strings(key, value)
        try:
            parse_forbidden(entries)
        except ValueError as error:
            raise self.fail(key, str(error)) from error
        return tuple(dict.fromkeys(entries))

    def allow(self, key: str, value: object) -> tuple[str, ...]:
        try:
            return parse_allow(self.strings(key, value))
        except ValueError as error:
            raise self.fail(key, str(error)) from error

    def per_file_allow(self, value: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
        if not _is_table(value):
            raise self.fail("per-file-allow", f"must be a table of globs to arrays, got {_toml_type(value)}")
        pairs: list[tuple[str, tuple[str, ...]]] = []
        for pattern, entries in value.items():
            try:
                validate_glob(pattern)
            except ValueError as error:
                raise self.fail("per-file-allow", str(error)) from error
            pairs.append((pattern, self.allow(f"per-file-allow.{pattern}", entries)))
        return tuple(pairs)

    def adapters(self, value: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
        if not _is_table(value):
            raise self.fail(
                "adapters", f"must be a table of names to arrays of globs, got {_toml_type(value)}"
            )
        pairs: list[tuple[str, tuple[str, ...]]] = []
        for name, patterns in value.items():
            key = f"adapters.{name}"
            try:
                entries = parse_allow([name])
            except ValueError as error:
                raise self.fail(key, str(error)) from error
            if entries[0].startswith("!") or entries[0].endswith(".*"):
                raise self.fail(key, "an adapter is one dotted name, not an exclusion or a package 'name.*'")
            globs = self.strings(key, patterns)
            for pattern in globs:
                try:
                    validate_glob(pattern)
                except ValueError as error:
                    raise self.fail(key, str(error)) from error
            pairs.append((name, tuple(globs)))
        return tuple(pairs)

    def exclude(self, value: object) -> tuple[str, ...]:
        patterns = self.strings("exclude", value)
        for pattern in patterns:
            try:
                validate_glob(pattern)
            except ValueError as error:
                raise self.fail("exclude", str(error)) from error
        return tuple(dict.fromkeys(patterns))

    def cache_dir(self, value: object) -> str:
        if not isinstance(value, str):
            raise self.fail("cache-dir", f"must be a string, got {_toml_type(value)}")
        normal = self.relative_directory("cache-dir", value)
        if normal == ".":
            raise self.fail("cache-dir", "must be a directory below the config root, not the root itself")
        return normal


def _is_table(value: object) -> TypeGuard[dict[str, object]]:
    return isinstance(value, dict)


_TOML_TYPES: Final[dict[type, str]] = {
    bool: "boolean",
    int: "integer",
    float: "float",
    str: "string",
    list: "array",
    dict: "table",
}


def _toml_type(value: object) -> str:
    return _TOML_TYPES.get(type(value), "date/time")


def _describe(value: object) -> str:
    if isinstance(value, str):
        return repr(value)
    return f"{_toml_type(value)} {value!r}" if isinstance(value, int | float) else _toml_type(value)


# ------------------------------------------------------------------ exclude globs


def validate_glob(pattern: str) -> None:
    """Check that ``pattern`` is a usable root-relative exclude glob.

    Raises:
        ValueError: the pattern is empty, absolute, or has an empty, ``.`` or ``..`` segment
            (root-relative paths never contain those, so it could never match).
    """
    if not pattern:
        raise ValueError("a glob must not be empty")
    if pattern.startswith("/"):
        raise ValueError(f"glob {pattern!r} must be relative to the config root")
    for segment in pattern.split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(f"glob {pattern!r} has an empty, '.' or '..' segment")


def glob_to_regex(pattern: str) -> str:
    """Translate an exclude glob to a regular expression (to be compiled with ``re.DOTALL``).

    ``*`` matches any characters within one segment, ``?`` exactly one character other than
    ``/``, and a ``**`` segment any number of whole segments, none included (``a/**/b``
    matches ``a/b``; ``a/**`` matches ``a`` and everything below it). A ``**`` inside a
    segment (``a**``) is an ordinary ``*``. Every other character stands for itself.
    """
    segments: list[str] = []
    for segment in pattern.split("/"):
        if not (segment == "**" and segments and segments[-1] == "**"):
            segments.append(segment)
    if segments == ["**"]:
        return ".*"
    parts: list[str] = []
    separator = False
    for index, segment in enumerate(segments):
        if segment == "**":
            # Leading: whole segments each followed by '/'; elsewhere: each preceded by '/'.
            parts.append("(?:[^/]+/)*" if index == 0 else "(?:/[^/]+)*")
            separator = index != 0
            continue
        if separator:
            parts.append("/")
        parts.append(_segment_regex(segment))
        separator = True
    return "".join(parts)


_WILDCARD: Final = re.compile(r"\*+|\?|[^*?]+")


def _segment_regex(segment: str) -> str:
    parts: list[str] = []
    for match in _WILDCARD.finditer(segment):
        token = match.group()
        if token.startswith("*"):
            parts.append("[^/]*")
        elif token == "?":
            parts.append("[^/]")
        else:
            parts.append(re.escape(token))
    return "".join(parts)


class ExcludeMatcher:
    """Matches root-relative POSIX paths against a set of exclude globs."""

    __slots__ = ("_regex",)

    def __init__(self, patterns: Iterable[str]) -> None:
        alternatives = [f"(?:{glob_to_regex(pattern)})" for pattern in patterns]
        self._regex = re.compile("|".join(alternatives), re.DOTALL) if alternatives else None

    def matches(self, relative_path: str) -> bool:
        """Whether some glob matches the whole of ``relative_path``."""
        return self._regex is not None and self._regex.fullmatch(relative_path) is not None
