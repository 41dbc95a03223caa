"""The import allow-list: which modules and objects kernel and tools code may name.

A target is a dotted qualified name (``re.compile``, ``trio.CancelScope``). It is allowed
when an entry covers it and every attribute below the entry passes the guard: no private
name, and no name that is a module of its parent (``typing.sys``, ``enum.bltns``). Module
attributes of the allowed standard library modules are listed in ``MODULE_ATTRIBUTES``,
taken from the interpreter and kept true by a test; for other parents every standard
library module name counts as one. Exclusions (``!contextlib.chdir``) refuse part of an
allowed module. A package entry (``harness_kernel.*``) also allows every submodule, and
private names along module paths the file imports itself.

This module imports nothing heavy: a warm run reads the configuration without libcst.
"""

from __future__ import annotations

import enum
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "DEFAULT_ALLOW",
    "DEFAULT_PER_FILE_ALLOW",
    "MODULE_ATTRIBUTES",
    "AllowList",
    "Verdict",
    "parse_allow",
]

_IDENTIFIER: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_ENTRY: Final = re.compile(rf"(!)?({_IDENTIFIER}(?:\.{_IDENTIFIER})*)(\.\*)?")

_HARNESS_WORKSPACE_CONTRACT: Final = (
    "WORKSPACE_CAPABILITIES",
    "WORKSPACE_CONTRACT_VERSION",
    "WORKSPACE_ISOLATION_REQUIRED",
    "WORKSPACE_OPERATION_MALFORMED",
    "WORKSPACE_OPERATION_REQUIRED",
    "WORKSPACE_OPERATION_UNKNOWN",
    "WORKSPACE_OPERATION_UNSUPPORTED",
    "AbortController",
    "AbortSignal",
    "CommandHandler",
    "CommandRequest",
    "CommandResult",
    "DiffRequest",
    "DisposeRequest",
    "ExecuteCommand",
    "ExecuteRequest",
    "JsonValue",
    "ListFilesRequest",
    "LocalWorkspaceError",
    "MemoryWorkspace",
    "ReadFileRequest",
    "SnapshotRequest",
    "Workspace",
    "WorkspaceCapability",
    "WorkspaceEscapesRootError",
    "WorkspaceIsolation",
    "WorkspaceOperationError",
    "WorkspaceOperationMalformedError",
    "WorkspaceOperationRequiredError",
    "WorkspaceOperationUnknownError",
    "WorkspaceOperationUnsupportedError",
    "WorkspacePathScope",
    "WorkspaceRequest",
    "WorkspaceSnapshot",
    "WriteFileRequest",
    "__version__",
    "bind_workspace",
    "invoke_workspace_operation",
    "isolation_of",
    "move_on_abort",
    "open_workspace",
    "restrict_workspace",
)

_TRIO_WITHOUT_IO: Final = (
    "BrokenResourceError",
    "BusyResourceError",
    "CancelScope",
    "Cancelled",
    "CapacityLimiter",
    "ClosedResourceError",
    "Condition",
    "EndOfChannel",
    "Event",
    "Lock",
    "MemoryReceiveChannel",
    "MemorySendChannel",
    "Nursery",
    "Semaphore",
    "StrictFIFOLock",
    "TASK_STATUS_IGNORED",
    "TaskStatus",
    "TooSlowError",
    "WouldBlock",
    "current_effective_deadline",
    "current_time",
    "fail_after",
    "fail_at",
    "move_on_after",
    "move_on_at",
    "open_memory_channel",
    "open_nursery",
    "sleep",
    "sleep_forever",
    "sleep_until",
    "lowlevel.cancel_shielded_checkpoint",
    "lowlevel.checkpoint",
    "lowlevel.checkpoint_if_cancelled",
)

DEFAULT_ALLOW: Final[tuple[str, ...]] = (
    # The standard library's pure modules (reviewed: docs/decisions/002-import-allow-list.md).
    "__future__",
    "abc",
    "base64",
    "binascii",
    "bisect",
    "cmath",
    "collections",
    "collections.abc",
    "contextlib",
    "!contextlib.chdir",
    "!contextlib.redirect_stderr",
    "!contextlib.redirect_stdout",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "enum",
    "fractions",
    "functools",
    "graphlib",
    "hashlib",
    "heapq",
    "hmac",
    "itertools",
    "json",
    "keyword",
    "math",
    "numbers",
    "operator",
    "random",
    "re",
    "reprlib",
    "secrets",
    "statistics",
    "string",
    "!string.Formatter",
    "struct",
    "textwrap",
    "types",
    "!types.CodeType",
    "!types.FunctionType",
    "!types.LambdaType",
    "typing",
    "!typing.ForwardRef",
    "!typing.get_type_hints",
    "unicodedata",
    "uuid",
    "!uuid.getnode",
    "!uuid.uuid1",
    "warnings",
    "!warnings.formatwarning",
    "!warnings.showwarning",
    "!warnings.warn_explicit",
    "weakref",
    "zlib",
    # Single pure names of modules that also reach frames, files or the import system.
    "importlib.metadata.PackageNotFoundError",
    "importlib.metadata.version",
    "inspect.isasyncgen",
    "inspect.isasyncgenfunction",
    "inspect.isawaitable",
    "inspect.isclass",
    "inspect.iscoroutine",
    "inspect.iscoroutinefunction",
    "inspect.isfunction",
    "inspect.isgenerator",
    "inspect.isgeneratorfunction",
    "pathlib.PurePath",
    "pathlib.PurePosixPath",
    "pathlib.PureWindowsPath",
    "pprint.pformat",
    "pprint.saferepr",
    # Third-party libraries: msgspec whole, trio without its I/O.
    "msgspec",
    "msgspec.inspect",
    "msgspec.json",
    "msgspec.msgpack",
    "msgspec.structs",
    *(f"trio.{name}" for name in _TRIO_WITHOUT_IO),
    # The workspace contract (never its adapters, such as harness_workspace.local).
    *(f"harness_workspace.{name}" for name in _HARNESS_WORKSPACE_CONTRACT),
)
"""What every file in the scanned roots may import and name."""

DEFAULT_PER_FILE_ALLOW: Final[Mapping[str, tuple[str, ...]]] = {
    "packages/kernel/src/**": ("harness_kernel.*", "harness_tools.*"),
    "packages/tools/src/**": ("harness_tools.*",),
}
"""Added for files whose root-relative path matches the glob: each package its own
sources and those it depends on (never upward: tools code may not import the kernel)."""

# Module-valued public attributes and public submodules of the modules above, from
# CPython 3.11 and the locked msgspec, trio and PyYAML (tests/test_allow_list.py checks
# the running interpreter against it). A name here is never reached through its parent.
MODULE_ATTRIBUTES: Final[Mapping[str, frozenset[str]]] = {
    "__future__": frozenset(),
    "abc": frozenset(),
    "base64": frozenset({"binascii", "re", "struct"}),
    "binascii": frozenset(),
    "bisect": frozenset(),
    "cmath": frozenset(),
    "collections": frozenset({"abc"}),
    "collections.abc": frozenset(),
    "contextlib": frozenset({"abc", "os", "sys"}),
    "copy": frozenset(),
    "dataclasses": frozenset(
        {"abc", "builtins", "copy", "functools", "inspect", "itertools", "keyword", "re", "sys", "types"}
    ),
    "datetime": frozenset({"sys"}),
    "decimal": frozenset(),
    "difflib": frozenset(),
    "enum": frozenset({"bltns", "sys"}),
    "fractions": frozenset({"math", "numbers", "operator", "re", "sys"}),
    "functools": frozenset(),
    "graphlib": frozenset(),
    "hashlib": frozenset(),
    "heapq": frozenset(),
    "hmac": frozenset(),
    "importlib": frozenset(
        {"abc", "machinery", "metadata", "readers", "resources", "simple", "sys", "util", "warnings"}
    ),
    "importlib.metadata": frozenset(
        {
            "abc",
            "collections",
            "csv",
            "email",
            "functools",
            "itertools",
            "operator",
            "os",
            "pathlib",
            "posixpath",
            "re",
            "sys",
            "textwrap",
            "warnings",
            "zipfile",
        }
    ),
    "inspect": frozenset(
        {
            "abc",
            "ast",
            "builtins",
            "collections",
            "dis",
            "enum",
            "functools",
            "importlib",
            "itertools",
            "linecache",
            "os",
            "re",
            "sys",
            "token",
            "tokenize",
            "types",
        }
    ),
    "itertools": frozenset(),
    "json": frozenset({"codecs", "decoder", "encoder", "scanner", "tool"}),
    "keyword": frozenset(),
    "math": frozenset(),
    "numbers": frozenset(),
    "operator": frozenset(),
    "pathlib": frozenset(
        {"fnmatch", "functools", "io", "ntpath", "os", "posixpath", "re", "sys", "warnings"}
    ),
    "pprint": frozenset({"re"}),
    "random": frozenset(),
    "re": frozenset({"copyreg", "enum", "functools"}),
    "reprlib": frozenset({"builtins"}),
    "secrets": frozenset({"base64", "binascii"}),
    "sqlite3": frozenset({"collections", "datetime", "dbapi2", "dump", "time"}),
    "statistics": frozenset({"math", "numbers", "random", "sys"}),
    "string": frozenset(),
    "struct": frozenset(),
    "textwrap": frozenset({"re"}),
    "types": frozenset(),
    "typing": frozenset(
        {"collections", "contextlib", "functools", "operator", "stdlib_re", "sys", "types", "warnings"}
    ),
    "unicodedata": frozenset(),
    "uuid": frozenset({"os", "platform", "sys"}),
    "warnings": frozenset({"sys"}),
    "weakref": frozenset({"itertools", "sys"}),
    "zlib": frozenset(),
    "msgspec": frozenset({"inspect", "json", "msgpack", "structs", "toml", "yaml"}),
    "msgspec.inspect": frozenset({"datetime", "decimal", "enum", "msgspec", "sys", "uuid"}),
    "msgspec.json": frozenset(),
    "msgspec.msgpack": frozenset(),
    "msgspec.structs": frozenset(),
    "trio": frozenset({"abc", "from_thread", "lowlevel", "socket", "testing", "to_thread"}),
    "trio.lowlevel": frozenset(),
    "trio.to_thread": frozenset(),
    "yaml": frozenset(
        {
            "composer",
            "constructor",
            "cyaml",
            "dumper",
            "emitter",
            "error",
            "events",
            "io",
            "loader",
            "nodes",
            "parser",
            "reader",
            "representer",
            "resolver",
            "scanner",
            "serializer",
            "tokens",
        }
    ),
    "yaml.constructor": frozenset({"base64", "binascii", "collections", "datetime", "re", "sys", "types"}),
    "yaml.events": frozenset(),
    "yaml.nodes": frozenset(),
    "yaml.reader": frozenset({"codecs", "re"}),
    "yaml.resolver": frozenset({"re"}),
    "harness_workspace": frozenset({"local"}),
}

# For a parent that is not in the table (a project module, say), any of these names may be a
# module it re-exports: the standard library's, the modules of the table and their module
# attributes (``x.trio.run_process``, ``x.renamed_enum.bltns``).
_ANY_MODULE_NAME: Final = (
    frozenset(sys.stdlib_module_names)
    .union(*MODULE_ATTRIBUTES.values())
    .union(name.split(".", 1)[0] for name in MODULE_ATTRIBUTES)
)


class Verdict(enum.Enum):
    """How the allow-list treats a target."""

    ALLOWED = "allowed"
    """An entry covers it: it may be imported and used as a value."""
    NAMESPACE = "namespace"
    """Only names below it are allowed: it may be imported to reach them, never used alone."""
    REFUSED = "refused"
    """Nothing allows it."""


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def parse_allow(entries: Iterable[object]) -> tuple[str, ...]:
    """Validate allow entries: dotted names, optionally ``!``-prefixed or ending in ``.*``.

    Raises:
        ValueError: an entry is not a string or not of that form.
    """
    valid: list[str] = []
    for entry in entries:
        if not isinstance(entry, str):
            raise ValueError(f"allow entry must be a string, got {type(entry).__name__}")
        match = _ENTRY.fullmatch(entry)
        if match is None:
            raise ValueError(
                f"allow entry {entry!r} is not a dotted name, a '!' exclusion or a package 'name.*'"
            )
        if match.group(1) and match.group(3):
            raise ValueError(f"allow entry {entry!r}: an exclusion names one module or object, not 'name.*'")
        if entry not in valid:
            valid.append(entry)
    return tuple(valid)


@dataclass(frozen=True, slots=True)
class AllowList:
    """Validated allow entries for one file, and the verdicts they give.

    Attributes:
        entries: The entries as configured (validated by :func:`parse_allow`).
    """

    entries: tuple[str, ...]
    _objects: frozenset[str] = field(init=False, repr=False, compare=False)
    _packages: frozenset[str] = field(init=False, repr=False, compare=False)
    _excluded: frozenset[str] = field(init=False, repr=False, compare=False)
    _parents: frozenset[str] = field(init=False, repr=False, compare=False)
    _module_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        objects: set[str] = set()
        packages: set[str] = set()
        excluded: set[str] = set()
        for entry in self.entries:
            if entry.startswith("!"):
                excluded.add(entry[1:])
            elif entry.endswith(".*"):
                packages.add(entry[:-2])
            else:
                objects.add(entry)
        parents: set[str] = set()
        for name in objects | packages:
            parts = name.split(".")
            parents.update(".".join(parts[:index]) for index in range(1, len(parts)))
        object.__setattr__(self, "_objects", frozenset(objects))
        object.__setattr__(self, "_packages", frozenset(packages))
        object.__setattr__(self, "_excluded", frozenset(excluded))
        object.__setattr__(self, "_parents", frozenset(parents))
        # The top-level packages of the entries may be re-exported too (``x.trio.run_process``).
        tops = {name.split(".", 1)[0] for name in objects | packages | excluded}
        object.__setattr__(self, "_module_names", _ANY_MODULE_NAME | tops)

    def digest_text(self) -> str:
        """A canonical text of the entries, for the cache key."""
        return "\n".join(sorted(self.entries))

    def classify(self, target: str, module_paths: frozenset[str] = frozenset()) -> Verdict:
        """The verdict for ``target``.

        Args:
            target: A dotted qualified name.
            module_paths: Dotted names the file imports as modules; below a package entry,
                private names along them are allowed (they are the package's own modules).
        """
        parts = target.split(".")
        for index in range(len(parts), 0, -1):
            prefix = ".".join(parts[:index])
            if prefix in self._excluded:
                return Verdict.REFUSED
        for index in range(len(parts), 0, -1):
            prefix = ".".join(parts[:index])
            package = prefix in self._packages
            if package or prefix in self._objects:
                allowed = self._guard(prefix, parts[index:], module_paths if package else frozenset())
                return Verdict.ALLOWED if allowed else Verdict.REFUSED
        return Verdict.NAMESPACE if target in self._parents else Verdict.REFUSED

    def _guard(self, entry: str, rest: list[str], module_paths: frozenset[str]) -> bool:
        """Whether the attributes ``rest`` below ``entry`` stay inside what the entry allows."""
        parent = entry
        known_object = False  # the parent is known not to be a module: only privacy matters
        for name in rest:
            current = f"{parent}.{name}"
            if current in module_paths:
                parent = current
                continue
            if _is_private(name):
                return False
            if not known_object:
                members = MODULE_ATTRIBUTES.get(parent)
                if members is None:
                    if name in self._module_names:
                        return False
                elif name in members:
                    return False
                else:
                    known_object = True
            parent = current
        return True
