"""Suppression comments (spec §7): parsing with tokenize, and matching them to findings."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_import_boundary import Finding
from harness_import_boundary._model import RawFinding
from harness_import_boundary._suppress import SuppressionComment, apply_suppressions, parse_suppressions

ALLOW = "# harness-import-boundary: allow"
REASON = "reviewed: reads os.sep only"


def comment(line: int, column: int, rules: tuple[str, ...], reason: str = REASON) -> SuppressionComment:
    return SuppressionComment(line=line, column=column, rules=rules, reason=reason)


def invalid(line: int, column: int, error: str) -> SuppressionComment:
    return SuppressionComment(line=line, column=column, error=error)


def raw(rule: str, line: int, column: int = 1, module: str = "os", form: str = "import") -> RawFinding:
    return RawFinding(rule, line, column, module, form, f"{rule} message")


# ------------------------------------------------------------------ parsing


def test_a_well_formed_comment_is_parsed_with_its_position_rules_and_trimmed_reason() -> None:
    source = f"x = 1\nimport os  {ALLOW} IB001 --   {REASON}   \n".encode()

    assert parse_suppressions(source) == [comment(2, 12, ("IB001",))]


@pytest.mark.parametrize("rules", ["IB001,IB002", "IB001, IB002", " IB001 ,IB002,IB001"])
def test_several_rules_may_be_listed(rules: str) -> None:
    source = f"{ALLOW} {rules} -- {REASON}\n".encode()

    assert parse_suppressions(source) == [comment(1, 1, ("IB001", "IB002"))]


def test_the_directive_may_follow_another_tools_directive_in_the_same_comment() -> None:
    source = f"import os  # noqa: F401  {ALLOW} IB001 -- {REASON}\n".encode()

    assert parse_suppressions(source) == [comment(1, 12, ("IB001",))]


def test_text_inside_strings_and_docstrings_is_never_a_comment() -> None:
    source = (
        f'"""Module.\n\n{ALLOW} IB001 -- {REASON}\n"""\n'
        f"TEXT = '{ALLOW} IB001 -- {REASON}'\n"
        f"OTHER = f'{{TEXT}} {ALLOW} nonsense'\n"
    ).encode()

    assert parse_suppressions(source) == []


def test_ordinary_comments_are_ignored() -> None:
    source = (
        b"# harness-import-boundary checks this file\n# see harness-import-boundary: docs\nx = 1  # fine\n"
    )

    assert parse_suppressions(source) == []


def test_columns_count_characters_in_the_declared_encoding() -> None:
    source = f"# -*- coding: latin-1 -*-\nx = 'é'  {ALLOW} IB002 -- {REASON}\n".encode("latin-1")

    assert parse_suppressions(source) == [comment(2, 10, ("IB002",))]


def test_a_reason_of_exactly_ten_characters_is_enough() -> None:
    assert parse_suppressions(f"{ALLOW} IB001 -- 0123456789\n".encode()) == [
        comment(1, 1, ("IB001",), "0123456789")
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            f"# harness-import-boundary: IB001 -- {REASON}",
            "expected 'allow' after 'harness-import-boundary:'",
        ),
        (f"# harness-import-boundary: allowIB001 -- {REASON}", "expected 'allow'"),
        (f"{ALLOW} IB001 {REASON}", "missing '--' before the reason"),
        (f"{ALLOW} IB001", "missing '--' before the reason"),
        (f"{ALLOW} -- {REASON}", "missing rule id"),
        (f"{ALLOW} IB001,,IB002 -- {REASON}", "missing rule id"),
        (f"{ALLOW} IB009 -- {REASON}", "unknown rule 'IB009'"),
        (f"{ALLOW} ib001 -- {REASON}", "unknown rule 'ib001'"),
        (f"{ALLOW} IB001 IB002 -- {REASON}", "unknown rule 'IB001 IB002'"),
        (f"{ALLOW} IB003 -- {REASON}", "rule IB003 cannot be suppressed"),
        (f"{ALLOW} IB001,IB004 -- {REASON}", "rule IB004 cannot be suppressed"),
        (f"{ALLOW} IB005 -- {REASON}", "rule IB005 cannot be suppressed"),
        (f"{ALLOW} IB006 -- {REASON}", "rule IB006 cannot be suppressed"),
        (f"{ALLOW} IB001 --", "missing reason after '--'"),
        (f"{ALLOW} IB001 --    ", "missing reason after '--'"),
        (f"{ALLOW} IB001 --  012345678  ", "reason must be at least 10 characters, got 9"),
    ],
)
def test_malformed_comments_are_reported_with_the_problem(text: str, error: str) -> None:
    (parsed,) = parse_suppressions(f"import os  {text}\n".encode())

    assert (parsed.line, parsed.column, parsed.rules, parsed.reason) == (1, 12, (), "")
    assert parsed.error is not None
    assert error in parsed.error


@pytest.mark.parametrize(
    "source",
    [
        b'x = """never closed\n# harness-import-boundary: allow IB001 -- reason long enough\n',
        b"# -*- coding: no-such-codec -*-\n",
        b"x = 1\n\xff\xfe\n",
        b"def f():\n        return 1\n    return 2\n",
        b"x = (\n",
    ],
)
def test_sources_that_cannot_be_tokenized_have_no_comments(source: bytes) -> None:
    assert parse_suppressions(source) == []


@given(st.binary(max_size=200))
def test_parsing_never_raises(source: bytes) -> None:
    parse_suppressions(source)


@given(st.text(max_size=80))
def test_parsing_a_comment_of_any_text_never_raises(text: str) -> None:
    parse_suppressions(f"{ALLOW} {text}\n".encode())


# ------------------------------------------------------------------ applying


def apply(
    findings: list[RawFinding],
    comments: list[SuppressionComment],
    unverifiable: Literal["error", "warn"] = "error",
) -> list[Finding]:
    return apply_suppressions("pkg/m.py", findings, comments, unverifiable=unverifiable)


def test_a_comment_suppresses_the_named_rule_on_its_own_line_with_its_reason() -> None:
    findings = apply([raw("IB001", 3, 8), raw("IB001", 4, 8)], [comment(3, 12, ("IB001",))])

    assert findings == [
        Finding("pkg/m.py", 3, 8, "os", "import", "IB001 message", "IB001", "error", REASON),
        Finding("pkg/m.py", 4, 8, "os", "import", "IB001 message", "IB001", "error", None),
    ]


def test_a_comment_suppresses_every_matching_finding_on_its_line() -> None:
    findings = apply(
        [raw("IB001", 1, 8), raw("IB002", 1, 20, "", "exec"), raw("IB001", 1, 30, "io")],
        [comment(1, 40, ("IB001", "IB002"))],
    )

    assert [finding.suppression for finding in findings] == [REASON, REASON, REASON]


def test_a_comment_for_another_rule_suppresses_nothing_and_is_unused() -> None:
    findings = apply([raw("IB001", 2, 8)], [comment(2, 12, ("IB002",))])

    assert findings == [
        Finding("pkg/m.py", 2, 8, "os", "import", "IB001 message", "IB001", "error", None),
        Finding(
            "pkg/m.py",
            2,
            12,
            "",
            "suppression",
            "suppression comment matches no IB002 finding on its line",
            "IB006",
            "warning",
        ),
    ]


def test_a_comment_that_is_partly_used_is_not_reported() -> None:
    findings = apply([raw("IB001", 2, 8)], [comment(2, 12, ("IB001", "IB002"))])

    assert [finding.rule for finding in findings] == ["IB001"]


def test_an_invalid_comment_is_an_error_and_the_findings_on_its_line_stand() -> None:
    findings = apply([raw("IB001", 5, 8)], [invalid(5, 12, "missing '--' before the reason")])

    assert findings == [
        Finding("pkg/m.py", 5, 8, "os", "import", "IB001 message", "IB001", "error", None),
        Finding(
            "pkg/m.py",
            5,
            12,
            "",
            "suppression",
            "invalid suppression comment: missing '--' before the reason",
            "IB005",
            "error",
        ),
    ]


@pytest.mark.parametrize("rule", ["IB003", "IB004", "IB005", "IB006"])
def test_rules_that_are_not_suppressible_are_never_suppressed(rule: str) -> None:
    forged = SuppressionComment(line=1, column=20, rules=(rule,), reason=REASON)

    findings = apply([raw(rule, 1, 1, "", "x")], [forged])

    assert [(finding.rule, finding.suppression) for finding in findings] == [(rule, None), ("IB006", None)]


def test_unverifiable_findings_are_warnings_when_configured_and_ib006_always_is() -> None:
    findings = apply([raw("IB002", 1, 1, "", "exec"), raw("IB001", 2)], [comment(3, 1, ("IB001",))], "warn")

    assert [(finding.rule, finding.severity) for finding in findings] == [
        ("IB002", "warning"),
        ("IB001", "error"),
        ("IB006", "warning"),
    ]


def test_a_suppressed_finding_keeps_its_severity() -> None:
    (finding,) = apply([raw("IB002", 1, 1, "", "exec")], [comment(1, 9, ("IB002",))])

    assert (finding.severity, finding.suppression) == ("error", REASON)


def test_comments_parsed_from_source_apply_end_to_end() -> None:
    source = (
        f"import os  {ALLOW} IB001 -- {REASON}\n"
        f"import io  {ALLOW} IB001 -- short\n"
        f"x = 1  {ALLOW} IB001 -- {REASON}\n"
    ).encode()

    findings = apply([raw("IB001", 1, 8), raw("IB001", 2, 8, "io")], parse_suppressions(source))

    assert [(f.line, f.rule, f.suppression is not None) for f in findings] == [
        (1, "IB001", True),
        (2, "IB001", False),
        (2, "IB005", False),
        (3, "IB006", False),
    ]
