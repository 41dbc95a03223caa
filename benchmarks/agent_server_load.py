"""Load on the agent server: concurrent sessions, prompt latency, memory, and malformed-frame survival.

Run by hand (it is not a test): ``uv run python benchmarks/agent_server_load.py [--levels 1,100,500]``.

In one process, the server runs in-process on an ephemeral 127.0.0.1 port (SQLite store in a
temporary directory, the scripted FakeModel, the ``echo`` tool). Then:

1. for each concurrency level, one after another, that many WebSocket sessions at once, each:
   connect, ``initialize``, ``session/new``, a short prompt drained to its result. One session in
   eight calls ``echo`` and so makes a permission round trip. Per session the streamed ``seq``
   must be contiguous; the level reports sessions/s and p50/p99 prompt round-trip latency;
2. RSS per idle connection: open ``--idle`` initialised connections and compare
   ``VmRSS`` from ``/proc/self/status`` before and after (client and server share the process,
   so this is an upper bound for the server);
3. a burst of malformed input (non-JSON, binary, oversized and over-fragmented messages, bad
   handshakes), after which ``/health`` must still answer 200.

It prints a table and then one JSON object. Every phase is bounded by ``--timeout`` seconds
(500 sessions plus idle connections need ``ulimit -n`` above about 1 300);
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

from agent_server import ServerConfig, ServerHandle, ToolProviderContext, serve
from agent_server.client import AcpClient, connect
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_tools import Tool, create_echo_tool

TOOL_TURNS = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hi"})]),
    ScriptedTurn(content="done"),
)
PLAIN_TURNS = (ScriptedTurn(content="done"),)
PERMISSION_EVERY = 8


def echo_tools(context: ToolProviderContext) -> list[Tool[Any]]:
    return [create_echo_tool()]


def tool_model() -> FakeModel:
    return FakeModel(TOOL_TURNS)


def plain_model() -> FakeModel:
    return FakeModel(PLAIN_TURNS)


def rss_kib() -> int:
    """The current resident set size from ``/proc/self/status`` (0 where it does not exist)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def one_session(handle: ServerHandle, index: int, latencies: list[float], failures: list[str]) -> None:
    model = "tool" if index % PERMISSION_EVERY == 0 else "plain"
    try:
        async with connect(handle.url) as client:
            await client.initialize()
            created = await client.request("session/new", {"workspace": "ws", "model": model})
            started = time.perf_counter()
            result, notes = await client.prompt(created["sessionId"], "go")
            latencies.append(time.perf_counter() - started)
            seqs = [note["params"]["seq"] for note in notes]
            if result["status"] != "completed" or seqs != list(range(len(seqs))):
                failures.append(f"session {index}: {result['status']}, seq {seqs}")
    except Exception as error:
        failures.append(f"session {index}: {error!r}")


async def run_level(handle: ServerHandle, count: int, phase_seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    failures: list[str] = []
    started = time.perf_counter()
    with trio.move_on_after(phase_seconds) as scope:
        async with trio.open_nursery() as nursery:
            for index in range(count):
                nursery.start_soon(one_session, handle, index, latencies, failures)
    elapsed = time.perf_counter() - started
    return {
        "sessions": count,
        "completed": len(latencies),
        "failures": len(failures) + (1 if scope.cancelled_caught else 0),
        "seconds": elapsed,
        "sessions_per_s": len(latencies) / elapsed,
        "prompt_p50_ms": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "prompt_p99_ms": percentile(latencies, 0.99) * 1000 if latencies else float("nan"),
    }


async def idle_connections(handle: ServerHandle, count: int, phase_seconds: float) -> dict[str, float]:
    before = after = rss_kib()
    opened = 0
    with trio.move_on_after(phase_seconds):
        async with AsyncExitStack() as stack:
            for _ in range(count):
                client: AcpClient = await stack.enter_async_context(connect(handle.url))
                await client.initialize()
                opened += 1
            after = rss_kib()
    return {
        "connections": opened,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "kib_per_connection": (after - before) / opened if opened else float("nan"),
    }


async def raw_exchange(port: int, data: bytes) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        while await stream.receive_some(65_536):
            pass


async def malformed_burst(handle: ServerHandle, rounds: int, phase_seconds: float) -> dict[str, object]:
    closes: dict[str, int] = {}

    async def offend(kind: str) -> None:
        async with connect(handle.url) as client:
            if kind == "non-json":
                await client.send_text("{nope")
                await client.strays.receive()
                closes[kind] = closes.get(kind, 0) + 1
                return
            if kind == "binary":
                await client.send_binary(b"\x00")
            elif kind == "oversized":
                await client.send_text("x" * (1024 * 1024 + 1))
            else:
                await client.send_fragments(["x"] * 1025)
            code = await client.wait_closed()
            closes[f"{kind}:{code}"] = closes.get(f"{kind}:{code}", 0) + 1

    bad_handshake = b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n"
    with trio.move_on_after(phase_seconds):
        async with trio.open_nursery() as nursery:
            for _ in range(rounds):
                for kind in ("non-json", "binary", "oversized", "fragments"):
                    nursery.start_soon(offend, kind)
                nursery.start_soon(raw_exchange, handle.port, bad_handshake)
    stream = await trio.open_tcp_stream("127.0.0.1", handle.port)
    async with stream:
        await stream.send_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = await stream.receive_some(65_536)
    return {"closes": closes, "health_after": reply.split(b"\r\n", 1)[0].decode()}


async def run(arguments: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "root"
        (root / "ws").mkdir(parents=True)
        config = ServerConfig(
            port=0,
            workspace_root=str(root),
            db_path=str(Path(directory) / "state" / "sessions.sqlite"),
            tools=echo_tools,
            models={"plain": plain_model, "tool": tool_model},
            max_connections=max(1024, max(arguments.levels) + arguments.idle + 64),
        )
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve, config)
            # Idle memory first, before the load levels leave freed heap behind for reuse.
            idle = await idle_connections(handle, arguments.idle, arguments.timeout)
            levels = [await run_level(handle, count, arguments.timeout) for count in arguments.levels]
            burst = await malformed_burst(handle, arguments.malformed, arguments.timeout)
            await handle.aclose()
    return {"levels": levels, "idle": idle, "malformed": burst, "peak_rss_mib": peak_rss_mib()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--levels",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[1, 100, 500],
        help="concurrent sessions per level, comma-separated",
    )
    parser.add_argument("--idle", type=int, default=200, help="idle connections for the RSS measurement")
    parser.add_argument("--malformed", type=int, default=20, help="rounds of malformed input")
    parser.add_argument("--timeout", type=float, default=120.0, help="upper bound per phase, seconds")
    arguments = parser.parse_args()
    report = trio.run(run, arguments)

    print(f"python {sys.version.split()[0]}, {platform.machine()}; loopback only")
    print(
        f"{'sessions':>9}{'completed':>11}{'failures':>10}{'seconds':>9}"
        f"{'sessions/s':>12}{'p50 ms':>9}{'p99 ms':>9}"
    )
    for row in report["levels"]:
        print(
            f"{row['sessions']:>9}{row['completed']:>11}{row['failures']:>10}{row['seconds']:>9.2f}"
            f"{row['sessions_per_s']:>12.1f}{row['prompt_p50_ms']:>9.1f}{row['prompt_p99_ms']:>9.1f}"
        )
    idle = report["idle"]
    print(
        f"idle connections: {idle['connections']},"
        f" RSS {idle['rss_before_kib']:,} -> {idle['rss_after_kib']:,} KiB,"
        f" {idle['kib_per_connection']:.1f} KiB per connection (client and server)"
    )
    burst = report["malformed"]
    print(f"malformed burst: {burst['closes']}; /health after: {burst['health_after']}")
    print(f"peak RSS: {report['peak_rss_mib']:.1f} MiB")
    summary = {
        "benchmark": "agent_server_load",
        "machine": {"platform": platform.platform(), "machine": platform.machine()},
        "python": sys.version.split()[0],
        "parameters": {
            "levels": arguments.levels,
            "idle": arguments.idle,
            "malformed": arguments.malformed,
            "timeout": arguments.timeout,
            "permission_every": PERMISSION_EVERY,
        },
        "results": report,
    }
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
