"""``check_paths`` and the scan behind it (spec §2, §11): walking, refused entries, cache, pool."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness_import_boundary import BoundaryConfig, Finding, check_paths
from harness_import_boundary._allow import DEFAULT_ALLOW, AllowList
from harness_import_boundary._model import DEFAULT_FORBIDDEN, FilePolicy, parse_forbidden
from harness_import_boundary._output import render_json, render_sarif
from harness_import_boundary._scan import FileAnalysis, analyze_misses, scan

IMPORT_OS = b"import os\n"
CLEAN = b"x = 1\n"
OS_MESSAGE = 'host module "os" is outside the Workspace boundary'


def os_finding(path: str, line: int = 1) -> Finding:
    return Finding(path, line, 8, "os", "import", OS_MESSAGE)


def refused(path: str, form: str, message: str) -> Finding:
    return Finding(path, 1, 1, "", form, message, rule="IB003")


def write(root: Path, relative: str, content: bytes = IMPORT_OS) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def config_for(root: Path, *, roots: Sequence[str] = ("src",), **changes: object) -> BoundaryConfig:
    config = BoundaryConfig(root=root, roots=tuple(roots), jobs=1)
    return dataclasses.replace(config, **changes)


def paths_of(findings: Sequence[Finding]) -> list[str]:
    return [finding.path for finding in findings]


# ------------------------------------------------------------------ walking


def test_directories_are_walked_and_only_python_sources_are_scanned(tmp_path: Path) -> None:
    write(tmp_path, "src/pkg/b.py")
    write(tmp_path, "src/pkg/a.pyi")
    write(tmp_path, "src/pkg/sub/c.py", CLEAN + IMPORT_OS)
    write(tmp_path, "src/pkg/notes.txt")
    write(tmp_path, "src/pkg/module.pyc")
    write(tmp_path, "src/pkg/empty.py", b"")

    report = scan([], config_for(tmp_path), use_cache=False)

    assert list(report.findings) == [
        os_finding("src/pkg/a.pyi"),
        os_finding("src/pkg/b.py"),
        refused(
            "src/pkg/module.pyc", "sourceless-bytecode", "bytecode without its source file cannot be checked"
        ),
        os_finding("src/pkg/sub/c.py", line=2),
    ]
    assert (report.files, report.cached) == (4, 0)


def test_every_configured_root_is_scanned_and_missing_ones_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "one/a.py")
    write(tmp_path, "two/b.py")

    findings = check_paths([], config_for(tmp_path, roots=("two", "one", "absent"), cache_dir=".c"))

    assert paths_of(findings) == ["one/a.py", "two/b.py"]


def test_symlinks_are_refused_and_never_followed(tmp_path: Path) -> None:
    write(tmp_path, "outside/secret.py")
    write(tmp_path, "src/real.py", CLEAN)
    (tmp_path / "src/file_link.py").symlink_to(tmp_path / "src/real.py")
    (tmp_path / "src/dir_link").symlink_to(tmp_path / "outside")
    (tmp_path / "src/broken.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "src/notes.txt").symlink_to(tmp_path / "src/real.py")

    report = scan([], config_for(tmp_path), use_cache=False)

    link = "symbolic link is never followed"
    assert list(report.findings) == [
        refused("src/broken.py", "symlink", link),
        refused("src/dir_link", "symlink", link),
        refused("src/file_link.py", "symlink", link),
        refused("src/notes.txt", "symlink", link),
    ]
    assert report.files == 1


def test_a_root_that_is_a_link_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "real/a.py")
    (tmp_path / "src").symlink_to(tmp_path / "real")

    assert check_paths([], config_for(tmp_path)) == [
        refused("src", "symlink", "symbolic link is never followed")
    ]


def test_fifos_and_sockets_are_refused_without_blocking(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py", CLEAN)
    os.mkfifo(tmp_path / "src/pipe.py")
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(tmp_path / "src/sock"))
        findings = check_paths([], config_for(tmp_path))
    finally:
        listener.close()

    assert findings == [
        refused("src/pipe.py", "fifo", "named pipe (FIFO) is not a regular file"),
        refused("src/sock", "socket", "socket is not a regular file"),
    ]


def test_excludes_match_root_relative_paths_of_files_and_directories(tmp_path: Path) -> None:
    write(tmp_path, "src/keep.py")
    write(tmp_path, "src/generated/deep/x.py")
    write(tmp_path, "src/stubs/a.pyi")
    (tmp_path / "src/generated/link").symlink_to(tmp_path)

    findings = check_paths([], config_for(tmp_path, exclude=("src/generated", "**/*.pyi")))

    assert paths_of(findings) == ["src/keep.py"]


def test_the_cache_directory_is_not_scanned(tmp_path: Path) -> None:
    write(tmp_path, "a.py")
    write(tmp_path, ".cache/harness-import-boundary/planted.py")

    findings = check_paths([], config_for(tmp_path, roots=(".",)))

    assert paths_of(findings) == ["a.py"]


# ------------------------------------------------------------------ files that are not source

SOURCELESS = "bytecode without its source file cannot be checked"
NON_SOURCE = "file Python could import or load is not source and cannot be checked"


def bytecode(flags: int = 0) -> bytes:
    """A bytecode header (PEP 552): magic, flags, then the source's mtime and size or hash."""
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + bytes(8) + b"\xe3"


def test_bytecode_beside_its_source_and_data_files_are_left_alone(tmp_path: Path) -> None:
    write(tmp_path, "src/pkg/a.py", CLEAN)
    write(tmp_path, "src/pkg/__pycache__/a.cpython-311.pyc", bytecode())
    write(tmp_path, "src/pkg/__pycache__/a.cpython-311.opt-1.pyc", bytecode())
    write(tmp_path, "src/pkg/__pycache__/a.cpython-311-pytest-8.3.2.pyc", bytecode())
    write(tmp_path, "src/pkg/__pycache__/a.cpython-311.pyc.4029874", b"")
    write(tmp_path, "src/pkg/__pycache__/b.cpython-311.pyc", bytecode(flags=0b11))  # hash-based, checked
    write(tmp_path, "src/pkg/b.py", CLEAN)
    write(tmp_path, "src/pkg/py.typed", b"")
    write(tmp_path, "src/pkg/schema.json", b"{}")
    write(tmp_path, "src/pkg/README.md", b"# notes")

    assert check_paths([], config_for(tmp_path)) == []


@pytest.mark.parametrize(
    ("relative", "content", "form", "message"),
    [
        ("src/pkg/a.pyc", bytecode(), "sourceless-bytecode", SOURCELESS),
        ("src/pkg/a.pyo", bytecode(), "sourceless-bytecode", SOURCELESS),
        ("src/pkg/__pycache__/gone.cpython-311.pyc", bytecode(), "sourceless-bytecode", SOURCELESS),
        (
            "src/pkg/__pycache__/a.cpython-311.pyc",
            bytecode(flags=0b01),
            "unchecked-bytecode",
            "bytecode that Python loads without checking its source cannot be checked",
        ),
        ("src/pkg/native.cpython-311-x86_64-linux-gnu.so", b"\x7fELF", "non-source", NON_SOURCE),
        ("src/pkg/native.abi3.so", b"\x7fELF", "non-source", NON_SOURCE),
        ("src/pkg/native.pyd", b"MZ", "non-source", NON_SOURCE),
        ("src/pkg/hook.pth", b"import os\n", "non-source", NON_SOURCE),
        ("src/pkg/bundle.zip", b"PK", "non-source", NON_SOURCE),
        ("src/pkg/app.pyz", b"PK", "non-source", NON_SOURCE),
        ("src/pkg/old.egg", b"PK", "non-source", NON_SOURCE),
        ("src/pkg/script.pyw", b"import os\n", "non-source", NON_SOURCE),
    ],
)
def test_files_python_could_load_without_their_source_are_refused(
    tmp_path: Path, relative: str, content: bytes, form: str, message: str
) -> None:
    write(tmp_path, "src/pkg/a.py", CLEAN)
    write(tmp_path, relative, content)

    assert check_paths([], config_for(tmp_path)) == [refused(relative, form, message)]


def test_a_source_that_is_a_directory_does_not_vouch_for_bytecode(tmp_path: Path) -> None:
    (tmp_path / "src/pkg/a.py").mkdir(parents=True)
    write(tmp_path, "src/pkg/__pycache__/a.cpython-311.pyc", bytecode())

    findings = check_paths([], config_for(tmp_path))

    assert findings == [refused("src/pkg/__pycache__/a.cpython-311.pyc", "sourceless-bytecode", SOURCELESS)]


# ------------------------------------------------------------------ per-file allow-lists and packages


def test_per_file_entries_apply_to_the_files_their_glob_matches(tmp_path: Path) -> None:
    write(tmp_path, "src/app/store.py", b"import sqlite3\n")
    write(tmp_path, "src/app/model.py", b"import sqlite3\n")
    config = config_for(tmp_path, per_file_allow=(("src/app/store.py", ("sqlite3",)),))

    findings = check_paths([], config)

    assert [(finding.path, finding.module) for finding in findings] == [("src/app/model.py", "sqlite3")]


def test_relative_imports_resolve_against_the_package_below_the_root(tmp_path: Path) -> None:
    write(tmp_path, "src/app/__init__.py", CLEAN)
    write(
        tmp_path,
        "src/app/sub/mod.py",
        b"from .. import helper\nfrom ..other import thing\nfrom ... import x\n",
    )
    config = config_for(tmp_path, per_file_allow=(("src/**", ("app.helper",)),))

    findings = check_paths([], config)

    assert [(finding.line, finding.rule, finding.module, finding.form) for finding in findings] == [
        (2, "IB001", "app.other.thing", "from-import"),
        (3, "IB002", "", "relative-import"),
    ]


def test_an_explicit_file_inside_a_root_keeps_its_package(tmp_path: Path) -> None:
    write(tmp_path, "src/app/mod.py", b"from . import helper\n")
    config = config_for(tmp_path, per_file_allow=(("src/**", ("app.*",)),))

    assert check_paths([tmp_path / "src/app/mod.py"], config) == []


def test_a_file_given_alone_outside_the_roots_has_no_package(tmp_path: Path) -> None:
    write(tmp_path, "loose/mod.py", b"from . import helper\n")

    findings = check_paths([tmp_path / "loose/mod.py"], config_for(tmp_path))

    assert [(finding.rule, finding.form) for finding in findings] == [("IB002", "relative-import")]


def test_a_folder_that_is_not_an_identifier_is_no_package(tmp_path: Path) -> None:
    write(tmp_path, "src/not-a-package/mod.py", b"from . import helper\n")

    findings = check_paths([], config_for(tmp_path, per_file_allow=(("src/**", ("helper",)),)))

    assert [(finding.rule, finding.form) for finding in findings] == [("IB002", "relative-import")]


def test_the_cache_key_depends_on_the_allow_list_and_the_package(tmp_path: Path) -> None:
    write(tmp_path, "src/app/mod.py", b"import sqlite3\nfrom . import x\n")
    scan([], config_for(tmp_path))

    allowed = scan([], config_for(tmp_path, allow=(*DEFAULT_ALLOW, "sqlite3", "app.x")))
    (tmp_path / "src/app").rename(tmp_path / "src/renamed")
    moved = scan([], config_for(tmp_path, allow=(*DEFAULT_ALLOW, "sqlite3", "app.x")))

    assert (allowed.cached, allowed.findings) == (0, ())
    assert moved.cached == 0
    assert [finding.module for finding in moved.findings] == ["renamed.x"]


# ------------------------------------------------------------------ explicit paths


def test_explicit_paths_replace_the_roots_and_are_reported_relative_to_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "src/a.py")
    write(tmp_path, "other/b.py")
    write(tmp_path, "other/sub/c.py")
    monkeypatch.chdir(tmp_path / "other")

    findings = check_paths(["b.py", Path("sub")], config_for(tmp_path))

    assert paths_of(findings) == ["other/b.py", "other/sub/c.py"]


def test_overlapping_explicit_paths_scan_each_file_once(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")

    report = scan([tmp_path / "src", tmp_path / "src/a.py", tmp_path], config_for(tmp_path), use_cache=False)

    assert (paths_of(report.findings), report.files) == (["src/a.py"], 1)


def test_a_path_outside_the_root_is_reported_as_given_and_excludes_do_not_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write(tmp_path, "elsewhere/gen/x.py")
    monkeypatch.chdir(root)

    findings = check_paths(["../elsewhere/"], config_for(root, exclude=("**",)))
    absolute = check_paths([tmp_path / "elsewhere/gen/x.py"], config_for(root))

    assert paths_of(findings) == ["../elsewhere/gen/x.py"]
    assert paths_of(absolute) == [(tmp_path / "elsewhere/gen/x.py").as_posix()]


def test_an_explicit_path_that_is_a_link_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")
    (tmp_path / "link.py").symlink_to(tmp_path / "src/a.py")
    (tmp_path / "link.txt").symlink_to(tmp_path / "src/a.py")

    findings = check_paths([tmp_path / "link.py", tmp_path / "link.txt"], config_for(tmp_path))

    assert [(finding.path, finding.rule) for finding in findings] == [
        ("link.py", "IB003"),
        ("link.txt", "IB003"),
    ]


def test_a_missing_explicit_path_is_an_error_before_anything_is_scanned(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")

    with pytest.raises(FileNotFoundError) as caught:
        check_paths([tmp_path / "src", tmp_path / "missing.py"], config_for(tmp_path))

    assert caught.value.filename == str(tmp_path / "missing.py")
    assert not (tmp_path / ".cache").exists()


def test_an_explicit_file_that_is_not_python_source_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "notes.txt")

    with pytest.raises(ValueError, match=r"notes\.txt: not a Python source file"):
        check_paths([tmp_path / "notes.txt"], config_for(tmp_path))


def test_an_unreadable_file_is_an_operational_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = write(tmp_path, "src/locked.py")
    real_open = os.open

    def failing_open(path: str, flags: int, mode: int = 0o777) -> int:
        if path == str(target):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", failing_open)

    with pytest.raises(PermissionError):
        scan([], config_for(tmp_path), use_cache=False)


# ------------------------------------------------------------------ findings and severities


def test_findings_are_sorted_and_suppressed_ones_are_returned_on_request(tmp_path: Path) -> None:
    write(
        tmp_path,
        "src/m.py",
        b"import io\n"
        b"import os  # harness-import-boundary: allow IB001 -- reviewed for os.sep only\n"
        b"exec('1')\n",
    )
    config = config_for(tmp_path, unverifiable="warn")

    active = check_paths([], config)
    everything = check_paths([], config, include_suppressed=True)

    assert [(f.line, f.rule, f.severity) for f in active] == [(1, "IB001", "error"), (3, "IB002", "warning")]
    assert [(f.line, f.suppression) for f in everything] == [
        (1, None),
        (2, "reviewed for os.sep only"),
        (3, None),
    ]


def test_an_unparsable_file_gets_no_suppression_findings(tmp_path: Path) -> None:
    write(
        tmp_path, "src/m.py", b"def (:\n  # harness-import-boundary: allow IB001 -- nothing to allow here\n"
    )

    assert [finding.rule for finding in check_paths([], config_for(tmp_path))] == ["IB004"]


# ------------------------------------------------------------------ the cache


def cache_entries(root: Path) -> list[Path]:
    directory = root / ".cache/harness-import-boundary"
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def test_an_unchanged_tree_is_answered_from_the_cache(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")
    write(tmp_path, "src/b.py", CLEAN)
    config = config_for(tmp_path)

    cold = scan([], config)
    warm = scan([], config)

    assert (cold.cached, warm.cached, warm.files) == (0, 2, 2)
    assert warm.findings == cold.findings
    assert len(cache_entries(tmp_path)) == 2
    assert not list((tmp_path / ".cache/harness-import-boundary").glob(".*"))


def test_a_renamed_unchanged_file_still_hits(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")
    config = config_for(tmp_path)
    scan([], config)
    (tmp_path / "src/a.py").rename(tmp_path / "src/renamed.py")

    report = scan([], config)

    assert (report.cached, paths_of(report.findings)) == (1, ["src/renamed.py"])


def test_the_cache_key_depends_on_the_forbidden_entries(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")
    scan([], config_for(tmp_path))

    # os allowed, so that only the forbidden entries decide (the allow-list would refuse it)
    report = scan([], config_for(tmp_path, forbidden=("subprocess",), allow=(*DEFAULT_ALLOW, "os")))

    assert (report.cached, report.findings) == (0, ())


@pytest.mark.parametrize(
    "damage",
    [
        b"{not json",
        b"",
        b"[]",
        b'{"format": 1}',
        b"\xff\xfe",
    ],
)
def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path: Path, damage: bytes) -> None:
    write(tmp_path, "src/a.py")
    config = config_for(tmp_path)
    expected = scan([], config).findings
    (entry,) = cache_entries(tmp_path)
    entry.write_bytes(damage)

    report = scan([], config)

    assert (report.cached, report.findings) == (0, expected)
    assert json.loads(entry.read_bytes())["findings"] == [["IB001", 1, 8, "os", "import", OS_MESSAGE]]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("version", "0.0.0-other"),
        ("format", 2),
        ("key", "0" * 64),
        ("findings", [["IB001", True, 8, "os", "import", "m"]]),
        ("findings", [["IB999", 1, 8, "os", "import", "m"]]),
        ("findings", [["IB001", 1, 8, "os", "import"]]),
        ("suppressions", [[1, 1, ["IB001"], "reason", 3]]),
        ("suppressions", [[1, 1, "IB001", "reason", None]]),
    ],
)
def test_an_entry_of_another_version_or_shape_is_a_miss(tmp_path: Path, field: str, value: object) -> None:
    write(tmp_path, "src/a.py")
    config = config_for(tmp_path)
    scan([], config)
    (entry,) = cache_entries(tmp_path)
    document = json.loads(entry.read_bytes())
    document[field] = value
    entry.write_text(json.dumps(document), encoding="utf-8")

    report = scan([], config)

    assert report.cached == 0
    assert json.loads(entry.read_bytes())[field] != value


def test_suppression_comments_are_cached_with_the_findings(tmp_path: Path) -> None:
    write(
        tmp_path, "src/a.py", b"import os  # harness-import-boundary: allow IB001 -- reviewed, display only\n"
    )
    config = config_for(tmp_path)

    cold = check_paths([], config, include_suppressed=True)
    warm = scan([], config)

    assert warm.cached == 1
    assert list(warm.findings) == cold
    assert cold[0].suppression == "reviewed, display only"


def test_an_unwritable_cache_directory_warns_once_and_the_run_continues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "src/a.py")
    write(tmp_path, "src/b.py")
    (tmp_path / "blocked").write_text("a file where the cache directory should be", encoding="utf-8")

    findings = check_paths([], config_for(tmp_path, cache_dir="blocked/cache"))

    assert paths_of(findings) == ["src/a.py", "src/b.py"]
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 1
    assert warnings[0].startswith("harness-import-boundary: warning: cannot write the cache in ")


def test_without_the_cache_nothing_is_read_or_written(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")
    config = config_for(tmp_path)
    scan([], config)

    report = scan([], config, use_cache=False)
    fresh = scan([], config_for(tmp_path, cache_dir="fresh"), use_cache=False)

    assert (report.cached, fresh.cached) == (0, 0)
    assert not (tmp_path / "fresh").exists()


def test_a_warm_run_does_not_import_libcst(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")
    program = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from harness_import_boundary import BoundaryConfig
        from harness_import_boundary._scan import scan
        config = BoundaryConfig(root=Path({str(tmp_path)!r}), roots=("src",), jobs=1)
        report = scan([], config)
        print(report.cached, "libcst" in sys.modules)
        """
    )

    outputs = [
        subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]

    assert outputs == ["0 True\n", "1 False\n"]


# ------------------------------------------------------------------ parallelism


@pytest.mark.slow
def test_the_output_is_the_same_whatever_the_number_of_jobs(tmp_path: Path) -> None:
    for index in range(12):
        body = b"import os\n" if index % 3 == 0 else b"x = 1\n" * (index * 50)
        write(tmp_path, f"src/m{index:02}.py", body)
    write(tmp_path, "src/bad.py", b"def (:\n")
    write(tmp_path, "src/sup.py", b"import io  # harness-import-boundary: allow IB001 -- reviewed here\n")

    one = scan([], config_for(tmp_path, jobs=1), use_cache=False)
    two = scan([], config_for(tmp_path, jobs=2))
    warm = scan([], config_for(tmp_path, jobs=2))

    assert two.cached == 0
    assert warm.cached == warm.files == 14
    assert render_json(one) == render_json(two) == render_json(dataclasses.replace(warm, cached=0))
    assert render_sarif(one) == render_sarif(two) == render_sarif(warm)


@pytest.mark.slow
def test_a_file_that_kills_its_worker_is_ib004_and_the_others_are_analysed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pool pickles its function by reference, so the crashing stand-in for the parser
    # lives in a module the workers can import.
    helper = tmp_path / "ib_worker_killer.py"
    helper.write_text(
        textwrap.dedent(
            """
            import os
            import signal
            from harness_import_boundary._scan import analyze_batch

            def analyze_or_die(items):
                if any(b"KILL" in source for source, _ in items):
                    os.kill(os.getpid(), signal.SIGKILL)
                return analyze_batch(items)
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    analyze_or_die = importlib.import_module("ib_worker_killer").analyze_or_die

    sources = [IMPORT_OS, b"# KILL\n", CLEAN, b"import io\n# KILL too\n", IMPORT_OS * 3]
    policy = FilePolicy(parse_forbidden(DEFAULT_FORBIDDEN), AllowList(DEFAULT_ALLOW), "")

    analyses, died = analyze_misses([(source, policy) for source in sources], 2, analyze=analyze_or_die)

    assert died == {1, 3}
    assert [analysis.raw[0].message for analysis in analyses if analysis.raw] == [
        OS_MESSAGE,
        "parser process died",
        "parser process died",
        OS_MESSAGE,
    ]
    assert analyses[2] == FileAnalysis(raw=(), suppressions=())
    assert (analyses[1].raw[0].rule, analyses[1].raw[0].form) == ("IB004", "unparsable-source")
