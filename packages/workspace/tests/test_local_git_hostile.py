"""LocalWorkspace's diff and snapshot on hostile repositories: no program runs, nothing is followed.

Whoever writes into the workspace controls ``.git`` and ``.gitattributes``. These tests build
repositories with real git, then plant configuration, symlinks and layouts an attacker
would, and check through the public API that no program runs, nothing outside the root is
read or written, and refusals are typed.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from workspace_git_repositories import (
    GIT_ENVIRONMENT,
    commit_all,
    folder_state,
    git,
    init,
    workspace_diff,
    workspace_snapshot,
)

from harness_workspace.local import (
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_NOT_A_REPOSITORY,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_SYMLINK_REFUSED,
    LocalWorkspace,
    LocalWorkspaceError,
)

WORKSPACE_GIT_UNSUPPORTED = "WORKSPACE_GIT_UNSUPPORTED"
SYMLINK_CODES = {WORKSPACE_SYMLINK_REFUSED, WORKSPACE_PATH_ESCAPES_ROOT}
CLEAN_CONFIG = b"[core]\n\trepositoryformatversion = 0\n"
# Driver names as a subsection can hold any byte but newline and NUL (git's own rule);
# newlines are exercised in values instead.
HOSTILE_NAMES = (
    b"\xff",
    b"caf\xe9",
    b"a=b",
    b'q"uote',
    b"back\\slash",
    b"semi;#",
    b"sp ace",
    b"tab\t",
    b"evil",
)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = init(tmp_path / "repo")
    (root / "a.txt").write_text("one\n")
    (root / "x.dat").write_text("data\n")
    commit_all(root)
    (root / "a.txt").write_text("one\nmore\n")
    (root / "new.txt").write_text("new\n")
    return root


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "marker"


@pytest.fixture
def evil(tmp_path: Path, marker: Path) -> Path:
    """A program that, if ever run, leaves a marker file (and passes its input through)."""
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    script.chmod(0o755)
    return script


def quoted(value: bytes) -> bytes:
    escaped = (
        value.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n").replace(b"\t", b"\\t")
    )
    return b'"' + escaped + b'"'


def subsection(name: bytes) -> bytes:
    return b'"' + name.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def hostile_config(names: list[bytes], program: bytes, extra: list[tuple[bytes, bytes, bytes]]) -> bytes:
    """A valid git config naming ``program`` in every place git runs one from."""
    parts = [CLEAN_CONFIG]
    parts.append(b"[core]\n\thooksPath = /nonexistent\n")
    for key in (b"fsmonitor", b"pager", b"editor", b"sshCommand", b"askPass", b"gitProxy"):
        parts.append(b"\t%s = %s\n" % (key, quoted(program)))
    parts.append(b"[diff]\n\texternal = %s\n[pager]\n\tdiff = %s\n" % (quoted(program), quoted(program)))
    parts.append(b"[uploadpack]\n\tpackObjectsHook = %s\n" % quoted(program))
    parts.append(b"[credential]\n\thelper = %s\n" % quoted(b"!" + program))
    for name in names:
        parts.append(
            b"[filter %s]\n\tclean = %s\n\tsmudge = %s\n\tprocess = %s\n\trequired = true\n"
            % (subsection(name), quoted(program), quoted(program), quoted(program))
        )
        parts.append(
            b"[diff %s]\n\ttextconv = %s\n\tcommand = %s\n"
            % (subsection(name), quoted(program), quoted(program))
        )
        parts.append(b"[merge %s]\n\tdriver = %s\n" % (subsection(name), quoted(program)))
    for section, key, value in extra:
        parts.append(b"[%s]\n\t%s = %s\n" % (section, key, quoted(value)))
    return b"".join(parts)


def plant_attributes(root: Path, names: list[bytes]) -> None:
    """Give every name that an attribute can spell a file of its own, so each driver is selected."""
    lines: list[bytes] = []
    for number, name in enumerate(names):
        if any(byte in b" \t\r\n\0" for byte in name):
            continue  # attributes are separated by whitespace
        (root / f"file-{number}.txt").write_text(f"content {number}\n")
        lines.append(b"file-%d.txt filter=%s diff=%s merge=%s\n" % (number, name, name, name))
    (root / ".gitattributes").write_bytes(b"".join(lines))


def plant_hooks(root: Path, marker: Path) -> None:
    for hook in (
        "post-index-change",
        "pre-commit",
        "post-checkout",
        "fsmonitor-watchman",
        "reference-transaction",
    ):
        path = root / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\necho hook {hook} >> {marker}\n")
        path.chmod(0o755)


# -- configuration never chooses a program ------------------------------------------


def test_filter_drivers_with_undecodable_names_never_run(repository: Path, evil: Path, marker: Path) -> None:
    names: list[bytes] = list(HOSTILE_NAMES)
    (repository / ".git" / "config").write_bytes(hostile_config(names, os.fsencode(evil), []))
    plant_attributes(repository, names)
    plant_hooks(repository, marker)

    diff = trio.run(workspace_diff, repository)
    first = trio.run(workspace_snapshot, repository)
    second = trio.run(workspace_snapshot, repository)

    assert not marker.exists()
    assert "+more\n" in diff
    assert "+content 0\n" in diff  # the file whose filter is named b"\xff", unfiltered
    assert first.id == second.id
    # The trap is live: plain git in the same repository starts the drivers (and then
    # fails, since the program does not speak the filter protocol).
    subprocess.run(
        ["git", "add", "--all"], cwd=repository, env=GIT_ENVIRONMENT, capture_output=True, check=False
    )
    assert marker.exists()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(
        st.one_of(
            st.sampled_from(HOSTILE_NAMES),
            st.binary(min_size=1, max_size=10).filter(lambda n: b"\0" not in n and b"\n" not in n),
        ),
        min_size=1,
        max_size=4,
    ),
    extra=st.lists(
        st.tuples(
            st.sampled_from(
                [b"core", b"diff", b"filter", b"alias", b"include", b"gpg", b"sequence", b"interactive"]
            ),
            st.from_regex(rb"\A[a-zA-Z][a-zA-Z0-9-]{0,12}\Z"),
            st.binary(max_size=20).filter(lambda value: b"\0" not in value),
        ).filter(lambda entry: entry[0] != b"core" or entry[1].lower() != b"repositoryformatversion"),
        max_size=6,
    ),
)
def test_no_configuration_ever_runs_a_program_or_changes_the_result(
    repository: Path, evil: Path, marker: Path, names: list[bytes], extra: list[tuple[bytes, bytes, bytes]]
) -> None:
    plant_attributes(repository, names)
    plant_hooks(repository, marker)
    config = repository / ".git" / "config"
    config.write_bytes(hostile_config(names, os.fsencode(evil), extra))

    hostile = trio.run(workspace_diff, repository), trio.run(workspace_snapshot, repository).id
    config.write_bytes(CLEAN_CONFIG)
    clean = trio.run(workspace_diff, repository), trio.run(workspace_snapshot, repository).id

    assert not marker.exists()
    assert hostile == clean


# -- nothing outside the root is read or written ------------------------------------


async def test_objects_folder_linked_outside_is_refused_and_nothing_is_written_there(
    repository: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-objects"
    shutil.move(repository / ".git" / "objects", outside)
    (repository / ".git" / "objects").symlink_to(outside)
    before = folder_state(outside)

    for operation in (workspace_diff, workspace_snapshot):
        with pytest.raises(LocalWorkspaceError) as caught:
            await operation(repository)
        assert caught.value.code in SYMLINK_CODES

    assert folder_state(outside) == before


async def test_commondir_pointing_at_another_repository_is_refused(repository: Path, tmp_path: Path) -> None:
    other = init(tmp_path / "other")
    (other / "secret.txt").write_text("the other repository's file\n")
    commit_all(other)
    (repository / ".git" / "commondir").write_text(f"{other / '.git'}\n")

    for operation in (workspace_diff, workspace_snapshot):
        with pytest.raises(LocalWorkspaceError) as caught:
            await operation(repository)
        assert caught.value.code == WORKSPACE_GIT_UNSUPPORTED
        assert "secret" not in caught.value.message


async def test_alternates_pointing_at_another_repository_are_refused(tmp_path: Path) -> None:
    other = init(tmp_path / "other")
    (other / "secret.txt").write_text("the other repository's file\n")
    commit_all(other)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", "--shared", str(other), str(clone))
    assert (clone / ".git" / "objects" / "info" / "alternates").exists()

    for operation in (workspace_diff, workspace_snapshot):
        with pytest.raises(LocalWorkspaceError) as caught:
            await operation(clone)
        assert caught.value.code == WORKSPACE_GIT_UNSUPPORTED


@pytest.mark.parametrize("where", ["HEAD", "packed-refs", "refs/heads/main", "refs", "objects/pack"])
async def test_symlinks_inside_git_are_refused_wherever_they_point(repository: Path, where: str) -> None:
    git(repository, "gc", "--quiet")
    if where == "refs/heads/main":
        head = git(repository, "rev-parse", "HEAD")
        (repository / ".git" / "refs" / "heads" / "main").write_text(head)  # a loose ref again
    target = repository / ".git" / where
    assert target.exists()
    moved = repository / ".git" / f"moved-{where.replace('/', '-')}"
    target.rename(moved)
    target.symlink_to(moved)

    for operation in (workspace_diff, workspace_snapshot):
        with pytest.raises(LocalWorkspaceError) as caught:
            await operation(repository)
        assert caught.value.code in SYMLINK_CODES


@pytest.mark.parametrize(
    "config",
    [
        b"[core]\n\trepositoryformatversion = 1\n[extensions]\n\trefStorage = reftable\n",
        b"[core]\n\trepositoryformatversion = 2\n",
        b"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tunknownExtension = yes\n",
        b"[core]\n\trepositoryformatversion = 0\n[extensions]\n\tobjectFormat = sha256\n",
        b"[core\n",
    ],
)
async def test_formats_the_reader_does_not_know_are_refused(repository: Path, config: bytes) -> None:
    (repository / ".git" / "config").write_bytes(config)

    for operation in (workspace_diff, workspace_snapshot):
        with pytest.raises(LocalWorkspaceError) as caught:
            await operation(repository)
        assert caught.value.code == WORKSPACE_GIT_UNSUPPORTED


async def test_git_that_is_a_symlink_to_another_repository_is_not_a_repository(
    repository: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".git").symlink_to(repository / ".git")

    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace_diff(elsewhere)

    assert caught.value.code == WORKSPACE_NOT_A_REPOSITORY


async def test_head_that_is_a_fifo_is_refused_without_blocking(repository: Path) -> None:
    (repository / ".git" / "HEAD").unlink()
    os.mkfifo(repository / ".git" / "HEAD")

    with trio.fail_after(20), pytest.raises(LocalWorkspaceError) as caught:
        await workspace_diff(repository)

    assert caught.value.code == WORKSPACE_NOT_A_FILE


async def test_work_tree_symlinks_are_recorded_never_followed(repository: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the root\n")
    (repository / "escape").symlink_to(outside)
    (repository / "escape-file").symlink_to(outside / "secret.txt")

    diff = await workspace_diff(repository)

    assert "outside the root" not in diff
    assert "new file mode 120000\n" in diff
    assert f"+{outside}\n\\ No newline at end of file\n" in diff


async def test_untrusted_filemode_and_special_files_do_not_disturb_the_walk(repository: Path) -> None:
    os.mkfifo(repository / "a-fifo")
    unreadable = repository / "sub"
    unreadable.mkdir()
    (unreadable / "f.txt").write_text("f\n")

    workspace = LocalWorkspace(repository)
    try:
        with trio.fail_after(20):
            diff = await workspace.diff()
    finally:
        await workspace.dispose()

    assert "a-fifo" not in diff
    assert "sub/f.txt" in diff
    assert stat.S_ISFIFO((repository / "a-fifo").lstat().st_mode)
