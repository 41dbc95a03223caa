"""Hypothesis properties of ``parse_command`` and the report validators (exit-gate.md §7, §9.4, §10)."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Mapping
from typing import Final, TypeAlias, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from harness_exit_gate import (
    CommandParseError,
    RunPreflightReport,
    RunReport,
    RunReportError,
    parse_command,
    validate_report_artifact,
    validate_run_preflight_report,
    validate_run_report,
)
from harness_exit_gate._git import Link
from harness_exit_gate._trust import link_escape

PROPERTIES: Final = settings(max_examples=150, deadline=None, database=None)
REFUSED: Final = frozenset(";&|<>`\x00\r\n")

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

# ------------------------------------------------------------------ parse_command

_command_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=60) | st.text(
    alphabet=" \t'\"\\abc;|", max_size=30
)
_word = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="".join(REFUSED)), max_size=12)


def _quoted(word: str, style: int) -> str:
    """``word`` as one command-line word: single-quoted, double-quoted or backslash-escaped."""
    if style == 0 and "'" not in word:
        return f"'{word}'"
    if style == 1 or not word:
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "".join("\\" + character for character in word)


def _parse(text: str) -> tuple[str, ...] | CommandParseError:
    try:
        return parse_command(text)
    except CommandParseError as error:
        return error


@PROPERTIES
@given(_command_text)
def test_parse_command_returns_words_or_raises_its_own_error(text: str) -> None:
    argv = _parse(text)
    if isinstance(argv, CommandParseError):
        assert argv.code == "TEST_COMMAND_INVALID"
        return
    assert argv
    assert all(type(word) is str for word in argv)
    assert not REFUSED & set(text)


@PROPERTIES
@given(_command_text, st.sampled_from(sorted(REFUSED)), st.integers(min_value=0))
def test_parse_command_refuses_shell_characters_anywhere(text: str, refused: str, position: int) -> None:
    index = position % (len(text) + 1)
    assert isinstance(_parse(text[:index] + refused + text[index:]), CommandParseError)


@PROPERTIES
@given(st.lists(st.tuples(_word, st.integers(min_value=0, max_value=2)), min_size=1, max_size=6))
def test_parse_command_round_trips_quoted_argv(words: list[tuple[str, int]]) -> None:
    text = " ".join(_quoted(word, style) for word, style in words)
    assert parse_command(text) == tuple(word for word, _ in words)


@PROPERTIES
@given(st.lists(st.text(alphabet="abcxyz0123456789-_./=", min_size=1, max_size=8), min_size=1, max_size=6))
def test_parse_command_splits_plain_words_on_whitespace(words: list[str]) -> None:
    assert parse_command("  ".join(words) + " ") == tuple(words)


# ------------------------------------------------------------------ report validators

_SHA: Final = "a" * 40
_FAILURE: Final[dict[str, JsonValue]] = {"stage": "tests", "code": "TEST_COMMAND_FAILED", "message": "exit 1"}
VALID_RUN_REPORT: Final[dict[str, JsonValue]] = {
    "schema": "run-report/v2",
    "runId": "run-1",
    "status": "failed",
    "startedAt": "2026-01-01T00:00:00.000Z",
    "finishedAt": "2026-01-01T00:00:01.000Z",
    "branch": "tasks/demo",
    "task": {"id": "demo", "title": "Demo", "path": "tasks/demo.yaml"},
    "policy": {"changedPathsOk": True, "changedPaths": ["src/new.py", "src/old.py"], "violations": []},
    "tests": {"command": "pytest", "exitCode": 1, "ok": False, "durationMs": 5, "outputTail": "boom"},
    "git": {
        "repositoryRoot": "/repo",
        "mode": "local",
        "expectedBranch": "tasks/demo",
        "actualBranch": "tasks/demo",
        "detached": False,
        "headSha": _SHA,
        "baseRef": "refs/heads/main",
        "baseSha": _SHA,
        "mergeBaseSha": _SHA,
        "preTest": {
            "changes": [
                {"origin": "committed", "status": "R100", "path": "src/new.py", "oldPath": "src/old.py"}
            ],
            "policyPaths": ["src/new.py", "src/old.py"],
        },
    },
    "failure": _FAILURE,
    "failures": [_FAILURE],
    "events": [],
    "deliverables": {"artifacts": [], "reportPath": "tasks/runs/run-1/report.json", "reportWritten": False},
}
_PREFLIGHT_ERROR: Final[dict[str, JsonValue]] = {
    "stage": "git",
    "code": "GIT_DETACHED_UNVERIFIED",
    "message": "HEAD is detached",
}
VALID_PREFLIGHT_REPORT: Final[dict[str, JsonValue]] = {
    "schema": "run-preflight-report/v1",
    "manifestPath": "tasks/demo.yaml",
    "runId": "run-1",
    "sessionId": "sess-1",
    "status": "failed",
    "startedAt": "2026-01-01T00:00:00.000Z",
    "finishedAt": "2026-01-01T00:00:01.000Z",
    "branch": "tasks/demo",
    "task": {"id": "demo", "title": "Demo"},
    "error": _PREFLIGHT_ERROR,
    "failures": [_PREFLIGHT_ERROR],
    "events": [],
    "deliverables": {"artifacts": [], "reportPath": "tasks/runs/run-1/preflight.json", "reportWritten": True},
}

_json: st.SearchStrategy[JsonValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


def _copy(document: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return cast("dict[str, JsonValue]", json.loads(json.dumps(document)))


@st.composite
def _mutated(draw: st.DrawFn, valid: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """``valid`` with one value somewhere replaced by arbitrary JSON, or one key removed."""
    document = _copy(valid)
    container: JsonValue = document
    while True:
        if isinstance(container, list):
            if not container:
                return document
            index = draw(st.integers(min_value=0, max_value=len(container) - 1))
            if isinstance(container[index], dict | list) and draw(st.booleans()):
                container = container[index]
                continue
            container[index] = draw(_json)
            return document
        assert isinstance(container, dict)
        if not container:
            return document
        key = draw(st.sampled_from(sorted(container)))
        if isinstance(container[key], dict | list) and draw(st.booleans()):
            container = container[key]
        elif draw(st.booleans()):
            del container[key]
            return document
        else:
            container[key] = draw(_json)
            return document


def _accepted_or_refused(
    validate: Callable[[Mapping[str, object] | str | bytes], object], document: object
) -> object:
    """The validator's result or its error; ``document`` may be any JSON value, not just a mapping."""
    try:
        return validate(cast("Mapping[str, object]", document))
    except RunReportError as error:
        return error


def _assert_refusal_is_well_formed(result: object) -> None:
    if isinstance(result, RunReportError):
        assert result.code == "REPORT_INVALID"
        assert str(result).startswith("invalid ")


def test_the_seed_reports_are_valid() -> None:
    assert isinstance(validate_run_report(VALID_RUN_REPORT), RunReport)
    assert isinstance(validate_run_preflight_report(VALID_PREFLIGHT_REPORT), RunPreflightReport)


@PROPERTIES
@given(_json | st.text(max_size=40) | st.binary(max_size=40))
def test_validators_accept_or_refuse_arbitrary_input(document: object) -> None:
    for validate in (validate_run_report, validate_run_preflight_report, validate_report_artifact):
        _assert_refusal_is_well_formed(_accepted_or_refused(validate, document))


@PROPERTIES
@given(_mutated(VALID_RUN_REPORT))
def test_run_report_mutations_are_accepted_or_refused(document: dict[str, JsonValue]) -> None:
    result = _accepted_or_refused(validate_run_report, document)
    assert isinstance(result, RunReport | RunReportError)
    _assert_refusal_is_well_formed(result)
    if document.get("schema") == "run-report/v2":
        # The artifact validator dispatches to the same checks, from JSON text too.
        artifact = _accepted_or_refused(validate_report_artifact, json.dumps(document))
        assert type(artifact) is type(result)


@PROPERTIES
@given(_mutated(VALID_PREFLIGHT_REPORT))
def test_preflight_report_mutations_are_accepted_or_refused(document: dict[str, JsonValue]) -> None:
    result = _accepted_or_refused(validate_run_preflight_report, document)
    assert isinstance(result, RunPreflightReport | RunReportError)
    _assert_refusal_is_well_formed(result)
    _assert_refusal_is_well_formed(
        _accepted_or_refused(validate_report_artifact, json.dumps(document).encode())
    )


# ------------------------------------------------------------------ link targets

_SEGMENTS: Final = ("..", ".", "src", "tasks", "docs", ".git", "a", "runs", "")


@PROPERTIES
@given(
    folder=st.lists(st.sampled_from(("src", "a", "deep")), min_size=0, max_size=3),
    target=st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=6).map("/".join),
    absolute=st.booleans(),
)
def test_a_link_is_let_through_only_when_its_target_stays_inside_the_scope(
    folder: list[str], target: str, absolute: bool
) -> None:
    path = "/".join(["src", *folder, "link"])
    written = "/" + target if absolute else target
    reason = link_escape("/nonexistent-root", Link(path=path, targets=(written,), lands=None), ["src/**"])
    if reason is None:
        landed = posixpath.normpath(posixpath.join(posixpath.dirname(path), written))
        assert not absolute
        assert landed.startswith("src/")
        assert ".git" not in landed.split("/")
    else:
        assert path in reason
