"""``diff`` and ``snapshot`` of the local workspace, computed with git and never trusting the repository.

Both operations look at the *work tree* as it is now, through a private, temporary index:
the index starts as ``HEAD``'s tree (empty on an unborn branch), ``git add --all`` records
every tracked and every untracked, non-ignored file in it, and then

- :func:`git_diff` prints ``git diff-index --cached --patch <HEAD or empty tree>``: every
  modified, deleted and *untracked* file, as a patch against the last commit (against
  nothing before the first commit). Ignored files are left out; so is a file that is
  ignored and only staged, never committed, because the private index starts from ``HEAD``.
  Binary files appear as ``Binary files … differ``; other bytes that are not UTF-8 are
  replaced (U+FFFD). A patch over ``max_output_bytes`` raises ``WORKSPACE_OUTPUT_TOO_LARGE``.
- :func:`git_snapshot` writes that index as a tree (``git write-tree``). The tree id names the
  work tree's content, so the same files give the same id and any change gives another.

The repository's own index, ``HEAD``, refs and work tree are never modified. Blob and tree
objects for changed files are written into ``.git/objects``, unreachable, as ``git stash
create`` would; ``git gc`` prunes them.

The repository is untrusted: a model can write files, and maybe ``.git/config``, through
other operations, and a view granting only ``diff`` must not become a way to run programs.
Every git process therefore runs through :func:`~harness_workspace._local_process.run_process`
(bounded time and output, whole-group kill) in the root descriptor's directory, with a
scrubbed environment plus:

- ``GIT_DIR=.git`` and ``GIT_WORK_TREE=.``, relative to the root descriptor, and ``.git``
  must be a real directory (not a ``.git`` file or a link): git neither searches parent
  directories nor follows ``core.worktree`` or a gitfile to a repository outside the root.
- No system or global configuration, no terminal prompts, no pager, no optional locks, no
  replace refs, no system attributes; no transport at all (``GIT_ALLOW_PROTOCOL`` empty,
  ``GIT_NO_LAZY_FETCH``), so a partial clone cannot fetch through a configured command.
- Command-line configuration, which outranks the repository's: ``core.fsmonitor=false``,
  ``core.hooksPath=/dev/null`` (``read-tree`` and ``add`` would run ``post-index-change``),
  an empty ``diff.external``; and for every filter driver the repository configures
  (``filter.<name>.*``, listed first with ``git config``), empty ``clean``, ``smudge`` and
  ``process`` commands and ``required=false``, so ``.gitattributes`` cannot start one.
- Plumbing only (``diff-index`` with ``--no-ext-diff --no-textconv``), so no diff driver,
  text conversion or porcelain option of the repository applies.

Not defended: the filter list is read before the commands that would use it, so a
process running concurrently in the workspace could add a driver in between; alternates,
``commondir`` or links inside ``.git`` can make git *read* objects outside the root; and
regular expressions of diff drivers (``xfuncname``) are applied, bounded only by the time
limit. Submodules are recorded as their commit, never entered.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Final

import trio

from harness_workspace._local_errors import (
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    WORKSPACE_GIT_FAILED,
    WORKSPACE_GIT_UNAVAILABLE,
    WORKSPACE_IO_FAILED,
    WORKSPACE_NOT_A_REPOSITORY,
    WORKSPACE_OUTPUT_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace._local_process import FinishedProcess, ProcessLimits, run_process, scrubbed_environment

# The same created_at form as MemoryWorkspace's snapshots: ISO 8601, microseconds, "Z".
from harness_workspace._memory import utc_timestamp
from harness_workspace._types import JsonValue, WorkspaceSnapshot

__all__ = ["git_diff", "git_snapshot"]

_GIT_PROGRAM = "git"
"""The git executable, looked up on the scrubbed ``PATH``."""

_GIT_ENVIRONMENT: Final[Mapping[str, str]] = {
    "GIT_DIR": ".git",
    "GIT_WORK_TREE": ".",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_ALLOW_PROTOCOL": "",
    "GIT_NO_LAZY_FETCH": "1",
}

_HARDENING: Final[tuple[tuple[str, str], ...]] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("diff.external", ""),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("advice.addEmbeddedRepo", "false"),
)

_FILTER_COMMANDS: Final = ("clean", "smudge", "process")
_STDERR_EXCERPT_CHARS: Final = 500


async def git_diff(root_fd: int, *, limits: ProcessLimits) -> str:
    """Return the work tree's changes against ``HEAD`` as a patch, untracked files included.

    Args:
        root_fd: The workspace root, an open directory descriptor; not closed.
        limits: Bounds for every git process; a patch longer than ``max_output_bytes``
            is an error, never silently cut.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_NOT_A_REPOSITORY``, ``WORKSPACE_GIT_UNAVAILABLE``,
            ``WORKSPACE_OUTPUT_TOO_LARGE``, ``WORKSPACE_GIT_FAILED`` or ``WORKSPACE_IO_FAILED``.
    """
    async with _staged_work_tree(root_fd, limits, "diff") as (git, head):
        base = head if head is not None else await git.empty_tree()
        return await git.output(
            "diff-index", "--cached", "--patch", "--no-color", "--no-ext-diff", "--no-textconv", base, "--"
        )


async def git_snapshot(root_fd: int, *, limits: ProcessLimits) -> WorkspaceSnapshot:
    """Return an identifier of the work tree's content: the id of its git tree.

    The metadata holds ``adapter`` (``"local"``), ``head`` (the commit id, or ``None`` before
    the first commit), ``tree`` (the tree id) and ``dirty`` (whether the tree differs from
    ``HEAD``'s). ``created_at`` is UTC ISO 8601 with microseconds and a ``Z``.

    Args:
        root_fd: The workspace root, an open directory descriptor; not closed.
        limits: Bounds for every git process.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_NOT_A_REPOSITORY``, ``WORKSPACE_GIT_UNAVAILABLE``,
            ``WORKSPACE_GIT_FAILED`` or ``WORKSPACE_IO_FAILED``.
    """
    async with _staged_work_tree(root_fd, limits, "snapshot") as (git, head):
        tree = (await git.output("write-tree")).strip()
        base = (
            await git.output("rev-parse", f"{head}^{{tree}}") if head is not None else await git.empty_tree()
        )
    metadata: dict[str, JsonValue] = {
        "adapter": "local",
        "head": head,
        "tree": tree,
        "dirty": tree != base.strip(),
    }
    return WorkspaceSnapshot(id=f"git-tree-{tree}", created_at=utc_timestamp(), metadata=metadata)


class _Git:
    """Runs hardened git commands in one repository for one workspace operation."""

    def __init__(
        self, root_fd: int, limits: ProcessLimits, operation: str, environment: Mapping[str, str]
    ) -> None:
        self._root_fd = root_fd
        self._limits = limits
        self._operation = operation
        self._environment = environment

    def with_settings(self, settings: Iterable[tuple[str, str]], **variables: str) -> _Git:
        """Return a runner with command-line ``settings`` and environment ``variables`` added."""
        environment = {**self._environment, **variables}
        count = int(environment.get("GIT_CONFIG_COUNT", "0"))
        # GIT_CONFIG_KEY_<n> / GIT_CONFIG_VALUE_<n> act like ``-c key=value`` but need no
        # parsing: a driver name containing "=" cannot be misread.
        for key, value in settings:
            environment[f"GIT_CONFIG_KEY_{count}"] = key
            environment[f"GIT_CONFIG_VALUE_{count}"] = value
            count += 1
        environment["GIT_CONFIG_COUNT"] = str(count)
        return _Git(self._root_fd, self._limits, self._operation, environment)

    async def run(self, *arguments: str) -> FinishedProcess:
        """Run ``git arguments`` and return what happened; only failing to start raises."""
        try:
            finished = await run_process(
                self._root_fd,
                (_GIT_PROGRAM, "--no-pager", *arguments),
                budget_ms=self._limits.default_timeout_ms,
                signal=None,
                environment=self._environment,
                limits=self._limits,
                operation=self._operation,
            )
        except LocalWorkspaceError as error:
            if error.code in (WORKSPACE_COMMAND_NOT_FOUND, WORKSPACE_COMMAND_FAILED_TO_START):
                raise LocalWorkspaceError(
                    WORKSPACE_GIT_UNAVAILABLE, f"git could not be run: {error.message}", self._operation
                ) from error
            raise
        command = f"git {arguments[0]}"
        if finished.timed_out:
            raise LocalWorkspaceError(
                WORKSPACE_GIT_FAILED,
                f"{command} timed out after {self._limits.default_timeout_ms} ms",
                self._operation,
            )
        if finished.stdout.truncated:
            raise LocalWorkspaceError(
                WORKSPACE_OUTPUT_TOO_LARGE,
                f"{command} printed more than {self._limits.max_output_bytes} bytes",
                self._operation,
            )
        return finished

    async def output(self, *arguments: str) -> str:
        """Run ``git arguments`` and return its standard output; any failure raises."""
        finished = await self.run(*arguments)
        if finished.exit_code != 0:
            raise self._failure(arguments[0], finished)
        return finished.stdout.text()

    async def head_commit(self) -> str | None:
        """Return the commit ``HEAD`` names, or ``None`` on an unborn branch."""
        finished = await self.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        if finished.exit_code == 1 and not finished.stderr.kept:
            return None
        if finished.exit_code != 0:
            raise self._failure("rev-parse", finished)
        return finished.stdout.text().strip()

    async def empty_tree(self) -> str:
        """Return the id of the empty tree in the repository's hash algorithm."""
        return (await self.output("hash-object", "-t", "tree", "--no-filters", "/dev/null")).strip()

    async def filter_drivers(self) -> list[str]:
        """Return the names of the filter drivers the repository's configuration defines."""
        finished = await self.run("config", "--null", "--get-regexp", r"^filter\.")
        if finished.exit_code == 1 and not finished.stderr.kept:
            return []  # no such key
        if finished.exit_code != 0:
            raise self._failure("config", finished)
        names: set[str] = set()
        for entry in finished.stdout.text().split("\0"):
            key = entry.partition("\n")[0]
            section, _, rest = key.partition(".")
            name, dot, _ = rest.rpartition(".")
            if section == "filter" and dot:
                names.add(name)
        return sorted(names)

    def _failure(self, subcommand: str, finished: FinishedProcess) -> LocalWorkspaceError:
        detail = finished.stderr.text().strip()[:_STDERR_EXCERPT_CHARS]
        if "not a git repository" in detail:
            return LocalWorkspaceError(
                WORKSPACE_NOT_A_REPOSITORY, f"not a git repository: {detail}", self._operation
            )
        return LocalWorkspaceError(
            WORKSPACE_GIT_FAILED,
            f"git {subcommand} exited with {finished.exit_code}: {detail}",
            self._operation,
        )


@contextlib.asynccontextmanager
async def _staged_work_tree(
    root_fd: int, limits: ProcessLimits, operation: str
) -> AsyncGenerator[tuple[_Git, str | None]]:
    """Yield a hardened runner whose private index holds the work tree, and ``HEAD``'s commit."""
    await trio.to_thread.run_sync(_require_git_directory, root_fd, operation)
    directory = await trio.to_thread.run_sync(functools.partial(tempfile.mkdtemp, prefix="harness-git-"))
    try:
        git = _Git(root_fd, limits, operation, scrubbed_environment(_GIT_ENVIRONMENT)).with_settings(
            _HARDENING, GIT_INDEX_FILE=os.path.join(directory, "index")
        )
        drivers = await git.filter_drivers()
        git = git.with_settings(
            [(f"filter.{name}.{command}", "") for name in drivers for command in _FILTER_COMMANDS]
            + [(f"filter.{name}.required", "false") for name in drivers]
        )
        head = await git.head_commit()
        if head is not None:
            await git.output("read-tree", head)
        await git.output("add", "--all")
        yield git, head
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, directory, ignore_errors=True))


def _require_git_directory(root_fd: int, operation: str) -> None:
    try:
        status = os.stat(".git", dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise LocalWorkspaceError(
            WORKSPACE_NOT_A_REPOSITORY, "the workspace root has no .git directory", operation
        ) from None
    except OSError as error:
        raise LocalWorkspaceError(
            WORKSPACE_IO_FAILED, f"cannot inspect the root's .git: {error.strerror}", operation
        ) from error
    if not stat.S_ISDIR(status.st_mode):
        # A .git file or link may point at a repository outside the root.
        raise LocalWorkspaceError(
            WORKSPACE_NOT_A_REPOSITORY, "the root's .git is not a directory (a gitfile or a link)", operation
        )
