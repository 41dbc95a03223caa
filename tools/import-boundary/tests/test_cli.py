"""The command line (spec §1, §9, §10): exit codes, options and the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness_import_boundary._cli import main

TABLE = '[tool.harness-import-boundary]\nroots = ["src"]\njobs = 1\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a clean module, configured in its pyproject.toml, as the cwd."""
    (tmp_path / "pyproject.toml").write_text(TABLE, encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/clean.py").write_text("x = 1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def add_module(project: Path, name: str, text: str) -> None:
    (project / "src" / name).write_text(text, encoding="utf-8")


def test_a_clean_tree_exits_0_with_the_summary(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check"]) == 0

    assert capsys.readouterr().out == "harness-import-boundary: 0 errors, 0 warnings in 1 files (0 cached)\n"


def test_an_error_finding_exits_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_module(project, "bad.py", "import subprocess\n")

    assert main(["check"]) == 1

    assert capsys.readouterr().out.splitlines() == [
        'src/bad.py:1:8: error IB001 [import] host module "subprocess" is outside the Workspace boundary',
        "harness-import-boundary: 1 errors, 0 warnings in 2 files (0 cached)",
    ]


def test_warnings_and_suppressed_findings_exit_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text(TABLE + 'unverifiable = "warn"\n', encoding="utf-8")
    add_module(project, "dynamic.py", "exec('1')\n")
    add_module(
        project, "reviewed.py", "import os  # harness-import-boundary: allow IB001 -- reviewed: os.sep only\n"
    )

    assert main(["check"]) == 0

    assert "0 errors, 1 warnings in 3 files" in capsys.readouterr().out


def test_paths_replace_the_roots_and_the_format_and_output_options_apply(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "other").mkdir()
    (project / "other/bad.py").write_text("import io\n", encoding="utf-8")

    status = main(
        ["check", "other", "--format", "json", "--output", "report.json", "--no-cache", "--jobs", "1"]
    )

    assert status == 1
    assert capsys.readouterr().out == ""
    document = json.loads((project / "report.json").read_text(encoding="utf-8"))
    assert [finding["path"] for finding in document["findings"]] == ["other/bad.py"]
    assert document["summary"]["files"] == 1
    assert not (project / ".cache").exists()


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github"])
def test_every_format_is_accepted(
    project: Path, output_format: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--format", output_format]) == 0
    assert capsys.readouterr().out.endswith("\n")


def test_an_explicit_config_file_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(TABLE, encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/bad.py").write_text("import shutil\n", encoding="utf-8")

    assert main(["check", "--config", str(tmp_path / "pyproject.toml"), "--no-cache"]) == 1

    assert capsys.readouterr().out.startswith("src/bad.py:1:8: error IB001 [import]")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["check", "--format", "xml"], "invalid choice: 'xml'"),
        (["check", "--colour"], "unrecognized arguments: --colour"),
        (["check", "--jobs", "-1"], "must be an integer >= 0"),
        (["check", "--jobs", "many"], "must be an integer >= 0"),
        ([], "required: COMMAND"),
        (["lint"], "invalid choice: 'lint'"),
    ],
)
def test_usage_errors_exit_2(
    project: Path, arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(arguments) == 2

    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["check", "missing.py"], "missing.py: no such file or directory"),
        (["check", "notes.txt"], "notes.txt: not a Python source file (.py or .pyi)"),
        (["check", "--config", "nope.toml"], "configuration file not found"),
        (["check", "--output", "no/such/dir/report.txt"], "cannot write the report"),
    ],
)
def test_path_and_output_errors_exit_2(
    project: Path, arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "notes.txt").write_text("notes\n", encoding="utf-8")

    assert main(arguments) == 2

    error = capsys.readouterr().err
    assert error.startswith("harness-import-boundary: error: ")
    assert message in error


def test_an_invalid_configuration_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text(TABLE + "colour = 1\n", encoding="utf-8")

    assert main(["check"]) == 2

    assert "[tool.harness-import-boundary] colour: unknown key" in capsys.readouterr().err


def test_an_unreadable_file_exits_2(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = str(project / "src/clean.py")
    real_open = os.open

    def failing_open(path: str, flags: int, mode: int = 0o777) -> int:
        if path == target:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", failing_open)

    assert main(["check", "--no-cache"]) == 2

    assert capsys.readouterr().err == f"harness-import-boundary: error: {target}: Permission denied\n"


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert main(["check", "--help"]) == 0

    out = capsys.readouterr().out
    assert out.startswith("harness-import-boundary ")
    assert "--no-cache" in out


def test_the_installed_console_script_and_the_module_run_the_checker(project: Path) -> None:
    (project / "src/bad.py").write_text("import os\n", encoding="utf-8")
    script = Path(sys.executable).with_name("harness-import-boundary")

    by_script = subprocess.run([str(script), "check", "--format", "github"], capture_output=True, check=False)
    by_module = subprocess.run(
        [sys.executable, "-m", "harness_import_boundary", "check", "--format", "github"],
        capture_output=True,
        check=False,
    )

    assert by_script.returncode == by_module.returncode == 1
    assert by_script.stdout.decode().splitlines() == [
        "::error file=src/bad.py,line=1,col=8,title=IB001 import::"
        'host module "os" is outside the Workspace boundary',
        "harness-import-boundary: 1 errors, 0 warnings in 2 files (0 cached)",
    ]
    assert by_module.stdout.decode().splitlines()[-1] == (
        "harness-import-boundary: 1 errors, 0 warnings in 2 files (2 cached)"
    )


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github"])
def test_a_file_name_that_is_not_utf8_is_reported_without_crashing(
    project: Path, output_format: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open(os.path.join(os.fsencode(project / "src"), b"bad\xff.py"), "wb") as stream:
        stream.write(b"import os\n")

    assert main(["check", "--format", output_format, "--no-cache"]) == 1

    # SARIF percent-encodes the original byte in the URI; the others escape the surrogate.
    expected = "src/bad%FF.py" if output_format == "sarif" else "src/bad\\udcff.py"
    assert expected in capsys.readouterr().out
