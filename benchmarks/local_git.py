"""Benchmark: LocalWorkspace.diff()/snapshot() (the pure-Python git reader) against the git binary.

Run with ``uv run python benchmarks/local_git.py`` (``--files N --modified M`` to change the
repository). It generates a repository of N files in nested folders (a ``.gitignore`` with a
few patterns, some ignored files), commits it, packs it, modifies M files and adds a few
untracked ones, then times in the same run:

- ``diff()`` against ``git add --all`` into a temporary index plus ``git diff-index --cached
  --patch HEAD`` (what the adapter used to run);
- ``snapshot()`` against ``git add --all`` into a temporary index plus ``git write-tree``;
- the ``.gitignore`` matcher alone, on a pathological file (``**/a*b*c*d*e*f*g*h`` lines
  against long names), to show that its cost grows linearly.

It prints milliseconds per call (best of several) and the ratio reader / git.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from harness_workspace.local import LocalWorkspace
from harness_workspace.local._git.ignore import parse_ignore_file

ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def git(root: Path, *arguments: str, index: str | None = None) -> bytes:
    environment = dict(ENVIRONMENT)
    if index is not None:
        environment["GIT_INDEX_FILE"] = index
    return subprocess.run(
        ["git", *arguments], cwd=root, env=environment, capture_output=True, check=True
    ).stdout


def generate(root: Path, files: int, modified: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    root.mkdir()
    git(root, "init", "--quiet", "--initial-branch=main")
    paths: list[Path] = []
    for number in range(files):
        folder = root / f"pkg{number % 20}" / f"mod{number % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"file{number}.py"
        lines = [
            f"def function_{number}_{line}(value):\n    return value + {rng.randrange(1000)}\n\n"
            for line in range(60)
        ]
        path.write_text("".join(lines))
        paths.append(path)
    (root / ".gitignore").write_text("*.log\nbuild/\n**/cache/*.tmp\n!important.log\n")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "generated")
    git(root, "repack", "-adq")
    git(root, "prune-packed")
    for path in rng.sample(paths, modified):
        text = path.read_text().splitlines(keepends=True)
        text[rng.randrange(len(text))] = "    changed = True\n"
        path.write_text("".join(text))
    for number in range(10):
        (root / f"untracked{number}.py").write_text(f"print({number})\n")
        (root / f"noise{number}.log").write_text("ignored\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"\0" * 1000)


def best_ms(function: Callable[[], object], repeat: int) -> float:
    function()
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best * 1000


async def best_ms_async(function: Callable[[], Awaitable[object]], repeat: int) -> float:
    await function()
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        await function()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def git_diff(root: Path, scratch: Path) -> bytes:
    index = str(scratch / "index")
    if os.path.exists(index):
        os.unlink(index)
    git(root, "read-tree", "HEAD", index=index)
    git(root, "add", "--all", index=index)
    return git(root, "diff-index", "--cached", "--patch", "--no-renames", "HEAD", index=index)


def git_tree(root: Path, scratch: Path) -> bytes:
    index = str(scratch / "index")
    if os.path.exists(index):
        os.unlink(index)
    git(root, "read-tree", "HEAD", index=index)
    git(root, "add", "--all", index=index)
    return git(root, "write-tree", index=index)


def pathological_ignore_ms(patterns: int, names: int, length: int) -> float:
    compiled = parse_ignore_file("".join(f"**/a*b*c*d*e*f*g*h*{i}\n" for i in range(patterns)).encode())
    texts = [b"a" * length + str(i).encode() for i in range(names)]

    def run() -> None:
        for text in texts:
            for pattern in compiled:
                pattern.matches(text)

    return best_ms(run, 3)


async def main() -> None:
    parser = argparse.ArgumentParser(description="Time LocalWorkspace.diff()/snapshot() against git.")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--modified", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "repo"
        scratch = Path(directory) / "scratch"
        scratch.mkdir()
        generate(root, options.files, options.modified)
        workspace = LocalWorkspace(root)
        try:
            ours = await workspace.diff()
            assert ours.encode() == git_diff(root, scratch), "the reader's patch differs from git's"
            snapshot = await workspace.snapshot()
            assert snapshot.id == f"git-tree-{git_tree(root, scratch).decode().strip()}"
            rows = [
                (
                    "diff()",
                    await best_ms_async(workspace.diff, options.repeat),
                    best_ms(lambda: git_diff(root, scratch), options.repeat),
                ),
                (
                    "snapshot()",
                    await best_ms_async(workspace.snapshot, options.repeat),
                    best_ms(lambda: git_tree(root, scratch), options.repeat),
                ),
            ]
        finally:
            await workspace.dispose()
    print(f"repository: {options.files} files, {options.modified} modified, 10 untracked, packed")
    print(f"{'operation':<12}{'reader ms':>12}{'git ms':>10}{'ratio':>8}")
    for name, reader, binary in rows:
        print(f"{name:<12}{reader:>12.1f}{binary:>10.1f}{reader / binary:>8.2f}")
    print("pathological .gitignore (patterns x names of 200 bytes), matcher alone:")
    for patterns, names in ((10, 100), (20, 100), (20, 200)):
        print(f"  {patterns:>3} x {names:<4} {pathological_ignore_ms(patterns, names, 200):>8.1f} ms")


if __name__ == "__main__":
    trio.run(main)
