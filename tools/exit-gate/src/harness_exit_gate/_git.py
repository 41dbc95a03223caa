"""Hardened git evidence (exit-gate.md §6): every call an argv with a fixed environment."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness_exit_gate._errors import GitCheckError
from harness_exit_gate._report import MAINISH, Change, Origin, Snapshot

__all__ = [
    "RUNS_DIR",
    "BaseInfo",
    "Git",
    "GitState",
    "Link",
    "capture_stable_snapshot",
    "fingerprint_runs",
    "history_changes",
    "is_full_oid",
    "symbolic_links",
]

RUNS_DIR: Final = "tasks/runs/"
_TIMEOUT_S: Final = 120.0
_OUTPUT_CAP: Final = 64 * 1024 * 1024
_OPTIONS: Final = (
    "--no-replace-objects",
    "-c",
    "core.fileMode=true",
    "-c",
    "core.quotePath=false",
    "-c",
    "core.fsmonitor=false",
)
_DIFF_OPTIONS: Final = (
    "--no-ext-diff",
    "--no-textconv",
    "--name-status",
    "-z",
    "--find-renames",
    "--find-copies",
    "--find-copies-harder",
)
# Each commit of the range is diffed too: renames keep both sides, and copies, whose source
# is no write, are left out, so a long history stays cheap (--find-copies-harder reads every
# unmodified file). A merge is compared per path with each parent, so it finds no renames.
_COMMIT_OPTIONS: Final = (*_DIFF_OPTIONS[:4], "--find-renames")
_MERGE_OPTIONS: Final = (*_DIFF_OPTIONS[:4], "--no-renames")
_ROOT_OPERATIONAL: Final = (
    ".venv/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".mypy_cache/",
    ".cache/harness-import-boundary/",
)
_GITLINK: Final = "160000"
_SYMLINK: Final = "120000"
# The empty tree of each object format: the "parent" of a root commit. Git knows both ids
# without the object being stored, so diffing against them writes nothing.
_EMPTY_TREE: Final = {
    "sha1": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "sha256": "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}


def is_full_oid(text: str) -> bool:
    """Whether ``text`` is a full object id: 40 or 64 lowercase hex characters."""
    return len(text) in (40, 64) and all(character in "0123456789abcdef" for character in text)


def _environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    environment.update(GIT_NO_REPLACE_OBJECTS="1", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return environment


def _is_operational(path: str) -> bool:
    if path.startswith(_ROOT_OPERATIONAL):
        return True
    segments = path.rstrip("/").split("/")
    directories = segments if path.endswith("/") else segments[:-1]
    return any(segment == "__pycache__" or segment.endswith(".egg-info") for segment in directories)


def _checked_path(raw: bytes) -> str:
    try:
        path = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GitCheckError("GIT_DIFF_INVALID", f"path is not UTF-8: {raw!r}") from None
    segments = path.rstrip("/").split("/")
    if (
        not path
        or path.startswith("/")
        or ".." in segments
        or ".git" in segments
        or any(ord(character) < 32 or ord(character) == 127 for character in path)
    ):
        raise GitCheckError("GIT_DIFF_INVALID", f"unsafe path in git output: {path!r}")
    return path


class Git:
    """Runs hardened git commands in one working directory."""

    def __init__(self, cwd: str | os.PathLike[str]) -> None:
        self._cwd = os.fspath(cwd)
        self._environment = _environment()

    def run(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        """Run ``git <options> <arguments>``.

        Raises:
            GitCheckError: ``GIT_COMMAND_FAILED`` when git cannot run, times out, exceeds the
                output cap or (with ``check``) exits non-zero.
        """
        argv = ["git", *_OPTIONS, *arguments]
        try:
            completed = subprocess.run(  # noqa: PLW1510 - the status is checked below
                argv,
                cwd=self._cwd,
                env=self._environment,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise GitCheckError("GIT_COMMAND_FAILED", f"git {arguments[0]} could not run: {error}") from None
        if len(completed.stdout) > _OUTPUT_CAP or len(completed.stderr) > _OUTPUT_CAP:
            raise GitCheckError("GIT_COMMAND_FAILED", f"git {arguments[0]} exceeded the output cap")
        if check and completed.returncode != 0:
            detail = completed.stderr.decode("utf-8", "replace").strip()
            raise GitCheckError("GIT_COMMAND_FAILED", f"git {' '.join(arguments)} failed: {detail}")
        return completed

    def text(self, *arguments: str) -> str:
        """The stripped UTF-8 stdout of a successful command."""
        return self.run(*arguments).stdout.decode("utf-8", "replace").strip()

    def optional(self, *arguments: str) -> str | None:
        """The stripped stdout, or ``None`` when the command exits non-zero."""
        completed = self.run(*arguments, check=False)
        return completed.stdout.decode("utf-8", "replace").strip() if completed.returncode == 0 else None


def top_level(cwd: str | os.PathLike[str]) -> str | None:
    """The git top level of ``cwd``'s real path, or ``None`` outside a repository."""
    try:
        return Git(os.path.realpath(cwd)).optional("rev-parse", "--show-toplevel")
    except GitCheckError:
        return None


@dataclass(frozen=True, slots=True)
class GitState:
    """The repository facts that must not move during a run."""

    root: str
    head: str
    branch: str | None
    metadata: str


def _metadata_fingerprint(git: Git) -> str:
    directories = git.text(
        "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"
    ).splitlines()
    digest = hashlib.sha256()
    for directory in sorted(set(directories)):
        base = Path(directory)
        for current, folders, files in os.walk(base):
            relative = Path(current).relative_to(base)
            if relative == Path("."):
                folders[:] = [folder for folder in folders if folder != "objects"]
            folders.sort()
            for name in sorted(files):
                if relative == Path(".") and name in ("index", "index.lock"):
                    continue
                file_path = Path(current) / name
                digest.update(os.fsencode(f"{directory}\0{relative / name}\0"))
                try:
                    if file_path.is_symlink():
                        digest.update(os.fsencode(os.readlink(file_path)))
                    else:
                        digest.update(file_path.read_bytes())
                except OSError:
                    digest.update(b"\0unreadable")
    return digest.hexdigest()


def read_state(git: Git) -> GitState:
    """The current top level, HEAD, branch and metadata fingerprint."""
    return GitState(
        root=git.text("rev-parse", "--show-toplevel"),
        head=git.text("rev-parse", "--verify", "HEAD^{commit}"),
        branch=git.optional("symbolic-ref", "-q", "HEAD"),
        metadata=_metadata_fingerprint(git),
    )


def check_state(git: Git, expected: GitState) -> None:
    """Raise the matching ``GIT_*_CHANGED`` error when the repository moved."""
    current = read_state(git)
    if current.root != expected.root:
        raise GitCheckError("GIT_REPOSITORY_CHANGED", "the repository top level changed during the run")
    if current.head != expected.head:
        raise GitCheckError("GIT_HEAD_CHANGED", "HEAD changed during the run")
    if current.branch != expected.branch:
        raise GitCheckError("GIT_BRANCH_CHANGED", "the checked-out branch changed during the run")
    if current.metadata != expected.metadata:
        raise GitCheckError("GIT_METADATA_CHANGED", "git metadata changed during the run")


@dataclass(frozen=True, slots=True)
class BaseInfo:
    """The trusted base: its ref, its commit and the merge base with HEAD."""

    ref: str
    sha: str
    merge_base: str


def _canonical_mainish(git: Git, revision: str) -> str | None:
    full = git.optional("rev-parse", "--symbolic-full-name", revision)
    if not full:
        return None
    for name in MAINISH:
        if full in (f"refs/heads/{name}", f"refs/remotes/origin/{name}"):
            return full
    return ""


def local_base(git: Git, requested: str | None) -> str:
    """The local base ref: ``--base`` canonicalised, or the first mainish ref discovered.

    Raises:
        GitCheckError: ``GIT_BASE_UNTRUSTED`` or ``GIT_BASE_UNAVAILABLE``.
    """
    if requested is not None:
        if requested.startswith("-"):
            raise GitCheckError("GIT_BASE_UNTRUSTED", f"base {requested!r} is not a ref")
        canonical = _canonical_mainish(git, requested)
        if canonical is None:
            # A commit that exists but is named by an object id or an expression (main~0) is
            # not a trusted ref; only a name that resolves to nothing is unavailable.
            if git.optional("rev-parse", "--verify", "-q", f"{requested}^{{commit}}"):
                message = f"base {requested!r} is a commit, not a mainish branch"
                raise GitCheckError("GIT_BASE_UNTRUSTED", message)
            raise GitCheckError("GIT_BASE_UNAVAILABLE", f"base {requested!r} does not resolve to a ref")
        if not canonical:
            raise GitCheckError("GIT_BASE_UNTRUSTED", f"base {requested!r} is not a mainish branch")
        return canonical
    for name in MAINISH:
        if git.optional("rev-parse", "--verify", "-q", f"refs/heads/{name}^{{commit}}"):
            return f"refs/heads/{name}"
    origin_head = git.optional("symbolic-ref", "-q", "refs/remotes/origin/HEAD")
    if (
        origin_head
        and origin_head.removeprefix("refs/remotes/origin/") in MAINISH
        and git.optional("rev-parse", "--verify", "-q", f"{origin_head}^{{commit}}")
    ):
        # Only a branch that exists: a dangling origin/HEAD falls through to the next rule.
        return origin_head
    for name in MAINISH:
        if git.optional("rev-parse", "--verify", "-q", f"refs/remotes/origin/{name}^{{commit}}"):
            return f"refs/remotes/origin/{name}"
    raise GitCheckError("GIT_BASE_UNAVAILABLE", "no main, master, trunk or develop branch to compare with")


def resolve_base(git: Git, ref: str, head: str) -> BaseInfo:
    """The base commit and its merge base with ``head``.

    Raises:
        GitCheckError: ``GIT_BASE_UNAVAILABLE`` or ``GIT_MERGE_BASE_UNAVAILABLE``.
    """
    sha = git.optional("rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
    if not sha:
        raise GitCheckError("GIT_BASE_UNAVAILABLE", f"base {ref} is not a commit")
    merge_base = git.optional("merge-base", sha, head)
    if not merge_base:
        raise GitCheckError("GIT_MERGE_BASE_UNAVAILABLE", f"no merge base of {ref} and HEAD")
    _check_shared_history_is_trusted(git, ref, sha, head)
    return BaseInfo(ref=ref, sha=sha, merge_base=merge_base)


def trusted_mainline(git: Git) -> tuple[str, ...]:
    """The refs whose history the gate trusts without judging it.

    The upstream's mainish branches (``refs/remotes/origin/<mainish>``) when the repository
    has any, because a task branch cannot move what the server holds; otherwise the local
    mainish branches of a repository without an upstream.
    """
    for prefix in ("refs/remotes/origin/", "refs/heads/"):
        refs = tuple(
            f"{prefix}{name}"
            for name in MAINISH
            if git.optional("rev-parse", "--verify", "-q", f"{prefix}{name}^{{commit}}")
        )
        if refs:
            return refs
    return ()


def _is_ancestor(git: Git, ancestor: str, descendant: str) -> bool:
    completed = git.run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
    if completed.returncode not in (0, 1):
        detail = completed.stderr.decode("utf-8", "replace").strip()
        raise GitCheckError("GIT_COMMAND_FAILED", f"git merge-base --is-ancestor failed: {detail}")
    return completed.returncode == 0


def _check_shared_history_is_trusted(git: Git, ref: str, sha: str, head: str) -> None:
    """Refuse a base that would let the branch's own commits go unjudged.

    The gate judges the commits reachable from HEAD and not from the base; every commit that
    both reach is taken as trusted. Each of those is an ancestor of one of their merge bases,
    so the base is trusted when every merge base lies on the trusted main line. A base that
    the branch chose (one of its own commits, or a mainish ref moved onto it) fails here.

    Raises:
        GitCheckError: ``GIT_BASE_UNTRUSTED``.
    """
    mainline = trusted_mainline(git)
    if not mainline:
        message = f"base {ref} cannot be verified: no main, master, trunk or develop branch"
        raise GitCheckError("GIT_BASE_UNTRUSTED", message)
    for merge_base in git.text("merge-base", "--all", sha, head).split():
        if not any(_is_ancestor(git, merge_base, trusted) for trusted in mainline):
            message = (
                f"base {ref} shares commit {merge_base} with HEAD, and no trusted branch "
                f"({', '.join(mainline)}) contains it: a branch cannot choose its own base"
            )
            raise GitCheckError("GIT_BASE_UNTRUSTED", message)


def check_repository_safety(git: Git) -> None:
    """Refuse replace refs, gitlinks, unsafe index flags and unmerged entries (exit-gate.md §6.2).

    Raises:
        GitCheckError: ``GIT_REPLACE_OBJECTS_UNSAFE``, ``GIT_SUBMODULE_UNSUPPORTED``,
            ``GIT_INDEX_FLAGS_UNSAFE`` or ``GIT_DIFF_INVALID``.
    """
    if git.text("for-each-ref", "--format=%(refname)", "refs/replace/"):
        raise GitCheckError("GIT_REPLACE_OBJECTS_UNSAFE", "the repository has replace refs")
    for entry in git.run("ls-tree", "-r", "-z", "HEAD").stdout.split(b"\0"):
        if entry.startswith(_GITLINK.encode()):
            raise GitCheckError("GIT_SUBMODULE_UNSUPPORTED", "HEAD contains a submodule (gitlink)")
    _index_entries(git)


def _index_entries(git: Git) -> list[tuple[str, str, str]]:
    """Every index entry as ``(mode, blob, path)``, refusing what could hide a change.

    Every snapshot reads the index through here, so flags, conflicts or gitlinks that the test
    command adds are refused after the run just as they are at preflight.
    """
    entries: list[tuple[str, str, str]] = []
    for record in git.run("ls-files", "-s", "-v", "-z").stdout.split(b"\0"):
        if not record:
            continue
        header, _, raw_path = record.partition(b"\t")
        tag, mode, blob, stage_number = header.decode("ascii").split(" ")
        path = _checked_path(raw_path)
        # ls-files -v: a lowercase tag is assume-unchanged, "S" is skip-worktree.
        if tag.islower() or tag == "S":
            raise GitCheckError(
                "GIT_INDEX_FLAGS_UNSAFE", f"the index marks {path} assume-unchanged or skip-worktree"
            )
        if stage_number != "0":
            raise GitCheckError("GIT_DIFF_INVALID", f"unmerged index entry: {path}")
        if mode == _GITLINK:
            raise GitCheckError("GIT_SUBMODULE_UNSUPPORTED", f"the index contains a submodule: {path}")
        entries.append((mode, blob, path))
    return entries


def _name_status(
    git: Git, origin: Origin, *arguments: str, options: tuple[str, ...] = _DIFF_OPTIONS
) -> list[Change]:
    fields = git.run("diff", *options, *arguments).stdout.split(b"\0")
    if fields and not fields[-1]:
        fields.pop()
    changes: list[Change] = []
    index = 0
    while index < len(fields):
        status = fields[index].decode("ascii", "replace")
        if status[:1] in ("R", "C"):
            if index + 2 >= len(fields):
                raise GitCheckError("GIT_DIFF_INVALID", "truncated rename record in git output")
            old_path = _checked_path(fields[index + 1])
            path = _checked_path(fields[index + 2])
            changes.append(Change(origin=origin, status=status, path=path, old_path=old_path))
            index += 3
        else:
            if index + 1 >= len(fields) or status[:1] not in ("A", "M", "D", "T"):
                raise GitCheckError("GIT_DIFF_INVALID", f"unexpected git status {status!r}")
            changes.append(Change(origin=origin, status=status, path=_checked_path(fields[index + 1])))
            index += 2
    return changes


def history_changes(git: Git, base_sha: str) -> list[Change]:
    """What each commit reachable from HEAD and not from the base changed, in commit order.

    The end state alone misses a change that a later commit reverts, so every commit is judged
    on its own. A commit with one parent (or none) is diffed against it. A merge is judged by
    the paths whose merged content differs from *every* parent: that is the merge's own
    change. A path taken unchanged from one parent was judged where it was made (a commit in
    the range), or comes from trusted history, and taking an old trusted version still shows
    in the end-state diff. Changes are ``committed`` entries, each listed once.

    Raises:
        GitCheckError: an unsafe path (``GIT_DIFF_INVALID``) or a failing git command.
    """
    empty_tree = _EMPTY_TREE[git.text("rev-parse", "--show-object-format")]
    records = git.text("rev-list", "--reverse", "--topo-order", "--parents", "HEAD", f"^{base_sha}")
    changes: dict[tuple[str, str, str | None], Change] = {}
    for record in records.splitlines():
        commit, *parents = record.split()
        if len(parents) <= 1:
            parent = parents[0] if parents else empty_tree
            found = _name_status(git, "committed", parent, commit, options=_COMMIT_OPTIONS)
        else:
            per_parent = [
                _name_status(git, "committed", parent, commit, options=_MERGE_OPTIONS) for parent in parents
            ]
            differs_from_all = {change.path for change in per_parent[0]}
            for diff in per_parent[1:]:
                differs_from_all &= {change.path for change in diff}
            found = [change for change in per_parent[0] if change.path in differs_from_all]
        for change in found:
            old_path = change.old_path if isinstance(change.old_path, str) else None
            changes.setdefault((change.status, change.path, old_path), change)
    return list(changes.values())


def _blob_id(data: bytes, sha256: bool) -> str:
    header = f"blob {len(data)}\0".encode()
    return (hashlib.sha256 if sha256 else hashlib.sha1)(header + data).hexdigest()


def _raw_worktree_changes(git: Git, root: str, sha256: bool) -> list[Change]:
    changes: list[Change] = []
    for mode, blob, path in _index_entries(git):
        full = os.path.join(root, path)
        try:
            info = os.lstat(full)
        except FileNotFoundError:
            changes.append(Change(origin="unstaged", status="D", path=path))
            continue
        except OSError as error:
            raise GitCheckError("GIT_COMMAND_FAILED", f"cannot inspect {path}: {error.strerror}") from None
        if stat.S_ISLNK(info.st_mode):
            actual_mode, data = "120000", os.fsencode(os.readlink(full))
        elif stat.S_ISREG(info.st_mode):
            actual_mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
            try:
                data = Path(full).read_bytes()
            except OSError as error:
                raise GitCheckError("GIT_COMMAND_FAILED", f"cannot read {path}: {error.strerror}") from None
        else:
            changes.append(Change(origin="unstaged", status="T", path=path))
            continue
        if (actual_mode == "120000") != (mode == "120000"):
            changes.append(Change(origin="unstaged", status="T", path=path))
        elif actual_mode != mode or _blob_id(data, sha256) != blob:
            changes.append(Change(origin="unstaged", status="M", path=path))
    return changes


def _listed_paths(git: Git, *arguments: str) -> list[str]:
    return [_checked_path(raw) for raw in git.run("ls-files", *arguments).stdout.split(b"\0") if raw]


def _walk_files(root: str, directory: str) -> list[str]:
    found: list[str] = []
    for current, folders, files in os.walk(os.path.join(root, directory)):
        relative = Path(current).relative_to(root).as_posix()
        folders[:] = sorted(folder for folder in folders if not _is_operational(f"{relative}/{folder}/"))
        found.extend(f"{relative}/{name}" for name in sorted(files))
    return found


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return "unreadable"


def fingerprint_runs(root: str) -> dict[str, str]:
    """Paths and sha256 fingerprints of every file under ``tasks/runs/`` (the preflight baseline)."""
    if not os.path.isdir(os.path.join(root, RUNS_DIR)):
        return {}
    return {path: _file_digest(os.path.join(root, path)) for path in _walk_files(root, RUNS_DIR)}


def _ignored_changes(git: Git, root: str, runs_baseline: dict[str, str]) -> list[Change]:
    changes: list[Change] = []
    for entry in _listed_paths(git, "--others", "--ignored", "--exclude-standard", "--directory", "-z"):
        if _is_operational(entry) or entry.startswith(RUNS_DIR) or entry == "tasks/runs":
            continue
        if entry.endswith("/"):
            for path in _walk_files(root, entry):
                if not _is_operational(path):
                    changes.append(Change(origin="untracked", status="!", path=path))
        else:
            changes.append(Change(origin="untracked", status="!", path=entry))
    current = fingerprint_runs(root)
    for path, digest in current.items():
        if runs_baseline.get(path) != digest:
            changes.append(Change(origin="untracked", status="!", path=path))
    for path in runs_baseline:
        if path not in current:
            changes.append(Change(origin="untracked", status="D!", path=path))
    return changes


def capture_snapshot(git: Git, root: str, merge_base: str, runs_baseline: dict[str, str]) -> Snapshot:
    """One capture of every change category (exit-gate.md §6.3).

    Raises:
        GitCheckError: any ``GIT_*`` refusal or failing command.
    """
    sha256 = git.text("rev-parse", "--show-object-format") == "sha256"
    changes: list[Change] = []
    changes += _name_status(git, "committed", merge_base, "HEAD")
    changes += _name_status(git, "staged", "--cached", "HEAD")
    unstaged = _name_status(git, "unstaged")
    seen = {(change.status, change.path) for change in unstaged}
    for change in _raw_worktree_changes(git, root, sha256):
        if (change.status, change.path) not in seen and not (
            change.status == "M" and ("T", change.path) in seen
        ):
            unstaged.append(change)
            seen.add((change.status, change.path))
    changes += unstaged
    changes += [
        Change(origin="untracked", status="?", path=path)
        for path in _listed_paths(git, "--others", "--exclude-standard", "-z")
    ]
    changes += _ignored_changes(git, root, runs_baseline)
    return _snapshot_of(changes)


def _snapshot_of(changes: Sequence[Change]) -> Snapshot:
    policy_paths = {change.path for change in changes}
    policy_paths.update(
        change.old_path
        for change in changes
        if change.status.startswith("R") and isinstance(change.old_path, str)
    )
    return Snapshot(changes=tuple(changes), policy_paths=tuple(sorted(policy_paths)))


def _with_history(snapshot: Snapshot, history: Sequence[Change]) -> Snapshot:
    """The snapshot with each commit's own changes after the end-state ones, each listed once."""
    committed = [change for change in snapshot.changes if change.origin == "committed"]
    others = [change for change in snapshot.changes if change.origin != "committed"]
    known = set(committed)
    return _snapshot_of([*committed, *(change for change in history if change not in known), *others])


def capture_stable_snapshot(
    git: Git, root: str, base: BaseInfo, runs_baseline: dict[str, str], state: GitState
) -> Snapshot:
    """Capture twice, re-checking the repository before, between and after.

    The commit history is read once per stable capture: HEAD is re-checked around it, and the
    commits of a fixed HEAD cannot change.

    Raises:
        GitCheckError: ``GIT_DIFF_UNSTABLE``, a ``GIT_*_CHANGED`` code, or a capture's error.
    """
    check_state(git, state)
    history = history_changes(git, base.sha)
    first = _with_history(capture_snapshot(git, root, base.merge_base, runs_baseline), history)
    check_state(git, state)
    second = _with_history(capture_snapshot(git, root, base.merge_base, runs_baseline), history)
    check_state(git, state)
    if first != second:
        raise GitCheckError("GIT_DIFF_UNSTABLE", "two captures of the changes differ")
    return first


@dataclass(frozen=True)
class Link:
    """A changed path that is a symbolic link in HEAD, the index or the work tree."""

    path: str
    targets: tuple[str, ...]
    """Each target as written: HEAD's, the index's and the work tree's, sorted, each once."""
    lands: str | None
    """The work tree link's real path (through every link on the way), absolute; ``None``
    when the work tree holds no link there."""


def symbolic_links(git: Git, root: str, paths: Collection[str]) -> list[Link]:
    """Which of ``paths`` are symbolic links, and where they point, sorted by path.

    A link's target is its blob (HEAD, index) or ``readlink`` (work tree): what a checkout of
    the change, and what the test command, would follow.

    Raises:
        GitCheckError: a failing git command or an unsafe index entry.
    """
    wanted = set(paths)
    blobs: set[tuple[str, str]] = set()
    for entry in git.run("ls-tree", "-r", "-z", "--full-tree", "HEAD").stdout.split(b"\0"):
        header, _, raw_path = entry.partition(b"\t")
        if header.startswith(_SYMLINK.encode()):
            path = raw_path.decode("utf-8", "replace")
            if path in wanted:
                blobs.add((path, header.decode("ascii").split(" ")[2]))
    blobs.update(
        (path, blob) for mode, blob, path in _index_entries(git) if mode == _SYMLINK and path in wanted
    )
    targets: dict[str, set[str]] = {}
    for path, blob in blobs:
        targets.setdefault(path, set()).add(os.fsdecode(git.run("cat-file", "blob", blob).stdout))
    landing: dict[str, str] = {}
    for path in wanted:
        full = os.path.join(root, path)
        if os.path.islink(full):
            targets.setdefault(path, set()).add(os.readlink(full))
            landing[path] = os.path.realpath(full)
    return [
        Link(path=path, targets=tuple(sorted(found)), lands=landing.get(path))
        for path, found in sorted(targets.items())
    ]
