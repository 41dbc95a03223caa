"""validate, parse_command, the report validators, harness-eval and the public surface."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

import harness_exit_gate
from harness_exit_gate import (
    CommandParseError,
    RunReportError,
    main,
    parse_command,
    validate_report_artifact,
    validate_run_report,
)
from harness_exit_gate._eval_cli import main as eval_main

if TYPE_CHECKING:
    from conftest import Repo, RepoFactory

REPOSITORY = Path(__file__).resolve().parents[3]


def test_the_report_schemas_keep_their_names() -> None:
    assert harness_exit_gate.CURRENT_RUN_REPORT_SCHEMA == "run-report/v2"
    assert harness_exit_gate.RUN_REPORT_SCHEMA == "run-report/v1"
    assert harness_exit_gate.RUN_PREFLIGHT_REPORT_SCHEMA == "run-preflight-report/v1"


def test_repository_manifests_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    paths = sorted(str(path) for path in (REPOSITORY / "tasks").glob("*.yaml"))
    assert main(["validate", *paths]) == 0
    assert 'valid task manifest: m8-workspace-capability-boundary "' in capsys.readouterr().out


def test_validate_reports_every_bad_field_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: Bad_Id\ntitle: yes\nallowed_paths: [ok, /abs]\nextra: 1\n")
    assert main(["validate", str(bad), str(tmp_path / "missing.yaml")]) == 1
    error = capsys.readouterr().err
    for fragment in (
        "invalid task manifest:",
        "id ",
        "title ",
        "allowed_paths.1 ",
        "extra ",
        "goal",
        "<file> ",
    ):
        assert fragment in error


@pytest.mark.parametrize(
    "argv", [[], ["validate"], ["run"], ["run", "x.yaml", "--branch", "tasks/x"], ["run", "x.yaml", "--nope"]]
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "validate" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "argv"),
    [
        ("uv run --frozen pytest", ("uv", "run", "--frozen", "pytest")),
        ('a \'b c\' "d \\" e" f\\ g', ("a", "b c", 'd " e', "f g")),
        ("'' x", ("", "x")),
    ],
)
def test_parse_command_splits_like_a_shell_without_one(text: str, argv: tuple[str, ...]) -> None:
    assert parse_command(text) == argv


@pytest.mark.parametrize(
    "text", ["a;b", "a | b", "a > b", "'a&b'", "`x`", "a\nb", "'open", '"open', "a\\", "   "]
)
def test_parse_command_refuses_shell_syntax_and_malformed_text(text: str) -> None:
    with pytest.raises(CommandParseError) as raised:
        parse_command(text)
    assert raised.value.code == "TEST_COMMAND_INVALID"


def _passed_report(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> dict[str, object]:
    status, report, _ = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0
    return report


def test_report_invariants_catch_each_breach(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _passed_report(repo, capsys, monkeypatch, repos.passing)
    validate_run_report(report)
    breaches: list[tuple[str, object]] = [
        ("branch", "tasks/other"),
        ("status", "failed"),
        ("startedAt", "2026-01-01T00:00:00Z"),
        ("runId", "run-other"),
        ("unknown", 1),
    ]
    for key, value in breaches:
        with pytest.raises(RunReportError, match=r"^invalid run report: "):
            validate_run_report({**report, key: value})
    policy = cast("dict[str, object]", report["policy"])
    with pytest.raises(RunReportError, match="changedPathsOk"):
        validate_run_report({**report, "policy": {**policy, "changedPathsOk": False}})
    tests = cast("dict[str, object]", report["tests"])
    with pytest.raises(RunReportError, match=r"tests\.ok"):
        validate_run_report({**report, "tests": {**tests, "exitCode": 3}})
    deliverables = cast("dict[str, object]", report["deliverables"])
    with pytest.raises(RunReportError, match=r"run\.recorded"):
        validate_run_report({**report, "deliverables": {**deliverables, "reportWritten": False}})
    with pytest.raises(RunReportError, match=r"^invalid report artifact: "):
        validate_report_artifact({**report, "schema": "run-report/v9"})
    assert validate_report_artifact({"schema": "run-report/v1", "anything": True}) == {
        "schema": "run-report/v1",
        "anything": True,
    }


def test_harness_eval_runs_the_repository_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_main(["--root", str(REPOSITORY)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("scenarios passed")
    assert eval_main(["--root", str(REPOSITORY), "kernel-0001-golden"]) == 0
    assert eval_main(["--root", str(REPOSITORY), "dev-tools-0001-golden"]) == 0
    assert "PASS dev-tools-0001-golden" in capsys.readouterr().out
    conversations = ["conversation-0001-steering-golden", "conversation-0001-compaction-golden"]
    assert eval_main(["--root", str(REPOSITORY), *conversations]) == 0
    output = capsys.readouterr().out
    assert "PASS conversation-0001-steering-golden" in output
    assert "PASS conversation-0001-compaction-golden" in output
    assert output.splitlines()[-1] == "2/2 scenarios passed"


def test_harness_eval_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_main(["--root", str(tmp_path)]) == 2
    scenarios = tmp_path / "tasks" / "scenarios"
    scenarios.mkdir(parents=True)
    golden = (REPOSITORY / "tasks" / "scenarios" / "kernel-0001-golden.yaml").read_text()
    (tmp_path / "tasks" / "kernel-0001.yaml").write_text(
        (REPOSITORY / "tasks" / "kernel-0001.yaml").read_text()
    )
    (scenarios / "a.yaml").write_text(golden)
    (scenarios / "b.yaml").write_text(golden.replace("steps: 1,", "steps: 5,"))
    assert eval_main(["--root", str(tmp_path)]) == 1
    output = capsys.readouterr().out
    assert "run.steps: wanted 5, saw 1" in output
    assert output.splitlines()[-1] == "1/2 scenarios passed"
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "nope"}))
    assert eval_main(["--root", str(tmp_path), "a", "--report", str(report)]) == 1
    assert "invalid report artifact" in capsys.readouterr().err
