"""Walking the trees, reading sources and the worker pool (spec §2, §11); the cache is ``_cache``.

libcst is imported (through ``_analysis``) only when some file misses the cache, so a warm
run over an unchanged tree walks, reads and hashes, and never pays for the parser.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import multiprocessing
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing.context import BaseContext
from pathlib import Path, PurePath
from typing import Final

from harness_import_boundary._allow import AllowList
from harness_import_boundary._cache import AnalysisCache, FileAnalysis, cache_key
from harness_import_boundary._config import ExcludeMatcher
from harness_import_boundary._model import (
    BoundaryConfig,
    FilePolicy,
    Finding,
    RawFinding,
    parse_forbidden,
)
from harness_import_boundary._suppress import apply_suppressions, parse_suppressions
from harness_import_boundary._version import TOOL_NAME

__all__ = [
    "MAX_DEFAULT_JOBS",
    "SOURCE_SUFFIXES",
    "TOOL_NAME",
    "FileAnalysis",
    "ScanReport",
    "SourceItem",
    "analyze_batch",
    "analyze_misses",
    "check_paths",
    "effective_jobs",
    "scan",
]

SOURCE_SUFFIXES: Final = (".py", ".pyi")
MAX_DEFAULT_JOBS: Final = 8
"""``jobs = 0`` means min(CPU count, this)."""

PARSER_DIED_FORM: Final = "unparsable-source"
PARSER_DIED_MESSAGE: Final = "parser process died"

_CHUNKS_PER_WORKER: Final = 16

_REFUSAL_MESSAGES: Final = {
    "symlink": "symbolic link is never followed",
    "fifo": "named pipe (FIFO) is not a regular file",
    "socket": "socket is not a regular file",
    "device": "device is not a regular file",
    "special": "entry is not a regular file",
    "non-source": "file Python could import or load is not source and cannot be checked",
    "sourceless-bytecode": "bytecode without its source file cannot be checked",
    "unchecked-bytecode": "bytecode that Python loads without checking its source cannot be checked",
}

# What the import system loads besides source: bytecode, extension modules, and the files
# that put code on the path or run it at start-up (.pth) or hold modules (zip archives).
_IMPORTABLE_SUFFIXES: Final = (
    ".pyc",
    ".pyo",
    ".pyw",
    ".so",
    ".pyd",
    ".dll",
    ".dylib",
    ".pth",
    ".zip",
    ".pyz",
    ".pyzw",
    ".egg",
    ".whl",
)
_PYCACHE: Final = "__pycache__"
_TYPED_MARKER: Final = "py.typed"
_PYC_HEADER_BYTES: Final = 16
_PYC_HASH_BASED: Final = 0b01
_PYC_CHECK_SOURCE: Final = 0b10


@dataclass(frozen=True, slots=True)
class ScanReport:
    """Everything a run found, for the output formats.

    Attributes:
        root: The config root.
        findings: Every finding, suppressed ones included, sorted.
        files: Source files scanned (refused entries not included).
        cached: How many of them were answered from the cache.
        source_lines: The stripped source line of each (path, line) that has a finding, as
            bytes (SARIF fingerprints hash it); refused entries have none.
        outside_root: The absolute location of each reported path outside the config root.
    """

    root: Path
    findings: tuple[Finding, ...]
    files: int
    cached: int
    source_lines: Mapping[tuple[str, int], bytes] = field(default_factory=dict[tuple[str, int], bytes])
    outside_root: Mapping[str, str] = field(default_factory=dict[str, str])


def check_paths(
    paths: Sequence[str | os.PathLike[str]], config: BoundaryConfig, *, include_suppressed: bool = False
) -> list[Finding]:
    """Scan files and directories; return their findings sorted by path, line, column, rule, module.

    The content-hash cache under ``config.cache_dir`` is read and written.

    Args:
        paths: Files and directories to scan instead of ``config.roots``; an empty sequence
            scans the configured roots (those that exist).
        config: The configuration, usually from :func:`load_config`.
        include_suppressed: Also return suppressed findings (their ``suppression`` is set).

    Raises:
        FileNotFoundError: a given path does not exist.
        ValueError: a file given explicitly does not end in ``.py`` or ``.pyi``.
        OSError: a source file or directory cannot be read.
    """
    findings = scan(paths, config).findings
    return [finding for finding in findings if include_suppressed or finding.suppression is None]


def effective_jobs(jobs: int) -> int:
    """The number of worker processes for a configured ``jobs`` (0 means min(CPU count, 8))."""
    return jobs if jobs > 0 else min(os.cpu_count() or 1, MAX_DEFAULT_JOBS)


def scan(
    paths: Sequence[str | os.PathLike[str]], config: BoundaryConfig, *, use_cache: bool = True
) -> ScanReport:
    """Scan like :func:`check_paths`, and also report counts and what the output formats need.

    Args:
        paths: As for :func:`check_paths`.
        config: The configuration.
        use_cache: Read and write the content-hash cache; ``False`` does neither.

    Raises:
        FileNotFoundError: a given path does not exist.
        ValueError: a file given explicitly does not end in ``.py`` or ``.pyi``.
        OSError: a source file or directory cannot be read.
    """
    root = os.path.abspath(config.root)
    walker = _walk(root, paths, config)
    cache = AnalysisCache(Path(walker.cache_location)) if use_cache else None
    batch = _read_sources(walker, _Policies(config), cache)
    cached = _analyze_batch_misses(batch, cache, config.jobs)
    findings, source_lines, outside_root = _collect_findings(batch, config)
    return ScanReport(
        root=Path(root),
        findings=tuple(findings),
        files=len(batch.targets),
        cached=cached,
        source_lines=source_lines,
        outside_root=outside_root,
    )


# ------------------------------------------------------------------ walking


@dataclass(frozen=True, slots=True)
class _Target:
    """An entry to scan: where it is, how it is reported, and its root-relative path if inside.

    ``base`` is the folder module names start from (the scanned root that holds the entry),
    or ``None`` when unknown (a file given alone outside every configured root).
    """

    location: str
    display: str
    relative: str | None
    base: str | None

    def child(self, name: str) -> _Target:
        return _Target(
            location=os.path.join(self.location, name),
            display=_join(self.display, name),
            relative=None if self.relative is None else _join(self.relative, name),
            base=self.base,
        )

    def package(self) -> str | None:
        """The dotted package of a file below ``base``, or ``None`` when it has none."""
        if self.base is None:
            return None
        folder = os.path.relpath(os.path.dirname(self.location), self.base)
        if folder == os.curdir:
            return ""
        parts = folder.split(os.sep)
        return ".".join(parts) if all(part.isidentifier() for part in parts) else None


class _Policies:
    """Builds each file's policy: the forbidden entries, its allow-list and its package."""

    def __init__(self, config: BoundaryConfig) -> None:
        self._forbidden = parse_forbidden(config.forbidden)
        self._allow = config.allow
        self._per_file = [(ExcludeMatcher([glob]), entries) for glob, entries in config.per_file_allow]
        self._adapters = [(f"!{name}", ExcludeMatcher(globs)) for name, globs in config.adapters]
        self._lists: dict[tuple[int, ...], AllowList] = {}
        self._digests: dict[FilePolicy, str] = {}

    def for_target(self, target: _Target) -> FilePolicy:
        relative = target.relative
        matched = tuple(
            index
            for index, (matcher, _) in enumerate(self._per_file)
            if relative is not None and matcher.matches(relative)
        )
        # A host adapter is refused to every file its globs do not name (an exclusion wins).
        refused = tuple(
            -1 - index
            for index, (_, matcher) in enumerate(self._adapters)
            if relative is None or not matcher.matches(relative)
        )
        allow = self._lists.get(matched + refused)
        if allow is None:
            entries = [
                *self._allow,
                *(entry for index in matched for entry in self._per_file[index][1]),
                *(self._adapters[-1 - index][0] for index in refused),
            ]
            allow = self._lists[matched + refused] = AllowList(tuple(dict.fromkeys(entries)))
        return FilePolicy(self._forbidden, allow, target.package())

    def digest(self, policy: FilePolicy) -> str:
        digest = self._digests.get(policy)
        if digest is None:
            digest = self._digests[policy] = hashlib.sha256(policy.digest_text().encode()).hexdigest()
        return digest


def _join(parent: str, name: str) -> str:
    return name if parent == "." else f"{parent}/{name}"


def _root_targets(root: str, roots: Sequence[str]) -> list[_Target]:
    targets: list[_Target] = []
    for relative in roots:
        location = os.path.normpath(os.path.join(root, relative))
        # A configured root that does not exist is skipped: load_config already refused a
        # configured one, so this is a default root that the project does not have (yet).
        if os.path.lexists(location):
            posix = PurePath(relative).as_posix()
            targets.append(_Target(location, posix, posix, location))
    return targets


def _is_within(location: str, folder: str) -> bool:
    return location == folder or location.startswith(folder.rstrip(os.sep) + os.sep)


def _explicit_target(root: str, path: str | os.PathLike[str], root_locations: Sequence[str]) -> _Target:
    given = os.fspath(path)
    location = os.path.abspath(given)
    if not os.path.lexists(location):
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", given)
    mode = os.lstat(location).st_mode
    if stat.S_ISREG(mode) and not location.endswith(SOURCE_SUFFIXES):
        raise ValueError(f"{given}: not a Python source file (.py or .pyi)")
    # Module names start at the configured root that holds the path, else at a given folder.
    holders = [folder for folder in root_locations if _is_within(location, folder)]
    base = max(holders, key=len) if holders else location if stat.S_ISDIR(mode) else None
    if _is_within(location, root):
        relative = PurePath(os.path.relpath(location, root)).as_posix()
        return _Target(location, relative, relative, base)
    return _Target(location, PurePath(given).as_posix(), None, base)


class _Walker:
    """Collects the source files under targets, and refused entries, without following links."""

    def __init__(self, exclude: ExcludeMatcher, cache_location: str) -> None:
        self.exclude = exclude
        self.cache_location = os.path.normpath(cache_location)
        self.files: list[_Target] = []
        self.refused: list[tuple[_Target, str]] = []
        self._seen: set[str] = set()

    def _excluded(self, target: _Target) -> bool:
        relative = target.relative
        return relative is not None and relative != "." and self.exclude.matches(relative)

    def _first_visit(self, target: _Target) -> bool:
        if target.location in self._seen:
            return False
        self._seen.add(target.location)
        return True

    def add(self, target: _Target) -> None:
        if self._excluded(target) or not self._first_visit(target):
            return
        mode = os.lstat(target.location).st_mode
        if stat.S_ISDIR(mode):
            self._walk(target)
        elif stat.S_ISREG(mode):
            self.files.append(target)
        else:
            self.refused.append((target, _refusal_kind(mode)))

    def _walk(self, top: _Target) -> None:
        pending = [top]
        while pending:
            directory = pending.pop()
            if directory.location == self.cache_location:
                continue
            with os.scandir(directory.location) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            subdirectories: list[_Target] = []
            for entry in entries:
                target = directory.child(entry.name)
                if self._excluded(target) or not self._first_visit(target):
                    continue
                if entry.is_symlink():
                    self.refused.append((target, "symlink"))
                elif entry.is_dir(follow_symlinks=False):
                    subdirectories.append(target)
                elif entry.is_file(follow_symlinks=False):
                    if entry.name.endswith(SOURCE_SUFFIXES):
                        self.files.append(target)
                    else:
                        kind = _non_source_kind(directory.location, entry.name)
                        if kind is not None:
                            self.refused.append((target, kind))
                else:
                    self.refused.append((target, _refusal_kind(entry.stat(follow_symlinks=False).st_mode)))
            pending.extend(reversed(subdirectories))


def _refusal_kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special"


def _non_source_kind(folder: str, name: str) -> str | None:
    """Why a file that is not source is refused, or ``None`` when it is harmless.

    Bytecode in ``__pycache__`` is what running the sources leaves behind: Python loads it
    only beside its source, and (unless it is an unchecked hash-based file) only when its
    header still matches that source, so it is refused only without one, or when unchecked.
    """
    if name == _TYPED_MARKER:
        return None
    if os.path.basename(folder) == _PYCACHE and name.endswith(".pyc"):
        source = os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")
        try:
            if not stat.S_ISREG(os.lstat(source).st_mode):
                return "sourceless-bytecode"
        except FileNotFoundError:
            return "sourceless-bytecode"
        return "unchecked-bytecode" if _is_unchecked_bytecode(os.path.join(folder, name)) else None
    if name.endswith(_IMPORTABLE_SUFFIXES):
        return "sourceless-bytecode" if name.endswith((".pyc", ".pyo")) else "non-source"
    return None


def _is_unchecked_bytecode(location: str) -> bool:
    """Whether a bytecode file's header says it is hash-based and never checked (PEP 552)."""
    try:
        descriptor = os.open(location, _OPEN_FLAGS)
    except OSError:
        return False  # what cannot be opened here is refused by the import system too
    with open(descriptor, "rb") as stream:
        header = stream.read(_PYC_HEADER_BYTES)
    if len(header) < _PYC_HEADER_BYTES:
        return False  # Python refuses it and compiles the source instead
    flags = int.from_bytes(header[4:8], "little")
    return bool(flags & _PYC_HASH_BASED) and not flags & _PYC_CHECK_SOURCE


def _refusal_finding(path: str, kind: str) -> Finding:
    return Finding(
        path=path, line=1, column=1, module="", form=kind, message=_REFUSAL_MESSAGES[kind], rule="IB003"
    )


class _RefusedEntryError(Exception):
    """The entry turned out not to be a regular file when it was opened."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


_OPEN_FLAGS: Final[int] = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in after the walk must not block the open
    | getattr(os, "O_CLOEXEC", 0)
)


def _read_source(location: str) -> bytes:
    """Read a source file's bytes, refusing what is not (or is no longer) a regular file.

    Raises:
        _RefusedEntryError: the entry is a link or not a regular file.
        OSError: the file cannot be read.
    """
    try:
        descriptor = os.open(location, _OPEN_FLAGS)
    except OSError:
        with contextlib.suppress(OSError):
            mode = os.lstat(location).st_mode
            if not stat.S_ISREG(mode):
                raise _RefusedEntryError(_refusal_kind(mode)) from None
        raise
    with open(descriptor, "rb") as stream:
        mode = os.fstat(stream.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise _RefusedEntryError(_refusal_kind(mode))
        return stream.read()


# ------------------------------------------------------------------ analysis, in-process or in a pool


SourceItem = tuple[bytes, FilePolicy]
"""A file to analyse: its bytes and the policy it is checked against."""


def analyze_batch(items: Sequence[SourceItem]) -> list[FileAnalysis]:
    """Analyse files: raw findings, and suppression comments unless the file is unparsable.

    Runs in the checker's process or in a pool worker.
    """
    # Imported here so that libcst is loaded only when some file misses the cache.
    from harness_import_boundary._analysis import analyze_source  # noqa: PLC0415

    analyses: list[FileAnalysis] = []
    for source, policy in items:
        raw = sorted(analyze_source(source, policy), key=_raw_order)
        # Comments in a file that does not parse would only add noise to its IB004.
        unparsable = any(item.rule == "IB004" for item in raw)
        suppressions = () if unparsable else tuple(parse_suppressions(source))
        analyses.append(FileAnalysis(raw=tuple(raw), suppressions=suppressions))
    return analyses


def _raw_order(item: RawFinding) -> tuple[int, int, str, str, str, str]:
    return (item.line, item.column, item.rule, item.module, item.form, item.message)


def _parser_died() -> FileAnalysis:
    died = RawFinding("IB004", 1, 1, "", PARSER_DIED_FORM, PARSER_DIED_MESSAGE)
    return FileAnalysis(raw=(died,), suppressions=())


_Analyze = Callable[[Sequence[SourceItem]], list[FileAnalysis]]


def analyze_misses(
    items: Sequence[SourceItem], jobs: int, *, analyze: _Analyze = analyze_batch
) -> tuple[list[FileAnalysis], set[int]]:
    """Analyse the files that missed the cache; return their analyses, in order, and which died.

    With one job the files are analysed in this process. Otherwise they go to a process pool
    in chunks, largest files first; when a worker dies (libcst's native parser can overflow
    the C stack), each file of the chunks it took down is analysed again alone, and a file
    that kills its process is reported as IB004.

    Args:
        items: The files' bytes and policies.
        jobs: The configured number of jobs.
        analyze: The per-batch analysis; a module-level function, since the pool pickles it
            by reference (tests substitute one that kills its worker).
    """
    workers = effective_jobs(jobs)
    if workers == 1:
        return analyze(items), set()
    context = _pool_context()
    results: list[FileAnalysis | None] = [None] * len(items)
    chunks = _chunks([len(source) for source, _ in items], workers)
    stranded: list[int] = []
    with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=context) as executor:
        submitted: list[tuple[list[int], Future[list[FileAnalysis]]]] = [
            (chunk, executor.submit(analyze, [items[index] for index in chunk])) for chunk in chunks
        ]
        for chunk, future in submitted:
            try:
                for index, analysis in zip(chunk, future.result(), strict=True):
                    results[index] = analysis
            except BrokenProcessPool:
                stranded.extend(chunk)
    stranded.sort()
    died: set[int] = set()
    rescued = _analyze_alone([items[index] for index in stranded], context, analyze)
    for index, analysis in zip(stranded, rescued, strict=True):
        if analysis is None:
            died.add(index)
        results[index] = _parser_died() if analysis is None else analysis
    return [_present(analysis) for analysis in results], died


def _analyze_alone(
    items: Sequence[SourceItem], context: BaseContext, analyze: _Analyze
) -> list[FileAnalysis | None]:
    """Analyse each file alone in a single-worker process, a fresh one after each death.

    Returns each file's analysis, or ``None`` for a file whose analysis killed its process.
    """
    outcomes: list[FileAnalysis | None] = []
    executor: ProcessPoolExecutor | None = None
    try:
        for item in items:
            if executor is None:
                executor = ProcessPoolExecutor(max_workers=1, mp_context=context)
            try:
                outcomes.append(executor.submit(analyze, [item]).result()[0])
            except BrokenProcessPool:
                outcomes.append(None)
                executor.shutdown(wait=True)
                executor = None
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
    return outcomes


def _chunks(sizes: Sequence[int], workers: int) -> list[list[int]]:
    """Group file indices into chunks of about equal bytes, largest files first.

    Large files travel alone and go out first; small ones are batched, so the pool balances
    the load while paying little per-task overhead.
    """
    order = sorted(range(len(sizes)), key=lambda index: (-sizes[index], index))
    budget = max(1, sum(sizes) // (workers * _CHUNKS_PER_WORKER))
    chunks: list[list[int]] = []
    current: list[int] = []
    current_bytes = 0
    for index in order:
        current.append(index)
        current_bytes += sizes[index]
        if current_bytes >= budget:
            chunks.append(current)
            current, current_bytes = [], 0
    if current:
        chunks.append(current)
    return chunks


def _pool_context() -> BaseContext:
    """A forkserver context preloading the analysis (and libcst) when available, else spawn.

    Plain fork is avoided: the checker may run inside a threaded program, and forked
    children would each import libcst again anyway.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["harness_import_boundary._analysis"])
        return context
    return multiprocessing.get_context("spawn")


def _present(analysis: FileAnalysis | None) -> FileAnalysis:
    assert analysis is not None, "every file is analysed"
    return analysis


# ------------------------------------------------------------------ the steps of a scan


@dataclass
class _Batch:
    """The files of one scan, read: parallel lists, one entry per scanned file."""

    targets: list[_Target] = field(default_factory=list[_Target])
    sources: list[bytes] = field(default_factory=list[bytes])
    policies: list[FilePolicy] = field(default_factory=list[FilePolicy])
    keys: list[str] = field(default_factory=list[str])
    analyses: list[FileAnalysis | None] = field(default_factory=list[FileAnalysis | None])
    refused: list[tuple[_Target, str]] = field(default_factory=list[tuple[_Target, str]])


def _walk(root: str, paths: Sequence[str | os.PathLike[str]], config: BoundaryConfig) -> _Walker:
    walker = _Walker(ExcludeMatcher(config.exclude), os.path.join(root, config.cache_dir))
    root_targets = _root_targets(root, config.roots)
    targets = (
        [_explicit_target(root, path, [target.location for target in root_targets]) for path in paths]
        if paths
        else root_targets
    )
    for target in targets:
        walker.add(target)
    return walker


def _read_sources(walker: _Walker, policies: _Policies, cache: AnalysisCache | None) -> _Batch:
    """Read every walked file, key it by its policy and content, and look it up in the cache."""
    batch = _Batch(refused=list(walker.refused))
    for target in walker.files:
        try:
            source = _read_source(target.location)
        except _RefusedEntryError as refusal:
            batch.refused.append((target, refusal.kind))
            continue
        policy = policies.for_target(target)
        key = cache_key(policies.digest(policy), source)
        batch.targets.append(target)
        batch.sources.append(source)
        batch.policies.append(policy)
        batch.keys.append(key)
        batch.analyses.append(cache.load(key) if cache is not None else None)
    return batch


def _analyze_batch_misses(batch: _Batch, cache: AnalysisCache | None, jobs: int) -> int:
    """Analyse the files the cache did not answer, in place; return how many it answered."""
    misses = [index for index, analysis in enumerate(batch.analyses) if analysis is None]
    if misses:
        items = [(batch.sources[index], batch.policies[index]) for index in misses]
        fresh, died = analyze_misses(items, jobs)
        for position, index in enumerate(misses):
            batch.analyses[index] = fresh[position]
            if cache is not None and position not in died:
                cache.store(batch.keys[index], fresh[position])
    return len(batch.targets) - len(misses)


def _collect_findings(
    batch: _Batch, config: BoundaryConfig
) -> tuple[list[Finding], dict[tuple[str, int], bytes], dict[str, str]]:
    """The sorted findings, the source line of each, and where each outside-root path lives."""
    findings: list[Finding] = []
    source_lines: dict[tuple[str, int], bytes] = {}
    outside_root: dict[str, str] = {}
    for target, kind in batch.refused:
        findings.append(_refusal_finding(target.display, kind))
        if target.relative is None:
            outside_root[target.display] = target.location
    for target, source, maybe_analysis in zip(batch.targets, batch.sources, batch.analyses, strict=True):
        analysis = _present(maybe_analysis)
        file_findings = apply_suppressions(
            target.display, analysis.raw, analysis.suppressions, unverifiable=config.unverifiable
        )
        if not file_findings:
            continue
        findings.extend(file_findings)
        lines = source.splitlines()
        for finding in file_findings:
            text = lines[finding.line - 1] if 0 < finding.line <= len(lines) else b""
            source_lines[(target.display, finding.line)] = text.strip()
        if target.relative is None:
            outside_root[target.display] = target.location
    findings.sort(key=Finding.sort_key)
    return findings, source_lines, outside_root
