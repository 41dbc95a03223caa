"""The state of one gate run: its options, its ids, the events it emits and the failures it finds.

Every step of ``run`` (exit-gate.md §5) records into one :class:`RunState`; the run report
and the SQLite companion are built from it at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from msgspec import UNSET

from harness_exit_gate._report import Failure, Stage
from harness_exit_gate.manifest import TaskManifest
from harness_kernel.events import (
    ErrorData,
    Event,
    EventData,
    EventType,
    TaskPolicyDecisionData,
    create_event,
    now_timestamp,
    random_id,
)

__all__ = [
    "ACTOR",
    "DEFAULT_TEST_COMMAND",
    "DEFAULT_TIMEOUT_MS",
    "Effect",
    "RunOptions",
    "RunOutcome",
    "RunState",
]

ACTOR: Final = "harness-exit-gate"
DEFAULT_TEST_COMMAND: Final = "uv run --frozen pytest"
DEFAULT_TIMEOUT_MS: Final = "300000"
Effect: TypeAlias = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """The ``run`` command's inputs, as given on the command line."""

    manifest: str
    cwd: str
    base: str | None = None
    test_command: str = DEFAULT_TEST_COMMAND
    timeout_ms: str = DEFAULT_TIMEOUT_MS
    ci_head_ref: str | None = None
    head_sha: str | None = None
    pull_request_url: str | None = None
    allow_gate_in_checkout: bool = False

    @property
    def ci(self) -> bool:
        """Whether the CI flags select CI mode (exit-gate.md §6.1)."""
        return self.ci_head_ref is not None or self.head_sha is not None


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """What ``run`` printed and returned."""

    exit_code: int
    report: bytes
    report_path: str
    report_written: bool
    failures: tuple[tuple[str, str], ...]


@dataclass
class RunState:
    """One run's ids, events and failures, and what the steps learnt that later steps read."""

    options: RunOptions
    run_id: str = field(default_factory=lambda: random_id("run"))
    session_id: str = field(default_factory=lambda: random_id("sess"))
    started_at: str = field(default_factory=now_timestamp)
    events: list[Event] = field(default_factory=list[Event])
    failures: list[Failure] = field(default_factory=list[Failure])
    errors_emitted: set[str] = field(default_factory=set[str])
    task: TaskManifest | None = None
    root: str | None = None
    # Why each changed symbolic link found so far reaches beyond the scope.
    escaping_links: dict[str, str] = field(default_factory=dict[str, str])

    def emit(self, kind: EventType, data: EventData) -> Event:
        """Record an event of the run, stamped now."""
        event = create_event(kind, data, actor=ACTOR, at=now_timestamp())
        self.events.append(event)
        return event

    def decision(self, action: str, subject: str, effect: Effect, reason: str) -> None:
        """Record a ``policy.decision`` event for the run's task."""
        assert self.task is not None
        self.emit(
            "policy.decision",
            TaskPolicyDecisionData(
                task_id=self.task.id,
                session_id=self.session_id,
                run_id=self.run_id,
                action=action,
                subject=subject,
                effect=effect,
                reason=reason,
            ),
        )

    def error_event(self, failure: Failure) -> None:
        """Record an ``error`` event for ``failure``, once per failure code."""
        if failure.code in self.errors_emitted:
            return
        self.errors_emitted.add(failure.code)
        self.emit(
            "error",
            ErrorData(
                code=failure.code,
                message=failure.message,
                retryable=False,
                task_id=UNSET if self.task is None else self.task.id,
                session_id=self.session_id,
                run_id=self.run_id,
                stage=failure.stage,
            ),
        )

    def fail(self, stage: Stage, code: str, message: str, *, event: bool = False) -> None:
        """Record a failure; with ``event``, an ``error`` event for it too."""
        failure = Failure(stage=stage, code=code, message=message)
        self.failures.append(failure)
        if event:
            self.error_event(failure)
