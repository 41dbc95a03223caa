"""The output formats (spec §9): text, JSON, SARIF 2.1.0 and GitHub workflow commands.

Every renderer is a pure function of a :class:`ScanReport`: the same tree gives the same
bytes whatever the number of jobs and whether the cache was used (except the cached count).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Final
from urllib.parse import quote

from harness_import_boundary._model import RULES, Finding
from harness_import_boundary._scan import TOOL_NAME, ScanReport
from harness_import_boundary._version import __version__

__all__ = [
    "FORMATS",
    "JSON_FORMAT_VERSION",
    "SARIF_SCHEMA",
    "SARIF_SRCROOT",
    "exit_status",
    "fingerprint",
    "render",
    "render_github",
    "render_json",
    "render_sarif",
    "render_text",
    "summary_line",
]

JSON_FORMAT_VERSION: Final = 1
SARIF_SCHEMA: Final = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_SRCROOT: Final = "%SRCROOT%"
_FINGERPRINT_NAME: Final = "harnessImportBoundary/v1"


def _active(report: ScanReport) -> list[Finding]:
    return [finding for finding in report.findings if finding.suppression is None]


def _count(report: ScanReport, severity: str) -> int:
    return sum(1 for finding in _active(report) if finding.severity == severity)


def exit_status(report: ScanReport) -> int:
    """1 when some finding that is not suppressed is an error, else 0 (spec §10)."""
    return 1 if _count(report, "error") else 0


def summary_line(report: ScanReport) -> str:
    """``harness-import-boundary: N errors, M warnings in F files (C cached)``."""
    return (
        f"{TOOL_NAME}: {_count(report, 'error')} errors, {_count(report, 'warning')} warnings "
        f"in {report.files} files ({report.cached} cached)"
    )


def render_text(report: ScanReport) -> str:
    """One line per finding that is not suppressed, then the summary line."""
    lines = [
        f"{finding.path}:{finding.line}:{finding.column}: {finding.severity} {finding.rule} "
        f"[{finding.form}] {finding.message}"
        for finding in _active(report)
    ]
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


def render_json(report: ScanReport) -> str:
    """The JSON document: UTF-8, sorted keys, every finding (suppressed ones with their reason)."""
    active = _active(report)
    document = {
        "version": JSON_FORMAT_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "root": report.root.as_posix(),
        "summary": {
            "files": report.files,
            "cached": report.cached,
            "errors": sum(1 for finding in active if finding.severity == "error"),
            "warnings": sum(1 for finding in active if finding.severity == "warning"),
            "suppressed": len(report.findings) - len(active),
        },
        "findings": [
            {
                "path": finding.path,
                "line": finding.line,
                "column": finding.column,
                "rule": finding.rule,
                "severity": finding.severity,
                "module": finding.module,
                "form": finding.form,
                "message": finding.message,
                "suppression": finding.suppression,
            }
            for finding in report.findings
        ],
    }
    return json.dumps(document, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def fingerprint(finding: Finding, source_line: bytes) -> str:
    """sha256 of the rule, path, module, form and stripped source line, each length-prefixed."""
    digest = hashlib.sha256()
    for part in (
        finding.rule.encode(),
        finding.path.encode("utf-8", "surrogateescape"),
        finding.module.encode(),
        finding.form.encode(),
        source_line,
    ):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _artifact_location(report: ScanReport, path: str) -> dict[str, str]:
    outside = report.outside_root.get(path)
    if outside is not None:
        return {"uri": Path(outside).as_uri()}
    return {"uri": quote(path, safe="/", errors="surrogateescape"), "uriBaseId": SARIF_SRCROOT}


def render_sarif(report: ScanReport) -> str:
    """A SARIF 2.1.0 log with one run, fit for a code-scanning upload."""
    rules = [RULES[rule_id] for rule_id in sorted(RULES)]
    rule_index = {rule.id: index for index, rule in enumerate(rules)}
    results: list[dict[str, object]] = []
    for finding in report.findings:
        result: dict[str, object] = {
            "ruleId": finding.rule,
            "ruleIndex": rule_index[finding.rule],
            "level": finding.severity,
            "message": {"text": finding.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact_location(report, finding.path),
                        "region": {"startLine": finding.line, "startColumn": finding.column},
                    }
                }
            ],
            "partialFingerprints": {
                _FINGERPRINT_NAME: fingerprint(
                    finding, report.source_lines.get((finding.path, finding.line), b"")
                )
            },
            "properties": {"module": finding.module, "form": finding.form},
        }
        if finding.suppression is not None:
            result["suppressions"] = [{"kind": "inSource", "justification": finding.suppression}]
        results.append(result)
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": [
                            {
                                "id": rule.id,
                                "name": rule.name,
                                "shortDescription": {"text": rule.short_description},
                                "fullDescription": {"text": rule.full_description},
                                "defaultConfiguration": {"level": rule.default_severity},
                                "help": {"text": rule.help},
                            }
                            for rule in rules
                        ],
                    }
                },
                "originalUriBaseIds": {SARIF_SRCROOT: {"uri": report.root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: ScanReport) -> str:
    """A workflow command per finding that is not suppressed, then the plain summary line."""
    lines = [
        f"::{finding.severity} file={_escape_property(finding.path)},line={finding.line},"
        f"col={finding.column},title={_escape_property(f'{finding.rule} {finding.form}')}"
        f"::{_escape_data(finding.message)}"
        for finding in _active(report)
    ]
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


FORMATS: Final[dict[str, Callable[[ScanReport], str]]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
}
"""The renderers, by ``--format`` name."""


def render(report: ScanReport, output_format: str) -> str:
    """Render ``report`` in one of :data:`FORMATS`.

    Raises:
        ValueError: ``output_format`` is not one of them.
    """
    renderer = FORMATS.get(output_format)
    if renderer is None:
        raise ValueError(f"unknown format {output_format!r} (choose from {', '.join(FORMATS)})")
    return renderer(report)
