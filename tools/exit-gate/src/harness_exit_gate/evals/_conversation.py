"""A golden scenario as a conversation on the streaming runtime (exit-gate.md).

A scenario with ``conversation:`` runs its task on :class:`MinimalAgentRuntime` rather than
the legacy loop: its first turn with ``run()``, each later one with ``follow_up()`` on the
same session and the same event store, so a later turn inherits the earlier messages.
Steering is sent from inside the consumer while a turn runs, each steer once the first
event of that turn matching its ``after`` invariant has been delivered (and after the
previous steer), so where it lands is as deterministic as the scripted model. A context
policy (accounting and compaction) and runtime checkpoints may be switched on for every
turn. The decoding is as strict as the rest of the scenario format.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from harness_exit_gate.evals._match import EventInvariant, matches
from harness_exit_gate.manifest._yaml import describe_kind, join_path
from harness_kernel.events import AssistantMessageCompletedData, Event, TurnCompletedData, is_event_type
from harness_kernel.models import ModelAdapter
from harness_kernel.policy import PermissionController
from harness_kernel.runtime import (
    AgentRuntimeError,
    ContextPolicy,
    InvalidRunInputError,
    MinimalAgentRuntime,
    RunInput,
    RunStream,
    RuntimeBudget,
    check_context_policy,
)
from harness_kernel.store import MemoryEventStore
from harness_tools import ToolRegistry

__all__ = [
    "ConversationRun",
    "ScenarioConversation",
    "ScenarioConversationTurn",
    "ScenarioSteer",
    "decode_conversation",
    "run_conversation",
]

_CONVERSATION_KEYS: Final = ("turns", "contextPolicy", "checkpoints")
_POLICY_KEYS: Final = ("windowTokens", "thresholdTokens", "tailMessages", "reserveTokens")


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioSteer:
    """Steering sent while a turn runs: ``content``, once an event matching ``after`` arrives."""

    after: EventInvariant
    content: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioConversationTurn:
    """One turn of a conversation: its input (``None``: the task's goal) and its steering."""

    input: str | None = None
    steer: tuple[ScenarioSteer, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioConversation:
    """The turns a scenario runs on the streaming runtime, and the options of every turn."""

    turns: tuple[ScenarioConversationTurn, ...] = (ScenarioConversationTurn(),)
    context_policy: ContextPolicy | None = None
    checkpoints: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ConversationRun:
    """What a conversation stored, the last turn's answer, and the steers that went wrong."""

    events: tuple[Event, ...]
    text: str
    failures: tuple[str, ...]


class ConversationFailedError(Exception):
    """A turn could not be started, or ended without its terminal events."""


class _Decoder(Protocol):
    """The parts of the scenario decoder this module uses (``harness_exit_gate.evals``)."""

    def issue(self, path: str, message: str) -> None: ...

    def mapping(self, value: object, path: str, allowed: tuple[str, ...]) -> dict[str, object] | None: ...

    def sequence(self, value: object, path: str, *, minimum: int = 0) -> list[object] | None: ...

    def text(self, value: object, path: str, *, kebab: bool = False, empty: bool = False) -> str | None: ...

    def invariant(self, value: object, path: str) -> EventInvariant | None: ...


# ------------------------------------------------------------------ decoding


def _policy(decoder: _Decoder, value: object) -> ContextPolicy | None:
    path = "conversation.contextPolicy"
    mapping = decoder.mapping(value, path, _POLICY_KEYS)
    if mapping is None:
        return None
    numbers: dict[str, int] = {"tailMessages": 8, "reserveTokens": 0}
    for key in _POLICY_KEYS:
        if key in ("windowTokens", "thresholdTokens") and key not in mapping:
            decoder.issue(join_path(path, key), "is required")
        elif key in mapping:
            number = mapping[key]
            if type(number) is int and number >= 0:
                numbers[key] = number
            else:
                decoder.issue(join_path(path, key), f"expected an integer >= 0, got {describe_kind(number)}")
    if len(numbers) < len(_POLICY_KEYS):
        return None
    try:
        return check_context_policy(
            ContextPolicy(
                window_tokens=numbers["windowTokens"],
                threshold_tokens=numbers["thresholdTokens"],
                tail_messages=numbers["tailMessages"],
                reserve_tokens=numbers["reserveTokens"],
            )
        )
    except InvalidRunInputError as error:
        decoder.issue(path, error.message)
        return None


def _steer(decoder: _Decoder, value: object, path: str) -> ScenarioSteer | None:
    mapping = decoder.mapping(value, path, ("after", "content"))
    if mapping is None:
        return None
    after = None
    if "after" in mapping:
        after = decoder.invariant(mapping["after"], join_path(path, "after"))
    else:
        decoder.issue(join_path(path, "after"), "is required")
    if after is not None and not is_event_type(after.type):
        decoder.issue(join_path(path, "after.type"), "unknown event type")
        after = None
    content = None
    if "content" in mapping:
        content = decoder.text(mapping["content"], join_path(path, "content"))
    else:
        decoder.issue(join_path(path, "content"), "is required")
    if after is None or content is None:
        return None
    return ScenarioSteer(after=after, content=content)


def _turn(decoder: _Decoder, value: object, index: int) -> ScenarioConversationTurn | None:
    path = join_path("conversation.turns", str(index))
    mapping = decoder.mapping(value, path, ("input", "steer"))
    if mapping is None:
        return None
    text = None
    if "input" in mapping:
        text = decoder.text(mapping["input"], join_path(path, "input"))
    elif index > 0:
        decoder.issue(join_path(path, "input"), "is required after the first turn")
    steers: list[ScenarioSteer | None] = []
    if "steer" in mapping:
        steer_path = join_path(path, "steer")
        items = decoder.sequence(mapping["steer"], steer_path, minimum=1)
        steers = [_steer(decoder, item, join_path(steer_path, str(i))) for i, item in enumerate(items or ())]
        if items is None:
            return None
    if ("input" in mapping or index > 0) and text is None:
        return None
    if None in steers:
        return None
    return ScenarioConversationTurn(input=text, steer=tuple(steer for steer in steers if steer is not None))


def decode_conversation(decoder: _Decoder, value: object) -> ScenarioConversation | None:
    """The scenario's ``conversation:`` (``turns``, ``contextPolicy`` and ``checkpoints``, all optional)."""
    mapping = decoder.mapping(value, "conversation", _CONVERSATION_KEYS)
    if mapping is None:
        return None
    turns: list[ScenarioConversationTurn | None] = [ScenarioConversationTurn()]
    if "turns" in mapping:
        items = decoder.sequence(mapping["turns"], "conversation.turns", minimum=1)
        turns = [_turn(decoder, item, index) for index, item in enumerate(items or ())]
        if items is None:
            return None
    policy = None
    if "contextPolicy" in mapping:
        policy = _policy(decoder, mapping["contextPolicy"])
    checkpoints = mapping.get("checkpoints", False)
    if type(checkpoints) is not bool:
        decoder.issue("conversation.checkpoints", f"expected a bool, got {describe_kind(checkpoints)}")
        return None
    if None in turns or ("contextPolicy" in mapping and policy is None):
        return None
    return ScenarioConversation(
        turns=tuple(turn for turn in turns if turn is not None),
        context_policy=policy,
        checkpoints=checkpoints,
    )


# ------------------------------------------------------------------ running


async def _drive(stream: RunStream, steers: Sequence[ScenarioSteer], label: str, failures: list[str]) -> None:
    """Consume one turn, sending each steer once an event matching its ``after`` was delivered.

    Raises:
        ConversationFailedError: the turn ended without ``agent.stopped``.
    """
    waiting = list(enumerate(steers))
    stopped = False
    async with stream:
        try:
            async for event in stream:
                stopped = stopped or event.type == "agent.stopped"
                if waiting and matches(event, waiting[0][1].after):
                    position, steer = waiting.pop(0)
                    try:
                        await stream.steer(steer.content)
                    except AgentRuntimeError as refused:
                        failures.append(
                            f"{label}.steer.{position}: refused ({refused.code}): {refused.message}"
                        )
        except Exception as error:
            # A failed or budget-exceeded turn raises its typed error after its terminal pair:
            # that outcome is in the events and is what the expectations check.
            if not stopped:
                raise ConversationFailedError(f"{label} ended before its end: {error}") from error
    failures.extend(
        f"{label}.steer.{position}: no event of the turn matched its after" for position, _ in waiting
    )


def _answer(events: Sequence[Event]) -> str:
    """The content of the last turn's output message (``""`` when it has none)."""
    completed = [event.data for event in events if type(event.data) is TurnCompletedData]
    output = completed[-1].output_message_id if completed else None
    for event in reversed(events):
        data = event.data
        if type(data) is AssistantMessageCompletedData and data.message_id == output:
            return data.content
    return ""


async def run_conversation(
    conversation: ScenarioConversation,
    *,
    goal: str,
    model: str,
    adapter: ModelAdapter,
    tools: ToolRegistry,
    workspace: object | None,
    permission: PermissionController | None,
    budget: RuntimeBudget,
    task_id: str,
    session_id: str,
    now: Callable[[], str],
    new_id: Callable[[str], str],
) -> ConversationRun:
    """Run every turn of ``conversation`` on one runtime, one session and one memory store.

    Turn N (from 1) has run id ``run-scenario-N`` and turn id ``turn-scenario-N``; the first
    turn's input is ``goal`` unless the turn names one.

    Raises:
        ConversationFailedError: a turn was refused at admission, or ended without its
            terminal events.
    """
    runtime = MinimalAgentRuntime()
    store = MemoryEventStore()
    failures: list[str] = []
    for index, turn in enumerate(conversation.turns):
        number = index + 1
        run_input = RunInput(
            run_id=f"run-scenario-{number}",
            session_id=session_id,
            turn_id=f"turn-scenario-{number}",
            input=goal if turn.input is None else turn.input,
            model=model,
            model_adapter=adapter,
            event_store=store,
            tools=tools,
            permission=permission,
            budget=budget,
            task_id=task_id,
            workspace=workspace,
            now=now,
            new_id=new_id,
            context_policy=conversation.context_policy,
            checkpoints=conversation.checkpoints,
        )
        label = f"conversation.turns.{index}"
        try:
            stream = runtime.run(run_input) if index == 0 else runtime.follow_up(run_input)
        except AgentRuntimeError as error:
            raise ConversationFailedError(f"{label} was refused: {error}") from error
        await _drive(stream, turn.steer, label, failures)
    events = store.events
    return ConversationRun(events=events, text=_answer(events), failures=tuple(failures))
