"""What context accounting and compaction cost per model request on a long session.

Used by ``benchmarks/runtime_loop.py --context`` (run by hand, not a test). One turn of
``MinimalAgentRuntime`` starts from a session of M messages (default 1 000: user questions,
assistant answers, echo calls and their results, of realistic and varied sizes, drawn from a
fixed seed) and makes R model requests (default 40): R - 1 rounds of one echo call, then a
text answer. The same turn runs with each context policy, with and without
``checkpoints=True``:

- ``none``: no policy, the baseline;
- ``accounting``: a policy whose window and threshold are never reached, so every request is
  measured (``context.accounted``) and nothing is compacted;
- ``compaction``: a threshold of 1 token and a tail of M - 8 messages, so every request first
  compacts the few messages before the tail (the model answers the summary request with a
  fixed summary; the session stays near M messages, so each request re-measures a
  1 000-message context, as after any compaction).

The clock starts when the consumer receives the turn's input message (admission, with the
validation of the M context messages and the turn's checkpoint, is not a request's cost)
and stops at ``agent.stopped``; a request's cost is that time over R. Variants run
round-robin, K times each (default 5); the median is reported, every sample is in the JSON.
Model usage is given explicitly, so the scripted model never measures the prompt.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness_kernel.models import (
    AssistantMessage,
    ChatMessage,
    FakeModel,
    ModelEvent,
    ModelRequest,
    ScriptedTurn,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from harness_kernel.runtime import ContextPolicy, MinimalAgentRuntime, RunInput, RuntimeBudget
from harness_kernel.runtime._context import SUMMARY_INSTRUCTION, request_bytes
from harness_kernel.store import EventStore, MemoryEventStore, SqliteEventStore, SqliteSessionStore
from harness_tools import ToolRegistry, create_echo_tool

__all__ = [
    "VARIANTS",
    "ContextSample",
    "context_messages",
    "median_us_per_request",
    "run_variant",
    "session_size",
]

SESSION_ID: Final = "bench-context"
NEVER: Final = 2**53 - 1
"""A window and threshold no request reaches."""
KEPT_AFTER_COMPACTION: Final = 8
"""How many fewer messages than the session the compaction variant's tail keeps."""
USAGE: Final = Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)
SUMMARY: Final = "The user asked for the echo probes; every probe so far answered ok."
VARIANTS: Final = ("none", "accounting", "compaction")

_WORDS: Final = (
    *("the", "module", "reads", "its", "configuration", "then", "validates", "every", "entry"),
    *("and", "reports", "what", "failed", "while", "the", "test", "suite", "runs", "against"),
    *("a", "temporary", "directory", "with", "fixtures", "for", "each", "case"),
)


def _text(rng: random.Random, low: int, high: int) -> str:
    """Prose of ``low``..``high`` characters."""
    size = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def context_messages(count: int, *, seed: int = 23) -> list[ChatMessage]:
    """``count`` messages of a realistic session, in cycles of four.

    A user question (80..600 characters), an assistant call of the echo tool (arguments of
    40..240 characters), its result (the tool's JSON, 100..2 000 characters) and an
    assistant answer (60..900 characters); the session never ends on an open call.
    """
    rng = random.Random(seed)
    messages: list[ChatMessage] = []
    cycle = 0
    while len(messages) < count:
        call = ToolCall(id=f"ctx-{cycle}", name="echo", arguments={"query": _text(rng, 40, 240)})
        result = '{"echo":"ok","received":{"query":"' + _text(rng, 100, 2_000) + '"}}'
        messages.extend(
            (
                UserMessage(content=_text(rng, 80, 600)),
                AssistantMessage(content="", tool_calls=(call,)),
                ToolMessage(content=result, name="echo", tool_call_id=call.id),
                AssistantMessage(content=_text(rng, 60, 900)),
            )
        )
        cycle += 1
    del messages[count:]
    if count % 4 == 2:
        # The last message would be a call without its result: answer in text instead.
        messages[-1] = AssistantMessage(content=_text(rng, 60, 900))
    return messages


class _Model:
    """The scripted model: summary requests get the fixed summary, others the next turn."""

    def __init__(self, requests: int) -> None:
        turns = [
            ScriptedTurn(tool_calls=[ToolCall(id=f"r{n}", name="echo", arguments={"n": n})], usage=USAGE)
            for n in range(requests - 1)
        ]
        turns.append(ScriptedTurn(content="Every probe answered ok.", usage=USAGE))
        self._turns = FakeModel(turns)
        self._summaries = FakeModel([ScriptedTurn(content=SUMMARY, usage=USAGE)] * requests)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1] if request.messages else None
        if request.tools is None and type(last) is UserMessage and last.content == SUMMARY_INSTRUCTION:
            return self._summaries.stream(request)
        return self._turns.stream(request)


def _policy(variant: str, messages: int) -> ContextPolicy | None:
    if variant == "none":
        return None
    if variant == "accounting":
        return ContextPolicy(window_tokens=NEVER, threshold_tokens=NEVER)
    return ContextPolicy(
        window_tokens=NEVER, threshold_tokens=1, tail_messages=max(messages - KEPT_AFTER_COMPACTION, 0)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextSample:
    """One drained turn: the timed part's seconds, its requests, compactions and events."""

    seconds: float
    requests: int
    compactions: int
    events: int
    admission_seconds: float


async def _drive(store: EventStore, run_input: RunInput) -> ContextSample:
    started = time.perf_counter()
    timed_from: float | None = None
    stopped = started
    requests = compactions = events = 0
    async with MinimalAgentRuntime().run(run_input) as stream:
        async for event in stream:
            events += 1
            kind = event.type
            if kind == "message.completed" and timed_from is None:
                timed_from = time.perf_counter()
            elif kind == "model.request":
                requests += 1
            elif kind == "context.compacted":
                compactions += 1
            elif kind == "turn.completed" and getattr(event.data, "status", None) != "completed":
                raise SystemExit(f"the benchmark turn did not complete: {event.data}")
            elif kind == "agent.stopped":
                stopped = time.perf_counter()
    assert timed_from is not None
    return ContextSample(
        seconds=stopped - timed_from,
        requests=requests,
        compactions=compactions,
        events=events,
        admission_seconds=timed_from - started,
    )


def _input(
    store: EventStore, context: Sequence[ChatMessage], requests: int, variant: str, checkpoints: bool
) -> RunInput:
    return RunInput(
        run_id="run-bench-context",
        session_id=SESSION_ID,
        turn_id="turn-bench-context",
        input="Probe the echo tool once per round and report.",
        model="fake-model/bench",
        model_adapter=_Model(requests),
        event_store=store,
        tools=ToolRegistry([create_echo_tool()]),
        budget=RuntimeBudget(max_steps=requests),
        context=list(context),
        context_policy=_policy(variant, len(context)),
        checkpoints=checkpoints,
    )


async def run_variant(
    context: Sequence[ChatMessage],
    requests: int,
    variant: str,
    *,
    checkpoints: bool,
    sqlite_dir: Path | None = None,
) -> ContextSample:
    """Drain one turn of ``variant`` on a fresh store (SQLite in ``sqlite_dir`` when given)."""
    if sqlite_dir is None:
        store = MemoryEventStore()
        return await _drive(store, _input(store, context, requests, variant, checkpoints))
    async with SqliteSessionStore(sqlite_dir / f"{variant}-{checkpoints}.db") as sessions:
        await sessions.create(SESSION_ID)
        store = SqliteEventStore(sessions, SESSION_ID)
        return await _drive(store, _input(store, context, requests, variant, checkpoints))


def session_size(context: Sequence[ChatMessage]) -> dict[str, int]:
    """The session's messages and the UTF-8 bytes of its request JSON (no tools, no system)."""
    return {"messages": len(context), "request_bytes": request_bytes(context, system=None, tools=None)}


def median_us_per_request(samples: Sequence[ContextSample]) -> float:
    """The median over ``samples`` of the timed part's µs per model request."""
    return statistics.median(sample.seconds / sample.requests * 1e6 for sample in samples)
