"""The output formats (spec §9) and the exit status (spec §10), on hand-built reports."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from harness_import_boundary import RULES, Finding, __version__
from harness_import_boundary._output import (
    SARIF_SCHEMA,
    exit_status,
    fingerprint,
    render,
    render_github,
    render_json,
    render_sarif,
    render_text,
)
from harness_import_boundary._scan import ScanReport

ROOT = Path("/work/repo")
OS = Finding("pkg/a.py", 3, 8, "os", "import", 'host module "os" is outside the Workspace boundary')
EXEC = Finding("pkg/b.py", 5, 1, "", "exec", "exec cannot be verified", rule="IB002", severity="warning")
SUPPRESSED = Finding("pkg/b.py", 7, 8, "io", "import", "io is outside", suppression="reviewed: display only")


def report(*findings: Finding, **extra: Any) -> ScanReport:
    settings: dict[str, Any] = {"root": ROOT, "findings": findings, "files": 4, "cached": 1, **extra}
    return ScanReport(**settings)


SAMPLE = report(
    OS,
    EXEC,
    SUPPRESSED,
    source_lines={
        ("pkg/a.py", 3): b"import os",
        ("pkg/b.py", 5): b"exec(x)",
        ("pkg/b.py", 7): b"import io  # ...",
    },
)


# ------------------------------------------------------------------ text


def test_text_lists_active_findings_then_the_summary() -> None:
    assert render_text(SAMPLE) == (
        'pkg/a.py:3:8: error IB001 [import] host module "os" is outside the Workspace boundary\n'
        "pkg/b.py:5:1: warning IB002 [exec] exec cannot be verified\n"
        "harness-import-boundary: 1 errors, 1 warnings in 4 files (1 cached)\n"
    )


def test_text_of_a_clean_run_is_the_summary_alone() -> None:
    assert render_text(report(files=0, cached=0)) == (
        "harness-import-boundary: 0 errors, 0 warnings in 0 files (0 cached)\n"
    )


# ------------------------------------------------------------------ json


def test_json_has_the_specified_shape_with_suppressed_findings_and_their_reason() -> None:
    document = json.loads(render_json(SAMPLE))

    assert document == {
        "version": 1,
        "tool": {"name": "harness-import-boundary", "version": __version__},
        "root": "/work/repo",
        "summary": {"files": 4, "cached": 1, "errors": 1, "warnings": 1, "suppressed": 1},
        "findings": [
            {
                "path": "pkg/a.py",
                "line": 3,
                "column": 8,
                "rule": "IB001",
                "severity": "error",
                "module": "os",
                "form": "import",
                "message": 'host module "os" is outside the Workspace boundary',
                "suppression": None,
            },
            {
                "path": "pkg/b.py",
                "line": 5,
                "column": 1,
                "rule": "IB002",
                "severity": "warning",
                "module": "",
                "form": "exec",
                "message": "exec cannot be verified",
                "suppression": None,
            },
            {
                "path": "pkg/b.py",
                "line": 7,
                "column": 8,
                "rule": "IB001",
                "severity": "error",
                "module": "io",
                "form": "import",
                "message": "io is outside",
                "suppression": "reviewed: display only",
            },
        ],
    }


def test_json_keys_are_sorted_and_text_stays_utf8() -> None:
    text = render_json(report(Finding("pkg/é.py", 1, 1, "os", "import", "naïve")))

    assert text == json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False, indent=2) + "\n"
    assert "pkg/é.py" in text


# ------------------------------------------------------------------ sarif


def sarif(scan_report: ScanReport) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(render_sarif(scan_report))
    return document


def test_sarif_is_a_2_1_0_log_with_one_run_and_the_six_rules() -> None:
    document = sarif(SAMPLE)

    assert document["$schema"] == SARIF_SCHEMA
    assert SARIF_SCHEMA.endswith("sarif-schema-2.1.0.json")
    assert document["version"] == "2.1.0"
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("harness-import-boundary", __version__)
    assert [rule["id"] for rule in driver["rules"]] == ["IB001", "IB002", "IB003", "IB004", "IB005", "IB006"]
    for entry in driver["rules"]:
        rule = RULES[entry["id"]]
        assert entry == {
            "id": rule.id,
            "name": rule.name,
            "shortDescription": {"text": rule.short_description},
            "fullDescription": {"text": rule.full_description},
            "defaultConfiguration": {"level": rule.default_severity},
            "help": {"text": rule.help},
        }
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": "file:///work/repo/"}}
    assert run["columnKind"] == "unicodeCodePoints"


def test_sarif_results_carry_rule_level_location_and_fingerprint() -> None:
    results = sarif(SAMPLE)["runs"][0]["results"]

    assert results[0] == {
        "ruleId": "IB001",
        "ruleIndex": 0,
        "level": "error",
        "message": {"text": 'host module "os" is outside the Workspace boundary'},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "pkg/a.py", "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": 3, "startColumn": 8},
                }
            }
        ],
        "partialFingerprints": {"harnessImportBoundary/v1": fingerprint(OS, b"import os")},
        "properties": {"module": "os", "form": "import"},
    }
    assert (results[1]["ruleIndex"], results[1]["level"]) == (1, "warning")
    assert "suppressions" not in results[1]


def test_sarif_marks_suppressed_results_in_source_with_the_reason() -> None:
    results = sarif(SAMPLE)["runs"][0]["results"]

    assert results[2]["suppressions"] == [{"kind": "inSource", "justification": "reviewed: display only"}]


def test_fingerprints_hash_rule_path_module_form_and_the_stripped_line() -> None:
    parts = [b"IB001", b"pkg/a.py", b"os", b"import", b"import os"]
    expected = hashlib.sha256(b"".join(len(part).to_bytes(8, "big") + part for part in parts)).hexdigest()

    assert fingerprint(OS, b"import os") == expected
    assert fingerprint(OS, b"import os, io") != expected
    moved = Finding("pkg/a.py", 30, 8, "os", "import", "another message")
    assert fingerprint(moved, b"import os") == expected


def test_sarif_uris_are_percent_encoded_and_outside_paths_are_absolute_file_uris() -> None:
    inside = Finding("pkg/with space%.py", 1, 1, "os", "import", "m")
    outside = Finding("../elsewhere/x.py", 1, 1, "os", "import", "m")
    document = sarif(report(inside, outside, outside_root={"../elsewhere/x.py": "/work/elsewhere/x.py"}))

    locations = [
        result["locations"][0]["physicalLocation"]["artifactLocation"]
        for result in document["runs"][0]["results"]
    ]
    assert locations == [
        {"uri": "pkg/with%20space%25.py", "uriBaseId": "%SRCROOT%"},
        {"uri": "file:///work/elsewhere/x.py"},
    ]


# ------------------------------------------------------------------ github


def test_github_writes_one_workflow_command_per_active_finding_then_the_summary() -> None:
    assert render_github(SAMPLE) == (
        "::error file=pkg/a.py,line=3,col=8,title=IB001 import::"
        'host module "os" is outside the Workspace boundary\n'
        "::warning file=pkg/b.py,line=5,col=1,title=IB002 exec::exec cannot be verified\n"
        "harness-import-boundary: 1 errors, 1 warnings in 4 files (1 cached)\n"
    )


def test_github_escapes_messages_and_properties() -> None:
    finding = Finding("a,b:c%d\n.py", 1, 2, "", "from-import:type-checking", "100% bad\r\nreally, truly: bad")

    (command, _) = render_github(report(finding)).splitlines()

    assert command == (
        "::error file=a%2Cb%3Ac%25d%0A.py,line=1,col=2,title=IB001 from-import%3Atype-checking"
        "::100%25 bad%0D%0Areally, truly: bad"
    )


# ------------------------------------------------------------------ dispatch and exit status


@pytest.mark.parametrize("name", ["text", "json", "sarif", "github"])
def test_render_dispatches_by_format_name(name: str) -> None:
    renderers = {"text": render_text, "json": render_json, "sarif": render_sarif, "github": render_github}

    assert render(SAMPLE, name) == renderers[name](SAMPLE)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        render(SAMPLE, "xml")


@pytest.mark.parametrize(
    ("findings", "status"),
    [
        ((), 0),
        ((EXEC,), 0),
        ((SUPPRESSED,), 0),
        ((EXEC, SUPPRESSED, OS), 1),
        ((Finding("p.py", 1, 1, "", "symlink", "m", rule="IB003"),), 1),
    ],
)
def test_only_active_errors_fail_the_run(findings: tuple[Finding, ...], status: int) -> None:
    assert exit_status(report(*findings)) == status
