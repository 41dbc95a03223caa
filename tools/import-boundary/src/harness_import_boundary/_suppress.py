"""Suppression comments (spec §7): found with ``tokenize``, then matched against a file's findings.

A comment depends only on the file's bytes, so parsed comments are cached together with the
file's raw findings; matching them happens on every run.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from harness_import_boundary._model import RULES, Finding, RawFinding, Severity

__all__ = [
    "MIN_REASON_LENGTH",
    "SUPPRESSION_FORM",
    "SuppressionComment",
    "apply_suppressions",
    "parse_suppressions",
    "rule_severity",
]

MIN_REASON_LENGTH: Final = 10
"""A reason must have at least this many characters once trimmed."""

SUPPRESSION_FORM: Final = "suppression"
"""The form of IB005 and IB006 findings."""

# The directive may follow another one in the same comment (after a linter's own directive).
_MARKER_TEXT: Final = "harness-import-boundary:"
_MARKER: Final = _MARKER_TEXT.encode()
_DIRECTIVE: Final = re.compile(r"#\s*harness-import-boundary:")
_ALLOW: Final = re.compile(r"\s*allow(?=\s|$)(.*)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class SuppressionComment:
    """One ``# harness-import-boundary:`` comment, well-formed or not.

    Attributes:
        line: 1-based line of the comment.
        column: 1-based column of the comment's ``#``, in characters.
        rules: The rule ids it allows (empty when invalid).
        reason: The trimmed reason (empty when invalid).
        error: Why the comment is invalid, or ``None`` when it is well-formed.
    """

    line: int
    column: int
    rules: tuple[str, ...] = ()
    reason: str = ""
    error: str | None = None


def parse_suppressions(source: bytes) -> list[SuppressionComment]:
    """Find every suppression comment among the real comment tokens of ``source``.

    Text inside strings never counts. The encoding is detected as Python does (PEP 263).
    Never raises: input that cannot be tokenized yields no comments (the file is reported
    as IB004 anyway).
    """
    if _MARKER not in source and _encodes_ascii_as_itself(source):
        # Tokenizing is the costliest part of a file's analysis after parsing; skip it when
        # the marker cannot be in the file at all.
        return []
    comments: list[SuppressionComment] = []
    try:
        for token in tokenize.tokenize(io.BytesIO(source).readline):
            if token.type == tokenize.COMMENT:
                comment = _parse_comment(token.string, token.start[0], token.start[1] + 1)
                if comment is not None:
                    comments.append(comment)
    except (SyntaxError, tokenize.TokenError, UnicodeError, LookupError, ValueError, RecursionError):
        return []
    return comments


def _encodes_ascii_as_itself(source: bytes) -> bool:
    """Whether the file's declared encoding writes the marker's text as its ASCII bytes."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        return _MARKER_TEXT.encode(encoding) == _MARKER
    except (SyntaxError, UnicodeError, LookupError):
        return False


def _parse_comment(text: str, line: int, column: int) -> SuppressionComment | None:
    directive = _DIRECTIVE.search(text)
    if directive is None:
        return None

    def invalid(problem: str) -> SuppressionComment:
        return SuppressionComment(line=line, column=column, error=problem)

    allow = _ALLOW.match(text, directive.end())
    if allow is None:
        return invalid("expected 'allow' after 'harness-import-boundary:'")
    listed, separator, reason = allow.group(1).partition("--")
    if not separator:
        return invalid("missing '--' before the reason")
    rules: list[str] = []
    for part in listed.split(","):
        rule = part.strip()
        if not rule:
            return invalid("missing rule id (write 'allow IB001' or 'allow IB001,IB002')")
        if rule not in RULES:
            return invalid(f"unknown rule {rule!r}")
        if not RULES[rule].suppressible:
            return invalid(f"rule {rule} cannot be suppressed")
        if rule not in rules:
            rules.append(rule)
    reason = reason.strip()
    if not reason:
        return invalid("missing reason after '--'")
    if len(reason) < MIN_REASON_LENGTH:
        return invalid(f"reason must be at least {MIN_REASON_LENGTH} characters, got {len(reason)}")
    return SuppressionComment(line=line, column=column, rules=tuple(rules), reason=reason)


def rule_severity(rule: str, unverifiable: Literal["error", "warn"]) -> Severity:
    """The severity a finding of ``rule`` is reported with under the configured ``unverifiable``."""
    if rule == "IB002" and unverifiable == "warn":
        return "warning"
    return RULES[rule].default_severity


def apply_suppressions(
    path: str,
    raw: Iterable[RawFinding],
    comments: Sequence[SuppressionComment],
    *,
    unverifiable: Literal["error", "warn"],
) -> list[Finding]:
    """Turn one file's raw findings into findings, matching them against its suppression comments.

    A well-formed comment suppresses the IB001/IB002 findings it names on its own line; those
    come back with ``suppression`` set to its reason. Each invalid comment adds an IB005, and
    each well-formed comment that suppresses nothing an IB006, at the comment.

    Args:
        path: The path reported in the findings.
        raw: The file's raw findings.
        comments: The file's suppression comments.
        unverifiable: The configured severity of IB002 (``"warn"`` makes it a warning).
    """
    by_line = {comment.line: comment for comment in comments if comment.error is None}
    used: set[int] = set()
    findings: list[Finding] = []
    for item in raw:
        reason: str | None = None
        comment = by_line.get(item.line)
        if comment is not None and item.rule in comment.rules and RULES[item.rule].suppressible:
            reason = comment.reason
            used.add(comment.line)
        findings.append(
            Finding(
                path=path,
                line=item.line,
                column=item.column,
                module=item.module,
                form=item.form,
                message=item.message,
                rule=item.rule,
                severity=rule_severity(item.rule, unverifiable),
                suppression=reason,
            )
        )
    for comment in comments:
        if comment.error is not None:
            rule, message = "IB005", f"invalid suppression comment: {comment.error}"
        elif comment.line not in used:
            rules = "/".join(comment.rules)
            rule, message = "IB006", f"suppression comment matches no {rules} finding on its line"
        else:
            continue
        findings.append(
            Finding(
                path=path,
                line=comment.line,
                column=comment.column,
                module="",
                form=SUPPRESSION_FORM,
                message=message,
                rule=rule,
                severity=rule_severity(rule, unverifiable),
            )
        )
    return findings
