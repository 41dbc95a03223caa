"""The golden-scenario model: records, errors and the strict YAML decoder.

:func:`load_scenario` reads one strict YAML scenario and reports every issue at once in a
:class:`ScenarioParseError`; :func:`load_script` reads only its script, for a scripted
``FakeModel``. Running a scenario is ``_execute``'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from harness_exit_gate.evals._conversation import (
    ScenarioConversation,
    decode_conversation,
)
from harness_exit_gate.evals._match import (
    REQUEST_KEYS,
    EventInvariant,
    InvariantValue,
    RequestExpectation,
    encode_plain,
    show,
)
from harness_exit_gate.evals._workspace import (
    ScenarioWorkspace,
    decode_texts,
    decode_tools,
    decode_workspace,
)
from harness_exit_gate.manifest._yaml import ROOT, describe_kind, is_refused, join_path, read_yaml_document
from harness_kernel import HarnessError
from harness_kernel.events import is_event_type
from harness_kernel.models import ScriptedTurn, ToolCall

__all__ = [
    "SCENARIO_INVALID",
    "SCENARIO_INVARIANT_INVALID",
    "SCENARIO_RUNTIME_FAILED",
    "GoldenRun",
    "InvariantCheckError",
    "ReportExpectation",
    "RunExpectation",
    "Scenario",
    "ScenarioExpectation",
    "ScenarioOutcome",
    "ScenarioParseError",
    "ScenarioRuntimeError",
    "ScenarioToolCall",
    "ScenarioTurn",
    "assert_known_event_types",
    "decode_scenario",
    "load_scenario",
    "load_script",
    "scripted_turn",
]

SCENARIO_INVALID: Final = "SCENARIO_INVALID"
SCENARIO_INVARIANT_INVALID: Final = "SCENARIO_INVARIANT_INVALID"
SCENARIO_RUNTIME_FAILED: Final = "SCENARIO_RUNTIME_FAILED"

_MAX_SCENARIO_BYTES: Final = 256 * 1024
_KEBAB: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)
_FINISH_REASONS: Final = ("stop", "tool_calls", "length", "error")
_RUN_STATUSES: Final = ("completed", "failed", "canceled", "budget_exceeded")
_REPORT_STATUSES: Final = ("passed", "failed", "blocked")

# ------------------------------------------------------------------ records


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioToolCall:
    """A scripted tool call: the model's id, the tool's name and the JSON arguments."""

    id: str
    name: str
    arguments: object


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioTurn:
    """One scripted FakeModel answer (``content?``, ``finishReason?``, ``toolCalls?``)."""

    content: str | None = None
    finish_reason: Literal["stop", "tool_calls", "length", "error"] | None = None
    tool_calls: tuple[ScenarioToolCall, ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunExpectation:
    """What the run must end with; ``None`` fields are not checked."""

    status: Literal["completed", "failed", "canceled", "budget_exceeded"] | None = None
    steps: int | None = None
    tool_calls: int | None = None
    text_contains: str | None = None
    emitted_budget_warning: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportExpectation:
    """The status an already validated run report must carry."""

    status: Literal["passed", "failed", "blocked"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioExpectation:
    """The scenario's expectations; at least one is present.

    ``files`` (path → text) is what the workspace must hold when the run ends; ``requests``
    what the scripted model received.
    """

    run: RunExpectation | None = None
    events: tuple[EventInvariant, ...] | None = None
    report: ReportExpectation | None = None
    files: tuple[tuple[str, str], ...] | None = None
    requests: tuple[RequestExpectation, ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    """A decoded golden scenario.

    ``workspace`` (a memory workspace's files and scripted commands), ``tools`` (the
    tool names registered; ``None`` is ``echo`` alone) and ``conversation`` (run on the
    streaming runtime; ``None`` is one legacy run) are optional.
    """

    id: str
    uses_tasks: tuple[str, ...]
    script: tuple[ScenarioTurn, ...]
    expect: ScenarioExpectation
    workspace: ScenarioWorkspace | None = None
    tools: tuple[str, ...] | None = None
    conversation: ScenarioConversation | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class GoldenRun:
    """What the scenario's run did, read from its events.

    ``status`` is the last ``agent.stopped``'s; ``steps`` and ``tool_calls`` add up every
    turn's, and ``total_tokens`` every model response's and compaction summary's usage.
    """

    task_id: str
    status: str
    steps: int
    tool_calls: int
    total_tokens: int
    event_count: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioOutcome:
    """The result of one scenario: ``ok`` when ``failures`` is empty."""

    id: str
    ok: bool
    failures: tuple[str, ...]
    tasks: tuple[str, ...]
    duration_ms: float
    golden_run: GoldenRun


# ------------------------------------------------------------------ errors


class ScenarioParseError(HarnessError):
    """A scenario is not valid; ``issues`` lists every ``(path, message)`` found."""

    def __init__(self, issues: Sequence[tuple[str, str]]) -> None:
        self.issues = list(issues)
        listed = "; ".join(f"{path} {message}" for path, message in self.issues)
        super().__init__(SCENARIO_INVALID, f"invalid scenario: {listed}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.issues,))


class InvariantCheckError(HarnessError):
    """Event invariants name unknown event types; ``failures`` lists each."""

    def __init__(self, failures: Sequence[str]) -> None:
        self.failures = list(failures)
        super().__init__(SCENARIO_INVARIANT_INVALID, "; ".join(self.failures))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.failures,))


class ScenarioRuntimeError(HarnessError):
    """A scenario could not be run (wrong tasks, missing manifest, no terminal event)."""

    def __init__(self, message: str) -> None:
        super().__init__(SCENARIO_RUNTIME_FAILED, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))


# ------------------------------------------------------------------ decoding


class _Decoder:
    """Walks a decoded document against the scenario schema, collecting every issue."""

    def __init__(self) -> None:
        self.issues: list[tuple[str, str]] = []

    def issue(self, path: str, message: str) -> None:
        self.issues.append((path, message))

    def any_mapping(self, value: object, path: str) -> dict[object, object] | None:
        """``value`` if it is a mapping (any keys), else ``None`` with an issue unless refused."""
        if is_refused(value):
            return None
        if type(value) is not dict:
            self.issue(path, f"expected a mapping, got {describe_kind(value)}")
            return None
        return cast("dict[object, object]", value)

    def mapping(self, value: object, path: str, allowed: tuple[str, ...]) -> dict[str, object] | None:
        mapping = self.any_mapping(value, path)
        if mapping is None:
            return None
        plain: dict[str, object] = {}
        for key, item in mapping.items():
            if type(key) is not str:
                self.issue(path, f"keys must be strings, got {describe_kind(key)}")
            elif key not in allowed:
                self.issue(join_path(path, key), "unknown key")
            else:
                plain[key] = item
        return plain

    def sequence(self, value: object, path: str, *, minimum: int = 0) -> list[object] | None:
        if is_refused(value):
            return None
        if type(value) is not list and type(value) is not tuple:
            self.issue(path, f"expected a sequence, got {describe_kind(value)}")
            return None
        items = list(cast("list[object] | tuple[object, ...]", value))
        if len(items) < minimum:
            self.issue(path, f"must have at least {minimum} item{'s' if minimum > 1 else ''}")
            return None
        return items

    def required(self, mapping: dict[str, object], path: str, key: str) -> object:
        if key not in mapping:
            self.issue(join_path(path, key), "is required")
        return mapping.get(key)

    def text(self, value: object, path: str, *, kebab: bool = False, empty: bool = False) -> str | None:
        if is_refused(value):
            return None
        if type(value) is not str:
            self.issue(path, f"expected a string, got {describe_kind(value)}")
            return None
        if kebab and not (len(value) <= 128 and _KEBAB.fullmatch(value)):
            self.issue(path, "must be a kebab-case identifier")
            return None
        if not empty and not value:
            self.issue(path, "must not be empty")
            return None
        return value

    def count(self, value: object, path: str) -> int | None:
        if type(value) is not int or value < 0:
            self.issue(path, f"expected an integer >= 0, got {describe_kind(value)}")
            return None
        return value

    def choice(self, value: object, path: str, choices: tuple[str, ...]) -> str | None:
        if type(value) is not str or value not in choices:
            self.issue(path, f"must be one of {', '.join(choices)}")
            return None
        return value

    def scenario(self, document: object) -> Scenario | None:
        keys = ("id", "uses_tasks", "workspace", "tools", "conversation", "script", "expect")
        root = self.mapping(document, ROOT, keys)
        if root is None:
            return None
        scenario_id = self.text(self.required(root, ROOT, "id"), "id", kebab=True)
        tasks_value = self.required(root, ROOT, "uses_tasks")
        tasks = None if tasks_value is None else self.sequence(tasks_value, "uses_tasks", minimum=1)
        task_ids = [
            self.text(item, join_path("uses_tasks", str(i)), kebab=True) for i, item in enumerate(tasks or ())
        ]
        script_value = self.required(root, ROOT, "script")
        script = None if script_value is None else self.sequence(script_value, "script")
        turns = [self.turn(item, join_path("script", str(i))) for i, item in enumerate(script or ())]
        expect_value = self.required(root, ROOT, "expect")
        expect = None if expect_value is None else self.expectation(expect_value)
        workspace = decode_workspace(self, root["workspace"]) if "workspace" in root else None
        tools = decode_tools(self, root["tools"]) if "tools" in root else None
        conversation = None
        if "conversation" in root:
            conversation = decode_conversation(self, root["conversation"])
        if self.issues or scenario_id is None or tasks is None or script is None or expect is None:
            return None
        if expect.files is not None and workspace is None:
            self.issue("expect.files", "needs a workspace")
            return None
        return Scenario(
            id=scenario_id,
            uses_tasks=tuple(cast("list[str]", task_ids)),
            script=tuple(cast("list[ScenarioTurn]", turns)),
            expect=expect,
            workspace=workspace,
            tools=tools,
            conversation=conversation,
        )

    def turn(self, value: object, path: str) -> ScenarioTurn | None:
        mapping = self.mapping(value, path, ("content", "finishReason", "toolCalls"))
        if mapping is None:
            return None
        content = None
        if "content" in mapping:
            content = self.text(mapping["content"], join_path(path, "content"), empty=True)
        finish = None
        if "finishReason" in mapping:
            finish = self.choice(mapping["finishReason"], join_path(path, "finishReason"), _FINISH_REASONS)
        calls: list[ScenarioToolCall] | None = None
        if "toolCalls" in mapping:
            calls_path = join_path(path, "toolCalls")
            items = self.sequence(mapping["toolCalls"], calls_path)
            calls = []
            for index, item in enumerate(items or ()):
                call = self.tool_call(item, join_path(calls_path, str(index)))
                if call is not None:
                    calls.append(call)
        return ScenarioTurn(
            content=content,
            finish_reason=cast("Literal['stop', 'tool_calls', 'length', 'error'] | None", finish),
            tool_calls=None if calls is None else tuple(calls),
        )

    def tool_call(self, value: object, path: str) -> ScenarioToolCall | None:
        mapping = self.mapping(value, path, ("id", "name", "arguments"))
        if mapping is None:
            return None
        call_id = self.text(self.required(mapping, path, "id"), join_path(path, "id"))
        name = self.text(self.required(mapping, path, "name"), join_path(path, "name"))
        arguments = mapping.get("arguments", {})
        try:
            encode_plain(arguments)
        except Exception:
            self.issue(join_path(path, "arguments"), "must be JSON data")
            return None
        if call_id is None or name is None:
            return None
        return ScenarioToolCall(id=call_id, name=name, arguments=arguments)

    def expectation(self, value: object) -> ScenarioExpectation | None:
        mapping = self.mapping(value, "expect", ("run", "events", "report", "files", "requests"))
        if mapping is None:
            return None
        if not mapping:
            self.issue("expect", "must have at least one of run, events, report, files, requests")
            return None
        requests = self.requests(mapping["requests"]) if "requests" in mapping else None
        files = decode_texts(self, mapping["files"], "expect.files") if "files" in mapping else None
        run = self.run(mapping["run"]) if "run" in mapping else None
        events = self.events(mapping["events"]) if "events" in mapping else None
        report = None
        if "report" in mapping:
            report_map = self.mapping(mapping["report"], "expect.report", ("status",))
            if report_map is not None:
                status = self.choice(
                    self.required(report_map, "expect.report", "status"),
                    "expect.report.status",
                    _REPORT_STATUSES,
                )
                if status is not None:
                    report = ReportExpectation(status=cast("Literal['passed', 'failed', 'blocked']", status))
        return ScenarioExpectation(run=run, events=events, report=report, files=files, requests=requests)

    def run(self, value: object) -> RunExpectation | None:
        path = "expect.run"
        keys = ("status", "steps", "toolCalls", "textContains", "emittedBudgetWarning")
        mapping = self.mapping(value, path, keys)
        if mapping is None:
            return None
        status = None
        if "status" in mapping:
            status = self.choice(mapping["status"], join_path(path, "status"), _RUN_STATUSES)
        steps = self.count(mapping["steps"], join_path(path, "steps")) if "steps" in mapping else None
        calls = (
            self.count(mapping["toolCalls"], join_path(path, "toolCalls")) if "toolCalls" in mapping else None
        )
        contains = None
        if "textContains" in mapping:
            contains = self.text(mapping["textContains"], join_path(path, "textContains"))
        warned: bool | None = None
        if "emittedBudgetWarning" in mapping:
            flag = mapping["emittedBudgetWarning"]
            if type(flag) is bool:
                warned = flag
            else:
                self.issue(
                    join_path(path, "emittedBudgetWarning"), f"expected a bool, got {describe_kind(flag)}"
                )
        return RunExpectation(
            status=cast("Literal['completed', 'failed', 'canceled', 'budget_exceeded'] | None", status),
            steps=steps,
            tool_calls=calls,
            text_contains=contains,
            emitted_budget_warning=warned,
        )

    def events(self, value: object) -> tuple[EventInvariant, ...] | None:
        items = self.sequence(value, "expect.events", minimum=1)
        if items is None:
            return None
        invariants: list[EventInvariant] = []
        for index, item in enumerate(items):
            path = join_path("expect.events", str(index))
            invariant = self.invariant(item, path)
            if invariant is not None:
                invariants.append(invariant)
        try:
            assert_known_event_types(invariants)
        except InvariantCheckError as error:
            self.issues.extend(("expect.events", failure) for failure in error.failures)
        return tuple(invariants)

    def requests(self, value: object) -> tuple[RequestExpectation, ...] | None:
        items = self.sequence(value, "expect.requests", minimum=1)
        if items is None:
            return None
        expectations: list[RequestExpectation] = []
        for index, item in enumerate(items):
            path = join_path("expect.requests", str(index))
            mapping = self.any_mapping(item, path)
            if mapping is None:
                continue
            number = mapping.get("request")
            if "request" not in mapping:
                self.issue(join_path(path, "request"), "is required")
            elif type(number) is not int or number < 1:
                self.issue(
                    join_path(path, "request"), f"expected an integer >= 1, got {describe_kind(number)}"
                )
            fields = self.scalar_fields(
                [(key, field) for key, field in mapping.items() if key != "request"],
                path,
                lambda key: key.split(".", 1)[0] in REQUEST_KEYS,
                f"request keys are request and <path> under {', '.join(REQUEST_KEYS)}",
            )
            if type(number) is int and number >= 1:
                expectations.append(RequestExpectation(request=number, fields=fields))
        return tuple(expectations)

    def scalar_fields(
        self,
        items: Sequence[tuple[object, object]],
        path: str,
        known: Callable[[str], bool],
        rule: str,
    ) -> tuple[tuple[str, InvariantValue], ...]:
        """The ``key → scalar`` pairs whose keys ``known`` accepts; an issue for every other one."""
        fields: list[tuple[str, InvariantValue]] = []
        for key, item in items:
            if type(key) is not str or not known(key):
                self.issue(path, f"unknown key {key!r}: {rule}")
            elif item is None or type(item) in (str, int, float, bool):
                fields.append((key, cast(InvariantValue, item)))
            else:
                self.issue(join_path(path, key), f"expected a scalar, got {describe_kind(item)}")
        return tuple(fields)

    def invariant(self, value: object, path: str) -> EventInvariant | None:
        mapping = self.any_mapping(value, path)
        if mapping is None:
            return None
        event_type = None
        if "type" in mapping:
            event_type = self.text(mapping["type"], join_path(path, "type"))
        else:
            self.issue(join_path(path, "type"), "is required")
        fields = self.scalar_fields(
            [(key, item) for key, item in mapping.items() if key != "type"],
            path,
            lambda key: key.startswith("data.") and key != "data.",
            "invariant keys are type and data.<path>",
        )
        if event_type is None:
            return None
        return EventInvariant(type=event_type, fields=fields)


def decode_scenario(obj: object) -> Scenario:
    """Validate an already decoded scenario document.

    Raises:
        ScenarioParseError: with every issue found (unknown keys included).
    """
    decoder = _Decoder()
    scenario = decoder.scenario(obj)
    if scenario is None or decoder.issues:
        raise ScenarioParseError(decoder.issues or [(ROOT, "scenario is not valid")])
    return scenario


def _read_document(text: object, decoder: _Decoder) -> object:
    """The one strict YAML document of a scenario file; what it refuses goes to ``decoder``.

    Raises:
        ScenarioParseError: the text is not a ``str``, too large, or not a complete document.
    """
    if type(text) is not str:
        raise ScenarioParseError([(ROOT, f"scenario text must be a str, got {describe_kind(text)}")])
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ScenarioParseError([("<yaml>", "invalid YAML: not UTF-8 (lone surrogate)")]) from None
    if size > _MAX_SCENARIO_BYTES:
        raise ScenarioParseError([(ROOT, f"scenario exceeds {_MAX_SCENARIO_BYTES} bytes of UTF-8")])
    document = read_yaml_document(text)
    issues = [(path, message.replace("manifest must", "scenario must")) for path, message in document.issues]
    if not document.complete:
        raise ScenarioParseError(issues)
    decoder.issues.extend(issues)
    return document.value


def load_scenario(text: str) -> Scenario:
    """Parse one strict YAML scenario (one document; no anchors, aliases, tags or duplicates).

    Raises:
        ScenarioParseError: with every issue found.
    """
    decoder = _Decoder()
    scenario = decoder.scenario(_read_document(text, decoder))
    if scenario is None or decoder.issues:
        raise ScenarioParseError(decoder.issues or [(ROOT, "scenario is not valid")])
    return scenario


def load_script(text: str) -> tuple[ScriptedTurn, ...]:
    """The model script of a scenario file, or of a file that holds only a list of turns.

    The file is read as one strict YAML document, so a list in any style is recognised by
    what it decodes to: a JSON array, a YAML flow list or a block list. A list's items are
    reported as ``script.<index>``, as in a scenario.

    Raises:
        ScenarioParseError: with every issue found, each naming its position.
    """
    decoder = _Decoder()
    value = _read_document(text, decoder)
    if type(value) is list or type(value) is tuple:
        items = cast("list[object] | tuple[object, ...]", value)
        turns = [decoder.turn(item, join_path("script", str(index))) for index, item in enumerate(items)]
        script = None if decoder.issues else tuple(cast("list[ScenarioTurn]", turns))
    else:
        scenario = decoder.scenario(value)
        script = None if scenario is None else scenario.script
    if script is None or decoder.issues:
        raise ScenarioParseError(decoder.issues or [(ROOT, "scenario is not valid")])
    return tuple(scripted_turn(turn) for turn in script)


def scripted_turn(turn: ScenarioTurn) -> ScriptedTurn:
    """The kernel's scripted turn for a scenario's turn (its arguments as the scenario wrote them)."""
    calls = None
    if turn.tool_calls is not None:
        calls = [ToolCall(call.id, call.name, cast(Any, call.arguments)) for call in turn.tool_calls]
    return ScriptedTurn(content=turn.content, finish_reason=turn.finish_reason, tool_calls=calls)


def assert_known_event_types(invariants: Sequence[EventInvariant]) -> list[str]:
    """Return the invariants' event types, in order, when every one is a known type.

    Raises:
        InvariantCheckError: one failure per invariant whose type is unknown.
    """
    failures = [
        f"events.{index}: unknown event type {show(invariant.type)}"
        for index, invariant in enumerate(invariants)
        if not is_event_type(invariant.type)
    ]
    if failures:
        raise InvariantCheckError(failures)
    return [invariant.type for invariant in invariants]
