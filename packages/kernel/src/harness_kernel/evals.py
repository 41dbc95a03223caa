"""Golden scenarios (kernel.md §10): a scripted run checked against expectations.

:func:`load_scenario` reads one strict YAML scenario; :func:`execute_scenario` runs it with
``run_agent`` on a :class:`~harness_kernel.models.FakeModel`, a deterministic clock and
deterministic ids, and reports every failed expectation. A scenario with ``conversation:``
runs on :class:`~harness_kernel.runtime.MinimalAgentRuntime` instead: several turns of one
session, steering while a turn runs, a context policy (issue #23). The runner is pure: it
takes text and decoded manifests, never paths (the ``harness-eval`` CLI finds and reads the
files).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal, cast

import trio

from harness_kernel._errors import HarnessError
from harness_kernel._ids import format_timestamp
from harness_kernel._json import JsonValue, encode_json
from harness_kernel._scenario_match import (
    ABSENT,
    REQUEST_KEYS,
    EventInvariant,
    InvariantValue,
    RequestExpectation,
    event_document,
    mismatch,
    request_failures,
    show,
)
from harness_kernel._scenario_runtime import (
    ConversationFailedError,
    ScenarioConversation,
    ScenarioConversationTurn,
    ScenarioSteer,
    decode_conversation,
    run_conversation,
)
from harness_kernel._scenario_workspace import (
    ScenarioCommand,
    ScenarioWorkspace,
    build_tools,
    build_workspace,
    decode_texts,
    decode_tools,
    decode_workspace,
    file_failures,
)
from harness_kernel.events._codec import is_event_type
from harness_kernel.events._model import (
    AgentStoppedData,
    ContextCompactedData,
    Event,
    EventUsage,
    ModelResponseData,
)
from harness_kernel.legacy._loop import run_agent
from harness_kernel.legacy._records import Budget, RunOptions
from harness_kernel.manifest._model import TaskManifest, manifest_permissions
from harness_kernel.manifest._yaml import ROOT, describe_kind, is_refused, join_path, read_yaml_document
from harness_kernel.models._adapters import FAKE_MODEL_NAME, FakeModel, ScriptedTurn
from harness_kernel.models._types import (
    CompletionRequest,
    CompletionResponse,
    ModelAdapter,
    ModelRequest,
    ResponseCompletedFrame,
    ToolCall,
)
from harness_kernel.policy._permission import RulePermissionController
from harness_kernel.runtime._input import RuntimeBudget
from harness_workspace import MemoryWorkspace

__all__ = [
    "SCENARIO_INVALID",
    "SCENARIO_INVARIANT_INVALID",
    "SCENARIO_RUNTIME_FAILED",
    "EventInvariant",
    "GoldenRun",
    "InvariantCheckError",
    "InvariantValue",
    "ReportExpectation",
    "RequestExpectation",
    "RunExpectation",
    "Scenario",
    "ScenarioCommand",
    "ScenarioConversation",
    "ScenarioConversationTurn",
    "ScenarioExpectation",
    "ScenarioOutcome",
    "ScenarioParseError",
    "ScenarioRuntimeError",
    "ScenarioSteer",
    "ScenarioToolCall",
    "ScenarioTurn",
    "ScenarioWorkspace",
    "assert_known_event_types",
    "decode_scenario",
    "execute_scenario",
    "load_scenario",
    "load_script",
    "stream_satisfies",
]

SCENARIO_INVALID: Final = "SCENARIO_INVALID"
SCENARIO_INVARIANT_INVALID: Final = "SCENARIO_INVARIANT_INVALID"
SCENARIO_RUNTIME_FAILED: Final = "SCENARIO_RUNTIME_FAILED"

_MAX_SCENARIO_BYTES: Final = 256 * 1024
_KEBAB: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)
_CLOCK_START: Final = datetime(2026, 1, 1, tzinfo=UTC)
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
            encode_json(arguments)
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
    return tuple(_turn(turn) for turn in script)


# ------------------------------------------------------------------ invariants


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


def stream_satisfies(events: Sequence[Event], invariants: Sequence[EventInvariant]) -> list[str]:
    """Match ``invariants`` as an ordered subsequence of ``events``; return the failures.

    Fields compare by JSON equality on wire keys. A failure names the unmatched invariant
    and, when an event of its type follows, the first field that differed there.
    """
    documents = [(event.type, event_document(event)) for event in events]
    failures: list[str] = []
    position = 0
    for index, invariant in enumerate(invariants):
        nearest: tuple[str, object, InvariantValue] | None = None
        for offset in range(position, len(documents)):
            event_type, document = documents[offset]
            if event_type != invariant.type:
                continue
            differs = mismatch(document, invariant.fields)
            if differs is None:
                position = offset + 1
                break
            nearest = nearest or differs
        else:
            label = f"events.{index} ({invariant.type})"
            if nearest is None:
                failures.append(f"{label}: no such event in order")
            else:
                key, seen, wanted = nearest
                failures.append(f"{label}: {key}: wanted {show(wanted)}, saw {show(seen)}")
    return failures


# ------------------------------------------------------------------ execution


def _deterministic_clock() -> tuple[Callable[[], str], Callable[[str], str]]:
    ticks = 0
    counter = 0

    def now() -> str:
        nonlocal ticks
        moment = _CLOCK_START + timedelta(milliseconds=ticks)
        ticks += 1
        return format_timestamp(moment)

    def new_id(prefix: str) -> str:
        nonlocal counter
        counter += 1
        return f"{prefix}-golden-{counter}"

    return now, new_id


def _turn(turn: ScenarioTurn) -> ScriptedTurn:
    calls = None
    if turn.tool_calls is not None:
        calls = [ToolCall(call.id, call.name, cast(JsonValue, call.arguments)) for call in turn.tool_calls]
    return ScriptedTurn(content=turn.content, finish_reason=turn.finish_reason, tool_calls=calls)


def _check(failures: list[str], name: str, wanted: object, seen: object) -> None:
    if wanted is not None and wanted != seen:
        failures.append(f"{name}: wanted {show(wanted)}, saw {show(seen)}")


class _CollectedModel:
    """The legacy one-shot ``Model`` port over a streaming ``ModelAdapter`` (a real provider)."""

    def __init__(self, adapter: ModelAdapter, name: str) -> None:
        self._adapter = adapter
        self.name = name

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        streamed = ModelRequest(
            messages=request.messages,
            tools=request.tools,
            model=request.model,
            max_tokens=request.max_tokens,
            system=request.system,
            provider_options=request.provider_options,
            signal=request.signal,
        )
        frames = self._adapter.stream(streamed)
        try:
            async for frame in frames:
                if type(frame) is ResponseCompletedFrame:
                    return frame.response
        finally:
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:
                await aclose()
        raise ScenarioRuntimeError("the model's stream ended without a completion")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Setup:
    """What either runner needs: the task, the scripted or real model, the tools and the rules."""

    manifest: TaskManifest
    scenario: Scenario
    scripted: FakeModel
    model: tuple[str, ModelAdapter] | None
    workspace: MemoryWorkspace | None
    permission: RulePermissionController | None
    now: Callable[[], str]
    new_id: Callable[[str], str]

    @property
    def session_id(self) -> str:
        return f"sess-scenario-{self.manifest.id}"


async def _run_legacy(setup: _Setup) -> tuple[Sequence[Event], str, tuple[str, ...]]:
    """Run the task once with ``run_agent``: its events and final text (no steering failures)."""
    limits = setup.manifest.budget
    model = setup.model
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    options = RunOptions(
        goal=setup.manifest.goal,
        model=setup.scripted if model is None else _CollectedModel(model[1], model[0]),
        tools=build_tools(setup.scenario.tools),
        workspace_capability=setup.workspace,
        permission=setup.permission,
        budget=None
        if limits is None
        else Budget(max_model_tokens=limits.max_model_tokens, max_tool_calls=limits.max_tool_calls),
        task_id=setup.manifest.id,
        session_id=setup.session_id,
        on_event=record,
        now=setup.now,
        new_id=setup.new_id,
    )
    try:
        return events, (await run_agent(options)).text, ()
    except Exception as error:
        if not any(event.type == "agent.stopped" for event in events):
            raise ScenarioRuntimeError(f"scenario run failed before its end: {error}") from error
    return events, "", ()


async def _run_turns(
    setup: _Setup, conversation: ScenarioConversation
) -> tuple[Sequence[Event], str, tuple[str, ...]]:
    """Run the conversation's turns on the streaming runtime: events, last answer, steer failures."""
    limits = setup.manifest.budget
    model = setup.model
    try:
        run = await run_conversation(
            conversation,
            goal=setup.manifest.goal,
            model=FAKE_MODEL_NAME if model is None else model[0],
            adapter=setup.scripted if model is None else model[1],
            tools=build_tools(setup.scenario.tools),
            workspace=setup.workspace,
            permission=setup.permission,
            budget=RuntimeBudget(
                max_model_tokens=None if limits is None else limits.max_model_tokens,
                max_tool_calls=None if limits is None else limits.max_tool_calls,
            ),
            task_id=setup.manifest.id,
            session_id=setup.session_id,
            now=setup.now,
            new_id=setup.new_id,
        )
    except ConversationFailedError as error:
        raise ScenarioRuntimeError(f"scenario run failed before its end: {error}") from error
    return run.events, run.text, run.failures


def _golden_run(task_id: str, events: Sequence[Event]) -> GoldenRun:
    """What the events say the run (every turn of it) did.

    Raises:
        ScenarioRuntimeError: there is no ``agent.stopped`` event.
    """
    stopped = [event.data for event in events if type(event.data) is AgentStoppedData]
    if not stopped:
        raise ScenarioRuntimeError("scenario run emitted no agent.stopped event")
    total_tokens = 0
    for event in events:
        data = event.data
        if type(data) is ModelResponseData:
            total_tokens += data.usage.total_tokens
        elif type(data) is ContextCompactedData and type(data.usage) is EventUsage:
            # A compaction's summary is a model request too; its usage counts.
            total_tokens += data.usage.total_tokens
    return GoldenRun(
        task_id=task_id,
        status=stopped[-1].status,
        steps=sum(data.steps for data in stopped),
        tool_calls=sum(data.tool_calls for data in stopped),
        total_tokens=total_tokens,
        event_count=len(events),
    )


async def execute_scenario(
    scenario: Scenario,
    manifests: Mapping[str, TaskManifest],
    *,
    report: Mapping[str, object] | None = None,
    model: tuple[str, ModelAdapter] | None = None,
    attest_workspace: Callable[[MemoryWorkspace], object] | None = None,
) -> ScenarioOutcome:
    """Run ``scenario`` (the legacy loop, or its conversation's turns) and check every expectation.

    Args:
        scenario: A decoded scenario.
        manifests: Task id → decoded manifest; the scenario's one task supplies the goal,
            the id and the budget.
        report: An already read and validated run report (a JSON object), or ``None``.
        model: ``(name, adapter)`` of a real model to run the task with instead of the
            scenario's script. Its answers are its own, so only ``run.status`` and
            ``files`` are checked then; the scripted run's exact events, requests, steps,
            tool calls, text and steering are not.
        attest_workspace: Called with the scenario's memory workspace before the run. Its
            scripted commands are answered by a handler, and a workspace with handlers is
            not declared isolated by itself, so file-writing and command tools are refused
            on it unless the host that runs the scenario declares it here
            (``lambda workspace: declare_isolation(workspace, "in-memory")``).

    Raises:
        ScenarioRuntimeError: the scenario does not use exactly one task, its manifest is
            missing, or the run (a turn) ended without an ``agent.stopped`` event.
    """
    if type(scenario) is not Scenario:
        raise ScenarioRuntimeError("scenario must be a decoded Scenario")
    if len(scenario.uses_tasks) != 1:
        raise ScenarioRuntimeError(f"scenario must use exactly one task, got {len(scenario.uses_tasks)}")
    task_id = scenario.uses_tasks[0]
    manifest = manifests.get(task_id)
    if type(manifest) is not TaskManifest or manifest.id != task_id:
        raise ScenarioRuntimeError(f"no decoded manifest for task {task_id}")
    now, new_id = _deterministic_clock()
    workspace = None if scenario.workspace is None else build_workspace(scenario.workspace)
    if workspace is not None and attest_workspace is not None:
        attest_workspace(workspace)
    permission = None
    if scenario.workspace is not None or scenario.tools is not None:
        # The task's own rules decide every call, as in a session of that task. A scenario
        # in the older form (echo alone, no workspace) keeps running without a controller.
        permission = RulePermissionController(manifest_permissions(manifest))
    setup = _Setup(
        manifest=manifest,
        scenario=scenario,
        scripted=FakeModel([_turn(turn) for turn in scenario.script]),
        model=model,
        workspace=workspace,
        permission=permission,
        now=now,
        new_id=new_id,
    )
    started = trio.current_time()
    if scenario.conversation is None:
        events, text, steering = await _run_legacy(setup)
    else:
        events, text, steering = await _run_turns(setup, scenario.conversation)
    duration_ms = round((trio.current_time() - started) * 1000, 3)
    golden = _golden_run(task_id, events)
    expect = scenario.expect
    if model is not None:
        run = expect.run
        status_only = None if run is None else RunExpectation(status=run.status)
        expect = ScenarioExpectation(run=status_only, files=expect.files)
        steering = ()
    failures = [*steering, *_expectation_failures(expect, golden, text, events, report)]
    if expect.requests is not None:
        failures.extend(request_failures(setup.scripted.requests, expect.requests))
    if scenario.expect.files is not None and workspace is not None:
        failures.extend(file_failures(scenario.expect.files, workspace.files, show))
    return ScenarioOutcome(
        id=scenario.id,
        ok=not failures,
        failures=tuple(failures),
        tasks=scenario.uses_tasks,
        duration_ms=duration_ms,
        golden_run=golden,
    )


def _expectation_failures(
    expect: ScenarioExpectation,
    golden: GoldenRun,
    text: str,
    events: Sequence[Event],
    report: Mapping[str, object] | None,
) -> list[str]:
    failures: list[str] = []
    run = expect.run
    if run is not None:
        _check(failures, "run.status", run.status, golden.status)
        _check(failures, "run.steps", run.steps, golden.steps)
        _check(failures, "run.toolCalls", run.tool_calls, golden.tool_calls)
        if run.text_contains is not None and run.text_contains not in text:
            failures.append(f"run.textContains: wanted {show(run.text_contains)}, saw {show(text)}")
        warned = any(event.type == "budget.warning" for event in events)
        _check(failures, "run.emittedBudgetWarning", run.emitted_budget_warning, warned)
    if expect.events is not None:
        failures.extend(stream_satisfies(events, expect.events))
    if expect.report is not None and report is not None:
        status: object = ABSENT
        if type(report) is dict:
            status = cast("dict[str, object]", report).get("status", ABSENT)
        if not (type(status) is str and status == expect.report.status):
            failures.append(f"report.status: wanted {show(expect.report.status)}, saw {show(status)}")
    return failures
