"""LocalWorkspace's diff and snapshot on real repositories, checked against real git.

Repositories are built with the real git binary; the workspace then reads them without
running git. Real git on a clean copy is the reference: the same patch text (or at least a
patch that ``git apply`` turns back into the work tree) and the same tree id.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from workspace_git_repositories import (
    EMPTY_TREE,
    clean_copy,
    commit_all,
    folder_state,
    git,
    init,
    reference_diff,
    reference_tree,
    workspace_diff,
    workspace_snapshot,
)

from harness_workspace.local import (
    WORKSPACE_NOT_A_REPOSITORY,
    WORKSPACE_OUTPUT_TOO_LARGE,
    LocalWorkspace,
    LocalWorkspaceError,
    ProcessLimits,
)

FORMATS = ("sha1", "sha256")


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A repository with one commit: ``a.txt`` and ``sub/b.txt``."""
    root = init(tmp_path / "repo")
    (root / "a.txt").write_text("one\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("bee\n")
    commit_all(root)
    return root


async def refused(root: Path) -> list[LocalWorkspaceError]:
    errors: list[LocalWorkspaceError] = []
    workspace = LocalWorkspace(root)
    try:
        for operation in (workspace.diff, workspace.snapshot):
            with pytest.raises(LocalWorkspaceError) as caught:
                await operation()
            errors.append(caught.value)
    finally:
        await workspace.dispose()
    return errors


async def assert_like_git(root: Path, scratch: Path) -> str:
    """The workspace's patch and tree id equal real git's on a clean copy; returns the patch."""
    diff = await workspace_diff(root)
    snapshot = await workspace_snapshot(root)
    assert diff == reference_diff(root, scratch / "diff")
    assert snapshot.id == f"git-tree-{reference_tree(root, scratch / 'tree')}"
    return diff


def files_of(root: Path, leave_out: set[str]) -> dict[str, tuple[int, bytes]]:
    """Every non-folder entry outside ``.git``: its type, owner-execute bit and bytes."""
    return {
        path: (mode & 0o170100, data)
        for path, (mode, data) in folder_state(root).items()
        if not path.startswith(".git/")
        and path != ".git"
        and not stat.S_ISDIR(mode)
        and path not in leave_out
    }


def without_binary_files(patch: str) -> str:
    return "".join(part for part in re.split(r"(?m)^(?=diff --git )", patch) if "\nBinary files " not in part)


def assert_patch_applies(
    root: Path, patch: str, scratch: Path, *, leave_out: frozenset[str] = frozenset()
) -> None:
    """``git apply`` of ``patch`` on a clean checkout of HEAD reproduces the work tree."""
    copy = clean_copy(root, scratch)
    git(copy, "reset", "--quiet", "--hard")
    git(copy, "clean", "--quiet", "-fdx")
    if patch:
        git(copy, "apply", "--whitespace=nowarn", "-", stdin=patch.encode())
    ignored = set(
        filter(None, git(root, "ls-files", "--others", "--ignored", "--exclude-standard", "-z").split("\0"))
    )
    assert files_of(copy, set(leave_out)) == files_of(root, ignored | leave_out)


# -- what counts as a repository ----------------------------------------------------


async def test_directory_without_git_is_not_a_repository(tmp_path: Path) -> None:
    errors = await refused(tmp_path)

    assert [(error.code, error.operation) for error in errors] == [
        (WORKSPACE_NOT_A_REPOSITORY, "diff"),
        (WORKSPACE_NOT_A_REPOSITORY, "snapshot"),
    ]


async def test_directory_inside_a_repository_is_not_one_itself(repository: Path) -> None:
    errors = await refused(repository / "sub")

    assert {error.code for error in errors} == {WORKSPACE_NOT_A_REPOSITORY}


async def test_gitfile_pointing_elsewhere_is_refused(repository: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / ".git").write_text(f"gitdir: {repository / '.git'}\n")

    errors = await refused(tmp_path / "elsewhere")

    assert {error.code for error in errors} == {WORKSPACE_NOT_A_REPOSITORY}


async def test_broken_git_directory_is_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()

    errors = await refused(tmp_path)

    assert {error.code for error in errors} == {WORKSPACE_NOT_A_REPOSITORY}


async def test_git_directory_without_head_is_not_a_repository(repository: Path) -> None:
    (repository / ".git" / "HEAD").unlink()

    errors = await refused(repository)

    assert {error.code for error in errors} == {WORKSPACE_NOT_A_REPOSITORY}


# -- diff and snapshot --------------------------------------------------------------


@pytest.mark.parametrize("object_format", FORMATS)
async def test_empty_repository_has_an_empty_diff_and_the_empty_tree(
    tmp_path: Path, object_format: str
) -> None:
    root = init(tmp_path / "repo", object_format)

    snapshot = await workspace_snapshot(root)

    assert await workspace_diff(root) == ""
    assert snapshot.id == f"git-tree-{EMPTY_TREE[object_format]}"
    assert snapshot.metadata == {
        "adapter": "local",
        "head": None,
        "tree": EMPTY_TREE[object_format],
        "dirty": False,
    }


async def test_before_the_first_commit_every_file_is_new(tmp_path: Path) -> None:
    root = init(tmp_path / "repo")
    (root / "hello.txt").write_text("hello\n")

    diff = await assert_like_git(root, tmp_path)
    snapshot = await workspace_snapshot(root)

    assert diff.startswith("diff --git a/hello.txt b/hello.txt\nnew file mode 100644\n")
    assert diff.endswith("--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+hello\n")
    assert snapshot.metadata is not None
    assert snapshot.metadata["head"] is None
    assert snapshot.metadata["dirty"] is True


async def test_clean_work_tree_has_an_empty_diff_and_head_tree(repository: Path) -> None:
    snapshot = await workspace_snapshot(repository)

    assert await workspace_diff(repository) == ""
    tree = git(repository, "rev-parse", "HEAD^{tree}").strip()
    assert snapshot.id == f"git-tree-{tree}"
    assert snapshot.metadata == {
        "adapter": "local",
        "head": git(repository, "rev-parse", "HEAD").strip(),
        "tree": tree,
        "dirty": False,
    }


async def test_diff_shows_modified_deleted_and_untracked_files_but_not_ignored_ones(
    repository: Path, tmp_path: Path
) -> None:
    (repository / "a.txt").write_text("one\ntwo\n")
    (repository / "sub" / "b.txt").unlink()
    (repository / "new").mkdir()
    (repository / "new" / "c.txt").write_text("sea\n")
    (repository / ".gitignore").write_text("*.log\n")
    (repository / "noise.log").write_text("ignored\n")

    diff = await assert_like_git(repository, tmp_path)

    headers = re.findall(r"^diff --git a/(\S+) b/", diff, flags=re.MULTILINE)
    assert headers == [".gitignore", "a.txt", "new/c.txt", "sub/b.txt"]
    assert "+two\n" in diff
    assert "deleted file mode 100644" in diff
    assert "+sea\n" in diff
    assert "noise.log" not in diff


async def test_diff_larger_than_the_cap_is_an_error_not_a_truncation(repository: Path) -> None:
    (repository / "big.txt").write_text("line\n" * 2000)
    workspace = LocalWorkspace(repository, process_limits=ProcessLimits(max_output_bytes=4096))
    try:
        with pytest.raises(LocalWorkspaceError) as caught:
            await workspace.diff()
    finally:
        await workspace.dispose()

    assert caught.value.code == WORKSPACE_OUTPUT_TOO_LARGE
    assert caught.value.operation == "diff"


async def test_same_content_gives_the_same_id_and_any_change_another(repository: Path) -> None:
    async def snapshot_id() -> str:
        return (await workspace_snapshot(repository)).id

    clean = await snapshot_id()
    assert await snapshot_id() == clean

    os.utime(repository / "a.txt", (0, 0))  # metadata only: same content
    assert await snapshot_id() == clean

    (repository / "a.txt").write_text("changed\n")
    changed = await snapshot_id()
    (repository / "a.txt").write_text("one\n")
    assert await snapshot_id() == clean

    (repository / "untracked.txt").write_text("")
    untracked = await snapshot_id()
    (repository / "untracked.txt").chmod(0o755)
    executable = await snapshot_id()

    assert len({clean, changed, untracked, executable}) == 4


async def test_created_at_is_utc_iso8601_like_the_memory_workspace(repository: Path) -> None:
    snapshot = await workspace_snapshot(repository)

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", snapshot.created_at)


async def test_nothing_in_the_repository_or_work_tree_is_written(repository: Path) -> None:
    (repository / "a.txt").write_text("staged\n")
    git(repository, "add", "a.txt")
    (repository / "a.txt").write_text("staged, then changed again\n")
    (repository / "untracked.txt").write_text("u\n")
    before = folder_state(repository)

    await workspace_diff(repository)
    await workspace_snapshot(repository)

    assert folder_state(repository) == before


# -- equivalence with real git ------------------------------------------------------


def build_rich_history(root: Path) -> None:
    """Two commits covering every kind of entry, then a work tree changed in every way."""
    (root / "code.py").write_text("".join(f"def f{i}():\n    return {i}\n\n" for i in range(40)))
    (root / "no-newline.txt").write_text("first\nlast")
    (root / "binary.dat").write_bytes(b"\x00\x01binary\x00" * 50)
    (root / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "gone.txt").write_text("to be deleted\n")
    (root / "renamed-from.txt").write_text("moving\n" * 5)
    (root / "to-link").write_text("becomes a link\n")
    (root / "was-link").symlink_to("code.py")
    (root / "space name.txt").write_text("spaces\n")
    (root / "caf\u00e9.txt").write_text("accent\n")
    (root / 'quote"back\\slash').write_text("odd\n")
    (root / "tab\there").write_text("tab\n")
    (root / "dir" / "deeper").mkdir(parents=True)
    (root / "dir" / "deeper" / "x.txt").write_text("x\n")
    (root / "ignored-but-tracked.log").write_text("tracked\n")
    (root / "empty").write_text("")
    commit_all(root, "first")
    (root / "code.py").write_text("".join(f"def f{i}():\n    return {i * 2}\n\n" for i in range(40)))
    commit_all(root, "second")
    # the work tree
    text = (
        (root / "code.py").read_text().replace("return 10\n", "return 'ten'\n").replace("def f30", "def g30")
    )
    (root / "code.py").write_text(text + "def added():\n    pass\n")
    (root / "no-newline.txt").write_text("first\nlast\n")
    (root / "binary.dat").write_bytes(b"\x00\x02binary\x00" * 50)
    (root / "script.sh").chmod(0o755)
    (root / "gone.txt").unlink()
    (root / "renamed-from.txt").rename(root / "renamed-to.txt")
    (root / "to-link").unlink()
    (root / "to-link").symlink_to("dir/deeper/x.txt")
    (root / "was-link").unlink()
    (root / "was-link").write_text("now a file\n")
    (root / "space name.txt").write_text("more spaces\n")
    (root / "caf\u00e9.txt").write_text("accent\u00e9\n")
    (root / "new-link").symlink_to("nowhere")
    (root / "dir" / "deeper" / "y.txt").write_text("why\n")
    (root / "empty").write_text("no longer\n")
    (root / "new-empty").write_text("")
    (root / "ignored-but-tracked.log").write_text("tracked, changed\n")
    (root / ".gitignore").write_text("*.log\n!keep.log\nbuild/\n/only-at-root\n**/deep*/*.tmp\n")
    (root / "dir" / ".gitignore").write_text("!*.log\nlocal\n")
    for path in (
        "noise.log",
        "keep.log",
        "dir/kept.log",
        "build/out",
        "dir/build/out",
        "only-at-root",
        "dir/only-at-root",
        "dir/deeper/t.tmp",
        "dir/local",
        "dir/deeper/local",
    ):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"{path}\n")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("excluded-by-info\n")
    (root / "excluded-by-info").write_text("x\n")


@pytest.mark.parametrize("object_format", FORMATS)
@pytest.mark.parametrize("storage", ["loose", "packed"])
async def test_patch_and_tree_equal_real_gits(tmp_path: Path, object_format: str, storage: str) -> None:
    root = init(tmp_path / "repo", object_format)
    build_rich_history(root)
    if storage == "packed":
        git(root, "repack", "-adf", "--quiet")
        git(root, "pack-refs", "--all")
        git(root, "prune-packed")
        assert not list((root / ".git" / "objects").glob("??/*")), "every object is packed"
        assert not (root / ".git" / "refs" / "heads" / "main").exists(), "the branch is a packed ref"

    diff = await assert_like_git(root, tmp_path)

    assert_patch_applies(
        root, without_binary_files(diff), tmp_path / "apply", leave_out=frozenset({"binary.dat"})
    )
    assert "Binary files a/binary.dat and b/binary.dat differ" in diff
    assert 'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"' in diff
    assert "--- a/space name.txt\t\n" in diff
    assert "old mode 100644\nnew mode 100755\n" in diff
    assert "\\ No newline at end of file" in diff
    assert "noise.log" not in diff
    assert "dir/kept.log" in diff
    assert "keep.log" in diff
    assert "ignored-but-tracked.log" in diff
    assert "excluded-by-info" not in diff


async def test_objects_stored_as_deltas_are_read_through_their_chains(tmp_path: Path) -> None:
    root = init(tmp_path / "repo")
    lines = [f"line {i} of a long file that deltas well\n" for i in range(400)]
    for version in range(6):
        # Each commit keeps a shorter file, so git stores the newer, smaller blobs as deltas.
        (root / "shrinking.txt").write_text("".join(lines[: 400 - version * 50]))
        commit_all(root, f"version {version}")
    git(root, "repack", "-adf", "--quiet", "--depth=50", "--window=50")
    (pack_index,) = (root / ".git" / "objects" / "pack").glob("*.idx")
    blob = git(root, "rev-parse", "HEAD:shrinking.txt").strip()
    verify = git(root, "verify-pack", "-v", str(pack_index))
    assert re.search(rf"^{blob} blob\s+\d+ \d+ \d+ [1-9]", verify, flags=re.MULTILINE), (
        "HEAD's blob is a delta"
    )
    (root / "shrinking.txt").write_text("".join(lines[:10]) + "changed\n")

    diff = await assert_like_git(root, tmp_path)

    assert "+changed\n" in diff


async def test_detached_head_and_unborn_branch(repository: Path, tmp_path: Path) -> None:
    first = git(repository, "rev-parse", "HEAD").strip()
    (repository / "a.txt").write_text("two\n")
    commit_all(repository)
    git(repository, "checkout", "--quiet", "--detach", first)
    (repository / "c.txt").write_text("see\n")

    await assert_like_git(repository, tmp_path / "detached")
    assert (await workspace_snapshot(repository)).metadata == {
        "adapter": "local",
        "head": first,
        "tree": reference_tree(repository, tmp_path / "tree"),
        "dirty": True,
    }

    git(repository, "checkout", "--quiet", "--orphan", "fresh")
    diff = await assert_like_git(repository, tmp_path / "orphan")
    assert "new file mode 100644" in diff
    assert "deleted file" not in diff


async def test_submodule_gitlinks_are_recorded_from_head_and_never_entered(tmp_path: Path) -> None:
    inner = init(tmp_path / "inner")
    (inner / "f.txt").write_text("inner\n")
    inner_commit = commit_all(inner)
    root = init(tmp_path / "repo")
    (root / "a.txt").write_text("a\n")
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{inner_commit},sub")
    git(root, "add", "a.txt")
    git(root, "commit", "--quiet", "-m", "with a submodule")
    (root / "sub").mkdir()
    (root / "sub" / "whatever.txt").write_text("never read\n")
    (root / "nested").mkdir()
    init(root / "nested")
    (root / "nested" / "untracked-repository-file").write_text("left out\n")

    diff = await workspace_diff(root)
    snapshot = await workspace_snapshot(root)

    assert diff == ""
    assert snapshot.metadata is not None
    assert snapshot.metadata["dirty"] is False

    (root / "sub" / "whatever.txt").unlink()
    (root / "sub").rmdir()
    diff = await workspace_diff(root)
    assert diff == (
        "diff --git a/sub b/sub\ndeleted file mode 160000\n"
        f"index {inner_commit[:7]}..0000000\n--- a/sub\n+++ /dev/null\n"
        f"@@ -1 +0,0 @@\n-Subproject commit {inner_commit}\n"
    )


async def test_patches_apply_for_many_kinds_of_change(tmp_path: Path) -> None:
    root = init(tmp_path / "repo")
    (root / "a.txt").write_text("".join(f"{i}\n" for i in range(100)))
    (root / "b.txt").write_text("keep\n")
    commit_all(root)
    (root / "a.txt").write_text("".join(f"{i}\n" for i in range(100) if i % 7) + "tail")
    (root / "b.txt").unlink()
    (root / "b.txt").mkdir()
    (root / "b.txt" / "inside").write_text("file became a folder\n")

    diff = await assert_like_git(root, tmp_path)

    assert_patch_applies(root, diff, tmp_path / "apply")


def test_reference_helpers_run_git_without_repository_configuration(repository: Path, tmp_path: Path) -> None:
    with (repository / ".git" / "config").open("a") as config:
        config.write("[alias]\n\tx = !false\n")

    copy = clean_copy(repository, tmp_path / "copy")

    assert "alias" not in (copy / ".git" / "config").read_text()
    assert subprocess.run(["git", "status"], cwd=copy, capture_output=True, check=False).returncode == 0


async def test_abbreviations_grow_where_a_prefix_is_ambiguous_as_gits_do(
    repository: Path, tmp_path: Path
) -> None:
    (repository / "a.txt").write_text("one\nchanged\n")
    new_blob = git(repository, "hash-object", "a.txt").strip()
    old_blob = git(repository, "rev-parse", "HEAD:a.txt").strip()
    for blob in (new_blob, old_blob):
        # A file name git reads as an object sharing 9 hex digits: both must show 10.
        twin = blob[:9] + ("0" if blob[9] != "0" else "1") + blob[10:]
        (repository / ".git" / "objects" / twin[:2]).mkdir(exist_ok=True)
        (repository / ".git" / "objects" / twin[:2] / twin[2:]).write_bytes(b"")

    diff = await assert_like_git(repository, tmp_path)

    assert f"index {old_blob[:10]}..{new_blob[:10]} 100644\n" in diff
