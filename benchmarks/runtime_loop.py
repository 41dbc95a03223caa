"""What one tool call costs in ``MinimalAgentRuntime``, in memory and on a durable store.

Run by hand (it is not a test): ``uv run python benchmarks/runtime_loop.py [--rounds R] [--calls C]``,
or ``… --context [--messages M] [--requests R] [--repeat K] [--sqlite]`` for the cost of context
accounting and compaction per model request on an M-message session (``_runtime_context.py``
says how it is measured).

In one run, on the same machine and disk (a fresh temporary directory per measurement):

1. ``MinimalAgentRuntime`` with ``FakeModel``: R rounds of C pure echo calls each (default
   50 x 20 = 1 000 calls), then a text turn, ``max_steps`` = R + 1, drained by a consumer
   that only counts; once with ``MemoryEventStore`` and once with ``SqliteEventStore`` on a
   fresh database file (tool calls/s, events/s);
2. the raw append rate: ``SqliteSessionStore.append`` of ``tool.call`` events in a loop on
   another fresh database, with the same settings (appends/s).

A tool call publishes four events (``tool.call``, ``policy.decision``, ``tool.result`` and
the tool's ``message.completed``), so its durable floor is four raw appends; the per-call
overhead is the SQLite run's time per call minus that floor. It prints a table and then one
JSON object (machine, Python and SQLite versions, parameters, results, ratios). Nothing is
asserted.

With ``--context`` it measures instead, in one run, each context policy (none, accounting
only, compaction at every request) with and without ``checkpoints=True`` on the same
session, and prints µs per request and the ratio to the request without a policy.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import msgspec
import trio
from _runtime_context import (
    VARIANTS,
    ContextSample,
    context_messages,
    median_us_per_request,
    run_variant,
    session_size,
)

from harness_kernel.events import Event, create_event
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.runtime import MinimalAgentRuntime, RunInput, RuntimeBudget
from harness_kernel.store import EventStore, MemoryEventStore, SqliteEventStore, SqliteSessionStore
from harness_tools import ToolRegistry, create_echo_tool

SESSION_ID = "bench"
APPENDS_PER_CALL = 4


def scripted_turns(rounds: int, calls: int) -> list[ScriptedTurn]:
    """R tool turns of C echo calls (ids unique in the run), then a text turn."""
    turns = [
        ScriptedTurn(
            tool_calls=[
                ToolCall(id=f"r{r}-c{c}", name="echo", arguments={"round": r, "call": c})
                for c in range(calls)
            ]
        )
        for r in range(rounds)
    ]
    turns.append(ScriptedTurn(content="done"))
    return turns


async def drive(store: EventStore, rounds: int, calls: int) -> tuple[float, int, int]:
    """(seconds, events, tool calls) of one drained run."""
    run_input = RunInput(
        run_id="run-bench",
        session_id=SESSION_ID,
        turn_id="turn-bench",
        input="run the echo rounds",
        model="fake-model/bench",
        model_adapter=FakeModel(scripted_turns(rounds, calls)),
        event_store=store,
        tools=ToolRegistry([create_echo_tool()]),
        budget=RuntimeBudget(max_steps=rounds + 1),
    )
    events = 0
    tool_calls = 0
    started = time.perf_counter()
    async with MinimalAgentRuntime().run(run_input) as stream:
        async for event in stream:
            events += 1
            if event.type == "tool.call":
                tool_calls += 1
            elif event.type == "turn.completed" and getattr(event.data, "status", None) != "completed":
                raise SystemExit(f"the benchmark run did not complete: {event.data}")
    return time.perf_counter() - started, events, tool_calls


async def memory_run(rounds: int, calls: int) -> tuple[float, int, int]:
    return await drive(MemoryEventStore(), rounds, calls)


async def sqlite_run(directory: Path, rounds: int, calls: int) -> tuple[float, int, int]:
    async with SqliteSessionStore(directory / "runtime.db") as store:
        await store.create(SESSION_ID)
        return await drive(SqliteEventStore(store, SESSION_ID), rounds, calls)


def raw_event(index: int) -> Event:
    """A ``tool.call`` like the ones the runtime appends."""
    return create_event(
        "tool.call",
        {
            "callId": f"call-{index}",
            "tool": "echo",
            "input": {"round": index // 20, "call": index % 20},
            "runId": "run-raw",
            "sessionId": SESSION_ID,
            "turnId": "turn-raw",
            "requestId": f"req-{index // 20}",
            "modelCallId": f"m-{index}",
        },
    )


async def raw_appends_per_second(directory: Path, count: int) -> float:
    events = [raw_event(i) for i in range(count)]
    async with SqliteSessionStore(directory / "raw.db") as store:
        await store.create(SESSION_ID)
        started = time.perf_counter()
        for event in events:
            await store.append(SESSION_ID, event)
        return count / (time.perf_counter() - started)


def machine_report() -> dict[str, object]:
    return {
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor(),
        },
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "msgspec": msgspec.__version__,
    }


def context_main(messages: int, requests: int, repeat: int, sqlite: bool) -> None:
    """The ``--context`` measurement: µs per request of each policy, with and without checkpoints."""
    context = context_messages(messages)
    rows = [(variant, checkpoints) for checkpoints in (False, True) for variant in VARIANTS]
    samples: dict[tuple[str, bool], list[ContextSample]] = {row: [] for row in rows}
    with tempfile.TemporaryDirectory() as directory:
        for attempt in range(repeat):
            for variant, checkpoints in rows:
                folder = Path(directory) / str(attempt) if sqlite else None
                if folder is not None:
                    folder.mkdir(exist_ok=True)
                turn = partial(run_variant, checkpoints=checkpoints, sqlite_dir=folder)
                sample = trio.run(turn, context, requests, variant)
                samples[(variant, checkpoints)].append(sample)
    baseline = median_us_per_request(samples[("none", False)])
    results: dict[str, dict[str, object]] = {}
    for variant, checkpoints in rows:
        taken = samples[(variant, checkpoints)]
        us = median_us_per_request(taken)
        same_policy = median_us_per_request(samples[(variant, False)])
        results[f"{variant}{'+checkpoints' if checkpoints else ''}"] = {
            "policy": variant,
            "checkpoints": checkpoints,
            "requests": taken[0].requests,
            "compactions": taken[0].compactions,
            "events": taken[0].events,
            "us_per_request": us,
            "added_us_per_request": us - baseline,
            "ratio_to_none": us / baseline,
            "ratio_to_same_policy_without_checkpoints": us / same_policy,
            "samples_us_per_request": [sample.seconds / sample.requests * 1e6 for sample in taken],
            "admission_ms": statistics.median(sample.admission_seconds * 1e3 for sample in taken),
        }
    size = session_size(context)
    store = "SqliteEventStore (synchronous=FULL)" if sqlite else "MemoryEventStore"
    print(
        f"python {sys.version.split()[0]}, {platform.machine()}; a {size['messages']:,}-message session"
        f" ({size['request_bytes']:,} bytes of request JSON), {requests} requests per turn"
        f" (echo rounds, then text), {store}, median of {repeat}"
    )
    print(
        f"{'policy':<14}{'checkpoints':>12}{'compactions':>12}{'µs/request':>12}{'+µs':>10}"
        f"{'x none':>8}{'x same':>8}{'admission ms':>14}"
    )
    for row in results.values():
        print(
            f"{row['policy']!s:<14}{'yes' if row['checkpoints'] else 'no':>12}{row['compactions']!s:>12}"
            f"{row['us_per_request']:>12,.1f}{row['added_us_per_request']:>+10,.1f}"
            f"{row['ratio_to_none']:>8.2f}{row['ratio_to_same_policy_without_checkpoints']:>8.2f}"
            f"{row['admission_ms']:>14,.1f}"
        )
    print(
        "x none: against the request without a policy or checkpoints; x same: against the same policy"
        " without checkpoints; admission (context validation, turn checkpoint) is not timed per request"
    )
    report = {
        "benchmark": "runtime_loop.context",
        **machine_report(),
        "parameters": {
            "messages": messages,
            "session_request_bytes": size["request_bytes"],
            "requests_per_turn": requests,
            "repeat": repeat,
            "store": "sqlite" if sqlite else "memory",
            "compaction_tail_messages": max(messages - 8, 0),
        },
        "results": results,
        "ratios": {name: row["ratio_to_none"] for name, row in results.items()},
    }
    print(json.dumps(report, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=50, help="tool rounds (R)")
    parser.add_argument("--calls", type=int, default=20, help="echo calls per round (C)")
    parser.add_argument("--raw-appends", type=int, default=2000, help="appends for the raw rate")
    context = parser.add_argument_group("--context: accounting and compaction per request")
    context.add_argument(
        "--context", action="store_true", help="measure context accounting and compaction instead"
    )
    context.add_argument("--messages", type=int, default=1000, help="messages in the session (M)")
    context.add_argument("--requests", type=int, default=40, help="model requests per turn")
    context.add_argument("--repeat", type=int, default=5, help="turns per variant; the median is reported")
    context.add_argument("--sqlite", action="store_true", help="a SQLite store instead of the memory one")
    arguments = parser.parse_args()
    if arguments.context:
        context_main(arguments.messages, arguments.requests, arguments.repeat, arguments.sqlite)
        return
    rounds: int = arguments.rounds
    calls: int = arguments.calls
    raw_count: int = arguments.raw_appends

    results: dict[str, dict[str, float]] = {}
    seconds, events, tool_calls = trio.run(memory_run, rounds, calls)
    results["memory"] = {"seconds": seconds, "events": events, "tool_calls": tool_calls}
    with tempfile.TemporaryDirectory() as run_dir:
        seconds, events, tool_calls = trio.run(sqlite_run, Path(run_dir), rounds, calls)
    results["sqlite"] = {"seconds": seconds, "events": events, "tool_calls": tool_calls}
    with tempfile.TemporaryDirectory() as raw_dir:
        raw_rate = trio.run(raw_appends_per_second, Path(raw_dir), raw_count)
    for row in results.values():
        row["tool_calls_per_s"] = row["tool_calls"] / row["seconds"]
        row["events_per_s"] = row["events"] / row["seconds"]
        row["us_per_call"] = row["seconds"] / row["tool_calls"] * 1e6
    floor_us = APPENDS_PER_CALL / raw_rate * 1e6
    sqlite_row = results["sqlite"]
    overhead_us = sqlite_row["us_per_call"] - floor_us
    ratios = {
        "sqlite_events_per_s_to_raw_appends_per_s": sqlite_row["events_per_s"] / raw_rate,
        "sqlite_call_time_to_four_raw_appends": sqlite_row["us_per_call"] / floor_us,
        "memory_call_time_to_four_raw_appends": results["memory"]["us_per_call"] / floor_us,
    }

    versions = f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}"
    print(f"{versions}, {platform.machine()}; {rounds} rounds x {calls} calls, then a text turn")
    print(
        f"{'store':<8}{'tool calls':>11}{'events':>8}{'seconds':>9}"
        f"{'calls/s':>10}{'events/s':>10}{'µs/call':>10}"
    )
    for name, row in results.items():
        print(
            f"{name:<8}{row['tool_calls']:>11,.0f}{row['events']:>8,.0f}{row['seconds']:>9.3f}"
            f"{row['tool_calls_per_s']:>10,.0f}{row['events_per_s']:>10,.0f}{row['us_per_call']:>10,.1f}"
        )
    print(f"raw SqliteSessionStore.append: {raw_rate:,.0f}/s ({raw_count:,} appends)")
    print(
        f"per call on SQLite: {sqlite_row['us_per_call']:,.1f} µs = {floor_us:,.1f} µs for four raw appends"
        f" + {overhead_us:,.1f} µs runtime overhead"
        f" ({ratios['sqlite_call_time_to_four_raw_appends']:.2f}x the floor)"
    )
    report = {
        "benchmark": "runtime_loop",
        **machine_report(),
        "parameters": {
            "rounds": rounds,
            "calls_per_round": calls,
            "max_steps": rounds + 1,
            "raw_appends": raw_count,
            "appends_per_call": APPENDS_PER_CALL,
            "synchronous": "FULL",
        },
        "results": {
            "runs": results,
            "raw_appends_per_s": raw_rate,
            "four_raw_appends_us": floor_us,
            "sqlite_overhead_us_per_call": overhead_us,
        },
        "ratios": ratios,
    }
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
