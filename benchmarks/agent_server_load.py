"""Load and failure scenarios of the agent server (spec §10): figures and one verdict per expectation.

Run by hand (it is not a test): ``uv run python benchmarks/agent_server_load.py [--quick]``.
Loopback only; every phase is bounded by ``--timeout`` seconds and the script stops by itself.
It exits 1 when an expectation fails.

Phases:

1. **levels** (server in this process, SQLite store in a temporary directory, scripted
   FakeModel, the ``echo`` tool): 1, 100 and 500 concurrent sessions, one level after another.
   Each session connects, initialises, creates a session and runs a short prompt; one in eight
   calls ``echo``, which asks (no manifest), so it makes a permission round trip. Per session the
   streamed ``seq`` must be contiguous and a restore from -1 must return exactly the streamed
   events. Reports sessions/s, p50/p99 prompt round trip and peak RSS (client and server share
   this process, so RSS is an upper bound for the server).
2. **idle**: RSS per idle initialised connection.
3. **mixed**: a baseline of plain sessions alone, then the same sessions mixed with offending
   connections (non-JSON, binary, invalid UTF-8, oversized, over-fragmented messages, bad
   handshakes, half frames, slow request heads). Each offender must end with its documented
   status or close code, ``/health`` must answer, and the sessions' p50 must stay within 2x
   the baseline. Half frames take the server's 30 s incomplete-frame timeout, slow heads 10 s.
4. **stalled** (a fresh server subprocess with a ``run`` seam whose runs stream 32 events of
   64 KiB, then wait): control connections run that workload and read normally; then as many
   clients run it and stop reading mid-prompt. Each stalled client must be closed with 1013
   (then aborted); the server's RSS per stalled connection beyond a control, while stalled and
   after ``malloc_trim``, must stay under the outbound cap (spec §10; the server keeps its queue
   plus the one message waiting for room within the cap), must be mostly released after the
   closes (what stays is at most a quarter of the stalled growth: allocator arenas, not a leak
   that pins the queue), and every committed event must be restorable. When the cap is
   exceeded, a second pass under tracemalloc prints where the memory was allocated.
5. **cycles** (server in a subprocess, so its descriptors are counted honestly from
   ``/proc/<pid>/fd``): 10 000 connect/initialize/close cycles (every tenth also creates a
   session, canceled at disconnect). Descriptors and active store rows return to baseline.
   The trio task count is measured on the in-process server of phase 1 over a smaller run.
6. **sigterm** (subprocess): sessions in flight, SIGTERM; every client sees 1001 or its
   completed response within 10 s, the process exits 0, and the store passes
   ``PRAGMA integrity_check`` and opens cleanly.

500 sessions plus idle connections need ``ulimit -n`` above about 1 300; the script raises the
soft limit to the hard one.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import math
import os
import platform
import resource
import secrets
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from agent_server import ServerConfig, ServerHandle, ToolProviderContext, serve
from agent_server.client import (
    AcpClient,
    AcpClientError,
    ConnectionClosedError,
    HandshakeRejectedError,
    JsonObject,
    connect,
    initialize_params,
)
from harness_kernel.events import create_event
from harness_kernel.legacy import RunCanceledError, RunOptions, RunResult
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.store import SqliteSessionStore
from harness_tools import Tool, create_echo_tool

TOOL_TURNS = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hi"})]),
    ScriptedTurn(content="done"),
)
PLAIN_TURNS = (ScriptedTurn(content="done"),)
PERMISSION_EVERY: Final = 8
MAX_MESSAGE_BYTES: Final = 1024 * 1024
STALL_MESSAGE_BYTES: Final = 262_144
STALL_DELTA_BYTES: Final = 65_536
STALL_EVENTS: Final = 32
"""Events per run in the stalled phase, stalled and control alike: 2 MiB, four times the cap."""
SCRIPT: Final = Path(__file__).resolve()
STALL_RESIDUAL_SHARE: Final = 0.25
"""After the 1013 closes, what may stay per connection, as a share of the stalled growth."""
SIGTERM_SECONDS: Final = 10.0
SCENARIO_SCRIPT: Final = """\
- toolCalls:
    - {id: call-1, name: echo, arguments: {message: hi}}
- content: done
"""


def echo_tools(context: ToolProviderContext) -> list[Tool[Any]]:
    return [create_echo_tool()]


def tool_model() -> FakeModel:
    return FakeModel(TOOL_TURNS)


def plain_model() -> FakeModel:
    return FakeModel(PLAIN_TURNS)


# ------------------------------------------------------------------ verdicts and measurements


@dataclass
class Verdicts:
    """Every expectation checked, in order, with its figures."""

    rows: list[tuple[str, bool, str]] = field(default_factory=list[tuple[str, bool, str]])

    def expect(self, name: str, passed: bool, detail: str) -> None:
        self.rows.append((name, passed, detail))
        print(f"  [{'PASS' if passed else 'FAIL'}] {name}: {detail}", flush=True)

    @property
    def failed(self) -> int:
        return sum(1 for _, passed, _ in self.rows if not passed)


def rss_kib(pid: int | str = "self") -> int:
    """The resident set size from ``/proc/<pid>/status`` (0 where it does not exist)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def trio_task_count() -> int:
    """Every live task of this trio run, found by walking the task tree from the root."""
    count = 0
    root = trio.lowlevel.current_root_task()
    assert root is not None
    pending = [root]
    while pending:
        task = pending.pop()
        count += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count


async def http_status(port: int, request: bytes) -> int:
    """Send raw request bytes and return the reply's HTTP status (0 when there is none)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        reply = b""
        try:
            while chunk := await stream.receive_some(65_536):
                reply += chunk
        except trio.BrokenResourceError:
            pass
    parts = reply.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


async def health(port: int) -> int:
    return await http_status(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")


async def replay_all(client: AcpClient, session_id: str) -> list[JsonObject]:
    """Every stored event of ``session_id``, restored page by page from ``afterSeq`` -1."""
    notes: list[JsonObject] = []
    after = -1
    while True:
        params = {"sessionId": session_id, "afterSeq": after, "limit": 1000}
        result = await client.request("session/restore", params)
        notes.extend(note["params"] for note in client.drain_notifications())
        after = result["replayedThroughSeq"]
        if not result["hasMore"]:
            return notes


# ------------------------------------------------------------------ raw WebSocket offenders


class RawSocket:
    """An upgraded socket driven frame by frame with wsproto's frame-level ``Connection``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.frames = Connection(ConnectionType.CLIENT)
        self._parts: list[str] = []

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send_request(self, request_id: int, method: str, params: JsonObject) -> None:
        document = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.send(self.frames.send(TextMessage(data=json.dumps(document))))

    async def messages(self) -> list[str]:
        """Read once; the text messages completed by what arrived (raises once the stream ends)."""
        data = await self.stream.receive_some(65_536)
        if not data:
            raise ConnectionError("the server ended the stream")
        self.frames.receive_data(data)
        complete: list[str] = []
        for event in self.frames.events():
            if isinstance(event, TextMessage):
                self._parts.append(event.data)
                if event.message_finished:
                    complete.append("".join(self._parts))
                    self._parts.clear()
        return complete

    async def close_code(self) -> int | None:
        """Read until the server ends the stream; the code of its close frame, if one came."""
        code: int | None = None
        while True:
            try:
                data = await self.stream.receive_some(65_536)
            except trio.BrokenResourceError:
                return code
            if not data:
                return code
            self.frames.receive_data(data)
            for event in self.frames.events():
                if isinstance(event, CloseConnection):
                    code = event.code


@asynccontextmanager
async def raw_websocket(
    port: int, token: str, *, receive_buffer: int | None = None
) -> AsyncGenerator[RawSocket]:
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)
    async with stream:
        handshake = WSConnection(ConnectionType.CLIENT)
        bearer = [(b"authorization", f"Bearer {token}".encode())]
        await stream.send_all(handshake.send(Request(host="127.0.0.1", target="/acp", extra_headers=bearer)))
        accepted = False
        while not accepted:
            data = await stream.receive_some(65_536)
            if not data:
                raise ConnectionError("the server ended the stream during the handshake")
            handshake.receive_data(data)
            accepted = any(isinstance(event, AcceptConnection) for event in handshake.events())
        yield RawSocket(stream)


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A final client frame built by hand, only for a payload wsproto refuses to build (bad UTF-8)."""
    mask = os.urandom(4)
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


def url_token(url: str) -> str:
    """The ``?token=`` of a URL this script built (every connection here authenticates)."""
    return parse_qs(urlsplit(url).query)["token"][0]


async def offend(port: int, url: str, kind: str) -> str:
    """Run one offending connection; its observed outcome (``close 1003``, ``HTTP 400``, ...)."""
    if kind == "bad handshake":
        bearer = f"Authorization: Bearer {url_token(url)}\r\n".encode()
        bad = (
            b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
            + bearer
            + b"\r\n"
        )
        return f"HTTP {await http_status(port, bad)}"
    if kind == "wrong token":
        try:
            async with connect(url, token="x" * 43):
                return "accepted"
        except HandshakeRejectedError as refused:
            return f"HTTP {refused.status}"
    if kind == "slow request head":
        status = await http_status(port, b"GET /acp HTTP/1.1\r\nHost: x\r\n")
        return f"HTTP {status}"
    if kind in ("non-JSON", "binary", "oversized", "over-fragmented"):
        async with connect(url) as client:
            if kind == "non-JSON":
                await client.send_text("{nope")
                stray = await client.strays.receive()
                return f"error {stray['error']['code']}"
            if kind == "binary":
                await client.send_binary(b"\x00\x01")
            elif kind == "oversized":
                await client.send_text("x" * (MAX_MESSAGE_BYTES + 1))
            else:
                await client.send_fragments(["x"] * 1025)
            return f"close {await client.wait_closed()}"
    async with raw_websocket(port, url_token(url)) as raw:
        if kind == "invalid UTF-8":
            await raw.send(masked_frame(0x1, b'{"a":"\xff\xfe"}'))
        else:  # half frame: two bytes of a frame header, then silence
            whole = raw.frames.send(TextMessage(data='{"jsonrpc":"2.0","id":1,"method":"initialize"}'))
            await raw.send(whole[:2])
        return f"close {await raw.close_code()}"


EXPECTED_OUTCOMES: Final = {
    "non-JSON": "error -32700",
    "binary": "close 1003",
    "invalid UTF-8": "close 1007",
    "oversized": "close 1009",
    "over-fragmented": "close 1009",
    "bad handshake": "HTTP 400",
    "wrong token": "HTTP 403",
    "half frame": "close 1002",
    "slow request head": "HTTP 408",
}


# ------------------------------------------------------------------ phase 1 and 3: sessions


@dataclass
class LevelResult:
    sessions: int
    latencies: list[float]
    failures: list[str]
    seconds: float
    timed_out: bool


async def one_session(url: str, index: int, latencies: list[float], failures: list[str]) -> None:
    model = "tool" if index % PERMISSION_EVERY == 0 else "plain"
    try:
        async with connect(url) as client:
            await client.initialize()
            created = await client.request("session/new", {"workspace": "ws", "model": model})
            session_id = created["sessionId"]
            started = time.perf_counter()
            result, notes = await client.prompt(session_id, "go")
            latencies.append(time.perf_counter() - started)
            streamed = [note["params"] for note in notes]
            seqs = [note["seq"] for note in streamed]
            if result["status"] != "completed" or seqs != list(range(len(seqs))):
                failures.append(f"session {index}: {result['status']}, seq {seqs}")
                return
            asked = any(note["event"]["type"] == "permission.requested" for note in streamed)
            if asked != (model == "tool"):
                failures.append(f"session {index}: permission round trip {asked}, model {model}")
            if await replay_all(client, session_id) != streamed:
                failures.append(f"session {index}: restore from -1 differs from the streamed events")
    except Exception as error:
        failures.append(f"session {index}: {error!r}")


async def run_level(url: str, count: int, seconds: float) -> LevelResult:
    latencies: list[float] = []
    failures: list[str] = []
    started = time.perf_counter()
    with trio.move_on_after(seconds) as scope:
        async with trio.open_nursery() as nursery:
            for index in range(count):
                nursery.start_soon(one_session, url, index, latencies, failures)
    return LevelResult(count, latencies, failures, time.perf_counter() - started, scope.cancelled_caught)


def print_level(name: str, level: LevelResult) -> None:
    rate = len(level.latencies) / level.seconds if level.seconds else 0.0
    print(
        f"  {name}: {level.sessions} sessions, {len(level.latencies)} completed,"
        f" {len(level.failures)} failures,"
        f" {level.seconds:.2f} s, {rate:.1f} sessions/s,"
        f" p50 {statistics.median(level.latencies) * 1000 if level.latencies else float('nan'):.1f} ms,"
        f" p99 {percentile(level.latencies, 0.99) * 1000:.1f} ms",
        flush=True,
    )
    for failure in level.failures[:5]:
        print(f"    {failure}")


async def phase_levels(url: str, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    print("levels: concurrent sessions, one in eight with a permission round trip", flush=True)
    rows: list[dict[str, Any]] = []
    for count in arguments.levels:
        level = await run_level(url, count, arguments.timeout)
        print_level(f"level {count}", level)
        ok = not level.failures and not level.timed_out and len(level.latencies) == count
        verdicts.expect(
            f"level {count}: every prompt completes, seq contiguous, restore equals stream",
            ok,
            f"{len(level.latencies)}/{count} completed, {len(level.failures)} failures",
        )
        verdicts.expect(f"level {count}: under 120 s", level.seconds < 120, f"{level.seconds:.2f} s")
        rows.append(
            {
                "sessions": count,
                "completed": len(level.latencies),
                "failures": len(level.failures),
                "seconds": level.seconds,
                "p50_ms": statistics.median(level.latencies) * 1000 if level.latencies else None,
                "p99_ms": percentile(level.latencies, 0.99) * 1000 if level.latencies else None,
            }
        )
    peak = peak_rss_mib()
    verdicts.expect("RSS under 512 MiB (client and server together)", peak < 512, f"peak {peak:.1f} MiB")
    return {"levels": rows, "peak_rss_mib": peak}


async def phase_idle(url: str, count: int, seconds: float) -> dict[str, Any]:
    print("idle: RSS per initialised idle connection (client and server together)", flush=True)
    before = after = rss_kib()
    opened = 0
    with trio.move_on_after(seconds):
        async with AsyncExitStack() as stack:
            for _ in range(count):
                client: AcpClient = await stack.enter_async_context(connect(url))
                await client.initialize()
                opened += 1
            after = rss_kib()
    per = (after - before) / opened if opened else float("nan")
    print(f"  {opened} connections, RSS {before:,} -> {after:,} KiB, {per:.1f} KiB per connection")
    return {"connections": opened, "kib_per_connection": per}


async def phase_mixed(
    handle: ServerHandle, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, Any]:
    count = arguments.mixed_sessions
    print(f"mixed: {count} sessions alone, then with {arguments.offenders} of each offender", flush=True)
    url = f"{handle.url}?token={handle.token}"
    baseline = await run_level(url, count, arguments.timeout)
    print_level("baseline", baseline)
    outcomes: dict[str, dict[str, int]] = {kind: {} for kind in EXPECTED_OUTCOMES}

    async def offender(kind: str) -> None:
        try:
            with trio.fail_after(45):
                outcome = await offend(handle.port, url, kind)
        except (Exception, trio.TooSlowError) as error:
            outcome = f"{type(error).__name__}"
        outcomes[kind][outcome] = outcomes[kind].get(outcome, 0) + 1

    mixed: LevelResult | None = None
    with trio.move_on_after(arguments.timeout):
        async with trio.open_nursery() as nursery:
            for _ in range(arguments.offenders):
                for kind in EXPECTED_OUTCOMES:
                    nursery.start_soon(offender, kind)
            mixed = await run_level(url, count, arguments.timeout)
    assert mixed is not None
    print_level("mixed", mixed)
    for kind, expected in EXPECTED_OUTCOMES.items():
        seen = outcomes[kind]
        verdicts.expect(
            f"offender {kind} ends with {expected}",
            seen == {expected: arguments.offenders},
            json.dumps(seen),
        )
    status = await health(handle.port)
    verdicts.expect("/health answers after the offenders", status == 200, f"HTTP {status}")
    verdicts.expect(
        "mixed sessions complete, seq contiguous, restore equals stream (no event lost or altered)",
        not mixed.failures and len(mixed.latencies) == count,
        f"{len(mixed.latencies)}/{count} completed, {len(mixed.failures)} failures",
    )
    base_p50 = statistics.median(baseline.latencies) if baseline.latencies else float("nan")
    mixed_p50 = statistics.median(mixed.latencies) if mixed.latencies else float("nan")
    ratio = mixed_p50 / base_p50
    verdicts.expect(
        "mixed p50 latency within 2x baseline",
        ratio <= 2.0,
        f"baseline p50 {base_p50 * 1000:.1f} ms, mixed p50 {mixed_p50 * 1000:.1f} ms, ratio {ratio:.2f}",
    )
    return {"outcomes": outcomes, "baseline_p50_ms": base_p50 * 1000, "latency_ratio": ratio}


async def phase_task_cycles(url: str, cycles: int, verdicts: Verdicts) -> dict[str, Any]:
    print(f"tasks: {cycles} connect/initialize/close cycles against the in-process server", flush=True)
    before = trio_task_count()
    for index in range(cycles):
        async with connect(url) as client:
            await client.initialize()
            if index % 10 == 0:
                await client.request("session/new", {"workspace": "ws"})
    after = trio_task_count()
    # A connection's tasks end after its close handshake; give the last one a moment.
    with trio.move_on_after(5):
        while after > before:
            await trio.sleep(0.05)
            after = trio_task_count()
    verdicts.expect("trio tasks return to baseline", after <= before, f"{before} -> {after}")
    return {"tasks_before": before, "tasks_after": after}


# ------------------------------------------------------------------ phase 4: stalled readers


class DeltaFlood:
    """The ``run`` seam of the stalled phase's server subprocess.

    Every run, stalled and control alike, streams ``STALL_EVENTS`` ``message.delta`` events of
    ``STALL_DELTA_BYTES`` each, then waits for its abort; it keeps nothing of what it emitted.
    A stalled run stops early: its ``on_event`` waits for outbound room until the 1013 close
    drops the frame. Each run reports ``{"aborted": session id, "emitted": n}`` when it sees
    its abort.
    """

    def __init__(self, report: Callable[[dict[str, object]], None]) -> None:
        self._report = report

    async def __call__(self, options: RunOptions) -> RunResult:
        assert options.on_event is not None
        assert options.signal is not None
        session_id = options.session_id or "?"
        ids = {"runId": "run-1", "sessionId": session_id, "turnId": "turn-1", "requestId": "req-1"}
        emitted = 0
        while emitted < STALL_EVENTS and not options.signal.aborted:
            data: dict[str, object] = {
                **ids,
                "messageId": "msg-1",
                "role": "assistant",
                "sequence": emitted,
                "delta": "x" * STALL_DELTA_BYTES,
            }
            self._report({"emitting": session_id, "n": emitted})
            try:
                await options.on_event(create_event("message.delta", data))
            finally:
                emitted += 1
        await options.signal.wait()
        self._report({"aborted": session_id, "emitted": emitted})
        raise RunCanceledError


def malloc_trim() -> bool:
    """Ask glibc to return free heap pages to the system (False where there is no glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


async def serve_stalled(db: Path, root: Path, trace: bool) -> None:
    """The stalled phase's server, alone in its process (``--serve-stalled DB ROOT [--trace]``).

    Prints ``agent-server: <url>``, then one JSON report per line. Reads commands from stdin,
    one per line, until end of file, then shuts down gracefully:
    ``snapshot NAME`` (a tracemalloc snapshot, with ``--trace``), ``compare NEW OLD`` (the
    biggest allocation differences between two snapshots, grouped by the allocating line and
    its nearest server or kernel caller) and ``trim`` (glibc ``malloc_trim``; reports whether
    it ran).
    """
    if trace:
        tracemalloc.start(12)

    def report(message: dict[str, object]) -> None:
        print(json.dumps(message), flush=True)

    snapshots: dict[str, tracemalloc.Snapshot] = {}
    async with SqliteSessionStore(db) as store:
        config = ServerConfig(
            port=0,
            workspace_root=str(root),
            session_store=store,
            run=DeltaFlood(report),
            max_message_bytes=STALL_MESSAGE_BYTES,
        )
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve, config)
            print(f"agent-server: {handle.url}?token={handle.token}", flush=True)
            commands = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
            async with commands:
                pending = b""
                while chunk := await commands.receive_some(4096):
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        verb, *names = line.decode().split()
                        if verb == "trim":
                            report({"trimmed": malloc_trim()})
                        elif verb == "snapshot" and trace:
                            snapshots[names[0]] = tracemalloc.take_snapshot()
                            report({"snapshot": names[0], "traced": tracemalloc.get_traced_memory()[0]})
                        elif verb == "compare" and trace:
                            report({"compare": allocation_sites(snapshots[names[0]], snapshots[names[1]])})
            await handle.aclose()


def allocation_sites(new: tracemalloc.Snapshot, old: tracemalloc.Snapshot) -> list[list[object]]:
    """The biggest growths from ``old`` to ``new``: ``[bytes, blocks, where]`` rows.

    ``where`` is the allocating line, then the nearest frames of the server, kernel, wsproto or
    this script that led to it (so ``"x" * n`` in a library shows whose event it was).
    """
    ours = ("agent_server", "harness_kernel", "wsproto", "h11", "agent_server_load")
    rows: list[list[object]] = []
    for stat in new.compare_to(old, "traceback")[:40]:
        if stat.size_diff <= 0:
            continue
        frames = list(stat.traceback)  # newest frame last (most_recent_first is False by default)
        chain = [f"{Path(frames[-1].filename).name}:{frames[-1].lineno}"]
        chain += [
            f"{Path(frame.filename).name}:{frame.lineno}"
            for frame in reversed(frames[:-1])
            if any(part in frame.filename for part in ours)
        ][:3]
        rows.append([stat.size_diff, stat.count_diff, " < ".join(chain)])
    return rows[:16]


@dataclass
class Stall:
    """What the clients of the stalled phase share, and what the server subprocess reported."""

    sessions: list[str] = field(default_factory=list[str])
    over: trio.Event = field(default_factory=trio.Event)
    codes: dict[str, int | None] = field(default_factory=dict[str, int | None])
    emitted: dict[str, int] = field(default_factory=dict[str, int])
    first_abort: trio.Event = field(default_factory=trio.Event)
    all_closed: trio.Event = field(default_factory=trio.Event)
    expected: int = 0
    progress: dict[str, int] = field(default_factory=dict[str, int])
    progressed_at: float = 0.0
    url: str = ""
    largest_message: int = 0
    _aborted: dict[str, trio.Event] = field(default_factory=dict[str, trio.Event])

    def aborted(self, session_id: str) -> trio.Event:
        """Set once the server reports that the run of ``session_id`` has seen its abort."""
        return self._aborted.setdefault(session_id, trio.Event())


async def read_reports(
    stream: trio.abc.ReceiveStream, stall: Stall, replies: trio.MemorySendChannel[dict[str, Any]]
) -> None:
    """Dispatch the server subprocess's JSON lines: aborts to ``stall``, the rest to ``replies``."""
    pending = b""
    while chunk := await stream.receive_some(65_536):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            message: dict[str, Any] = json.loads(line)
            session_id = message.get("aborted")
            if "emitting" in message:
                stall.progress[message["emitting"]] = int(message["n"])
                stall.progressed_at = trio.current_time()
            elif isinstance(session_id, str):
                stall.emitted[session_id] = int(message["emitted"])
                stall.aborted(session_id).set()
                if session_id in stall.sessions:
                    stall.first_abort.set()
            else:
                await replies.send(message)


async def flood_client(port: int, reads: bool, ready: trio.Event, stall: Stall) -> None:
    """Start a prompt whose run streams ``STALL_EVENTS`` large events.

    A control client (``reads``) reads them all, sets ``ready``, and holds its connection (its
    run waits) until the phase is over. A stalled client reads nothing after the prompt; once
    the server reports that its run saw the abort (the 1013 close), it reads again within the
    close grace and records the close code.
    """
    async with raw_websocket(port, url_token(stall.url), receive_buffer=None if reads else 4096) as raw:
        await raw.send_request(1, "initialize", initialize_params())
        await raw.send_request(2, "session/new", {"workspace": "ws"})
        answers: list[JsonObject] = []
        while len(answers) < 2:
            answers += [json.loads(text) for text in await raw.messages()]
        session_id: str = answers[1]["result"]["sessionId"]
        await raw.send_request(3, "session/prompt", {"sessionId": session_id, "content": "flood"})
        if reads:
            events = 0
            while events < STALL_EVENTS:
                for text in await raw.messages():
                    events += 1 if json.loads(text).get("method") == "session/event" else 0
                    stall.largest_message = max(stall.largest_message, len(text.encode("utf-8")))
            ready.set()
            await stall.over.wait()
            return
        stall.sessions.append(session_id)
        ready.set()
        await stall.aborted(session_id).wait()
        stall.codes[session_id] = await raw.close_code()
        if len(stall.codes) == stall.expected:
            stall.all_closed.set()


async def start_clients(nursery: trio.Nursery, port: int, reads: bool, stall: Stall, count: int) -> None:
    readies = [trio.Event() for _ in range(count)]
    for ready in readies:
        nursery.start_soon(flood_client, port, reads, ready, stall)
    for ready in readies:
        await ready.wait()


def vm_hwm_kib(pid: int) -> int:
    """The peak resident set size (``VmHWM``) of process ``pid`` (0 where it does not exist)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class StallRun:
    """One pass of the stalled scenario against a fresh server subprocess."""

    count: int
    stall: Stall = field(default_factory=Stall)
    rss: dict[str, int] = field(default_factory=dict[str, int])
    restored: dict[str, int] = field(default_factory=dict[str, int])
    stored: dict[str, int] = field(default_factory=dict[str, int])
    sites: list[list[Any]] = field(default_factory=list[list[Any]])
    timed_out: bool = False

    def per_connection(self, later: str, earlier: str) -> float:
        """KiB per connection from RSS ``earlier`` to ``later`` (NaN when one was not measured)."""
        if later not in self.rss or earlier not in self.rss:
            return float("nan")
        return (self.rss[later] - self.rss[earlier]) / self.count


async def hold_stalled(
    clients: trio.Nursery,
    process: trio.Process,
    run: StallRun,
    ask: Callable[[str], Awaitable[dict[str, Any]]],
    *,
    trace: bool,
) -> None:
    """Open the stalled clients beside the controls; sample the server's RSS until the first 1013.

    Records ``peak`` (highest sample), ``stalled_steady`` (once no stalled run has emitted for
    0.5 s: every queue is full), ``stalled_trimmed`` (then, after ``malloc_trim``: what the
    stalled connections really hold, without free heap the allocator kept) and ``hwm_rise``;
    then waits until every stalled client has read its close code.
    """
    pid, stall = process.pid, run.stall
    port = urlsplit(stall.url).port
    assert port is not None
    hwm_before = vm_hwm_kib(pid)
    stall.expected = run.count
    await start_clients(clients, port, False, stall, run.count)
    samples = [rss_kib(pid)]
    while not stall.first_abort.is_set():
        samples.append(rss_kib(pid))
        blocked = all(session_id in stall.progress for session_id in stall.sessions)
        quiet = trio.current_time() - stall.progressed_at > 0.5
        if blocked and quiet and "stalled_trimmed" not in run.rss:
            # No stalled run has emitted for half a second: each waits for room, its queue full.
            run.rss["stalled_steady"] = samples[-1]
            if trace:
                await ask("snapshot stalled")
            await ask("trim")
            run.rss["stalled_trimmed"] = rss_kib(pid)
        await trio.sleep(0.05)
    run.rss["peak"] = max(samples)
    run.rss["hwm_rise"] = vm_hwm_kib(pid) - hwm_before
    await stall.all_closed.wait()


async def restored_counts(url: str, sessions: list[str]) -> dict[str, int]:
    """Per session, the events a restore from -1 returns (-1 where their ``seq`` has a gap)."""
    restored: dict[str, int] = {}
    async with connect(url) as fresh:
        await fresh.initialize()
        for session_id in sessions:
            notes = await replay_all(fresh, session_id)
            gapless = [note["seq"] for note in notes] == list(range(len(notes)))
            restored[session_id] = len(notes) if gapless else -1
    return restored


async def stall_pass(directory: Path, count: int, seconds: float, *, trace: bool) -> StallRun:
    """Warm up, open ``count`` control connections, then ``count`` stalled ones, measuring RSS.

    RSS of the server subprocess (trimmed with glibc ``malloc_trim`` before ``baseline`` and
    ``control``, so the stalled connections cannot hide in heap the controls left free):
    ``baseline`` (warmed up, nothing open), ``control`` (the controls have read all their
    events; their runs wait), ``stalled_steady``, ``stalled_trimmed`` (see
    :func:`hold_stalled`), ``peak`` (the highest sample while every stalled client holds its
    socket, before the first 1013), ``closed`` (the stalled sockets are closed and released;
    controls still open), ``trimmed`` (the same after ``malloc_trim``) and ``end`` (everything
    closed). With ``trace`` the server runs under tracemalloc and the pass records where the
    stalled connections' memory was allocated.
    """
    name = "stalled-trace" if trace else "stalled"
    run = StallRun(count)
    stall = run.stall
    replies_in, replies = trio.open_memory_channel[dict[str, Any]](math.inf)
    async with server_process(directory, name, stalled=True, trace=trace) as (process, url, db):
        pid, stall.url = process.pid, url
        port = urlsplit(url).port
        assert port is not None
        assert process.stdout is not None
        commands = process.stdin
        assert commands is not None

        async def ask(command: str) -> dict[str, Any]:
            await commands.send_all(command.encode() + b"\n")
            return await replies.receive()

        async with trio.open_nursery() as reader:
            reader.start_soon(read_reports, process.stdout, stall, replies_in)
            with trio.move_on_after(seconds) as scope:
                fds_idle = open_fds(pid)
                warm = Stall(url=stall.url)
                warm.over.set()
                async with trio.open_nursery() as clients:  # lazily created state joins the baseline
                    await start_clients(clients, port, True, warm, min(count, 4))
                await settle(lambda: open_fds(pid), fds_idle, 5)
                await ask("trim")
                run.rss["baseline"] = rss_kib(pid)
                async with trio.open_nursery() as clients:
                    await start_clients(clients, port, True, stall, count)
                    fds_control = open_fds(pid)
                    await ask("trim")  # what the controls' transient buffers left free is not reused
                    run.rss["control"] = rss_kib(pid)
                    if trace:
                        await ask("snapshot control")
                    await hold_stalled(clients, process, run, ask, trace=trace)
                    await settle(lambda: open_fds(pid), fds_control, 5)
                    run.rss["closed"] = rss_kib(pid)
                    if trace:
                        run.sites = (await ask("compare stalled control"))["compare"]
                    await ask("trim")
                    run.rss["trimmed"] = rss_kib(pid)
                    stall.over.set()
                await settle(lambda: open_fds(pid), fds_idle, 5)
                run.rss["end"] = rss_kib(pid)
                run.restored = await restored_counts(url, stall.sessions)
            run.timed_out = scope.cancelled_caught
            await commands.aclose()  # end of stdin: the server shuts down gracefully
            with trio.move_on_after(SIGTERM_SECONDS):
                await process.wait()
            reader.cancel_scope.cancel()
    async with SqliteSessionStore(db) as store:
        for session_id in stall.sessions:
            run.stored[session_id] = await store.size(session_id)
    return run


async def phase_stalled(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    count = arguments.stalled
    cap = max(64 * 1024, 2 * STALL_MESSAGE_BYTES)
    print(
        f"stalled: {count} clients stop reading mid-prompt (outbound cap {cap // 1024} KiB), beside"
        f" {count} control connections running the same workload ({STALL_EVENTS} events of"
        f" {STALL_DELTA_BYTES // 1024} KiB) that read normally; a fresh server subprocess",
        flush=True,
    )
    run = await stall_pass(directory, count, arguments.timeout, trace=False)
    stall, rss = run.stall, run.rss
    codes = list(stall.codes.values())
    seen = {str(code): codes.count(code) for code in set(codes)}
    verdicts.expect(
        "stalled clients are closed with 1013 (then aborted)", seen == {"1013": count}, json.dumps(seen)
    )
    # What a stalled connection holds beyond a control connection that ran the same workload:
    # its queue, the message waiting for room (the largest notification a control received,
    # plus its 10-byte frame header), the run's own event blocked in on_event and the objects of
    # the waiting task. The spec's bound is the outbound cap itself.
    frame = stall.largest_message + 10
    bound = cap
    control = run.per_connection("control", "baseline")
    growth = run.per_connection("peak", "control")
    live = run.per_connection("stalled_trimmed", "control")
    shown = ", ".join(f"{key} {value:,}" for key, value in rss.items())
    print(f"  server RSS (KiB): {shown}")
    print(
        f"  per connection: control {control:.1f} KiB; stalled beyond control {growth:.1f} KiB at peak,"
        f" {live:.1f} KiB after malloc_trim while stalled;"
        f" bound = the outbound cap, {cap:,} B ({cap / 1024:.0f} KiB); one waiting frame is {frame:,} B"
    )
    # "Stays under": what a stalled connection keeps while it is stalled (after malloc_trim
    # returns the allocator's free pages), not the transient high-water mark of building frames.
    verdicts.expect(
        "RSS per stalled connection beyond a like-for-like control stays under the outbound cap",
        live * 1024 <= bound,
        f"{live:.1f} KiB per stalled connection while stalled ({growth:.1f} KiB at the peak),"
        f" cap {cap // 1024} KiB",
    )
    residual = run.per_connection("closed", "control")
    trimmed = run.per_connection("trimmed", "control")
    verdicts.expect(
        "memory of the stalled connections is released after their 1013 closes",
        min(residual, trimmed) <= STALL_RESIDUAL_SHARE * growth,
        f"{residual:.1f} KiB per stalled connection left after the closes, {trimmed:.1f} KiB after"
        f" malloc_trim (at most {STALL_RESIDUAL_SHARE:.0%} of the {growth:.1f} KiB stalled growth)",
    )
    emitted = sum(stall.emitted[session_id] for session_id in stall.sessions)
    ok = (
        not run.timed_out
        and len(run.restored) == count
        and all(run.restored[sid] == run.stored[sid] == stall.emitted[sid] for sid in stall.sessions)
    )
    verdicts.expect(
        "committed events of stalled sessions restorable, gapless, equal to the store",
        ok,
        f"{sum(max(0, v) for v in run.restored.values())} events restored,"
        f" {sum(run.stored.values())} stored, {emitted} emitted by the runs",
    )
    result: dict[str, Any] = {
        "codes": seen,
        "rss_kib": rss,
        "kib_per_control_connection": control,
        "kib_per_stalled_connection_beyond_control": growth,
        "bound_bytes": {"cap": cap, "waiting_frame": frame},
        "residual_kib_per_connection": {"closed": residual, "trimmed": trimmed},
        "restored": sum(run.restored.values()),
    }
    if live * 1024 > bound:
        # Where does it go? The same pass under tracemalloc: allocations alive at the stall that
        # were not alive with the controls alone, per stalled connection.
        print("  where the stalled memory was allocated (tracemalloc pass, per stalled connection):")
        traced = await stall_pass(directory, count, arguments.timeout, trace=True)
        for size, blocks, where in traced.sites:
            print(f"    {size / count / 1024:8.1f} KiB {blocks / count:6.1f} blocks  {where}")
        result["sites"] = traced.sites
    return result


# ------------------------------------------------------------------ phases 5 and 6: subprocess server


@asynccontextmanager
async def server_process(
    directory: Path,
    name: str,
    *,
    stalled: bool = False,
    trace: bool = False,
    descriptor_limit: int | None = None,
) -> AsyncGenerator[tuple[trio.Process, str, Path]]:
    """``python -m agent_server serve`` on an ephemeral port; yields ``(process, url, db path)``.

    With ``stalled``, the server is this script's ``--serve-stalled`` (``serve`` with the
    :class:`DeltaFlood` run seam, which the CLI cannot provide), commanded through its stdin.
    """
    scenario = directory / "scenario.yaml"
    scenario.write_text(SCENARIO_SCRIPT)
    db = directory / f"{name}.sqlite"
    token = secrets.token_urlsafe(32)
    token_file = directory / f"{name}.token"
    token_file.write_text(f"{token}\n")
    token_file.chmod(0o600)
    command = [
        sys.executable,
        "-m",
        "agent_server",
        "serve",
        "--port",
        "0",
        "--workspace-root",
        str(directory / "root"),
        "--db",
        str(db),
        "--scenario",
        str(scenario),
        "--tools",
        "echo",
        "--token-file",
        str(token_file),
    ]
    if stalled:
        command = [sys.executable, str(SCRIPT), "--serve-stalled", str(db), str(directory / "root")]
        command += ["--trace"] if trace else []
    log = (directory / f"{name}.log").open("wb")
    stdin = subprocess.PIPE if stalled else None

    def limit_descriptors() -> None:
        if descriptor_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (descriptor_limit, descriptor_limit))

    process = await trio.lowlevel.open_process(
        command, stdin=stdin, stdout=subprocess.PIPE, stderr=log, preexec_fn=limit_descriptors
    )
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                if not chunk:
                    raise RuntimeError("the server exited before printing its URL")
                line += chunk
        url = line.decode().strip().removeprefix("agent-server: ")
        yield process, url if stalled else f"{url}?token={token}", db
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        log.close()
        logged = (directory / f"{name}.log").read_text(errors="replace").count("Traceback")
        print(f"  server subprocess logged {logged} tracebacks (aborted runs answer -32603 and are logged)")


def active_rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as database:
        return int(database.execute("SELECT count(*) FROM sessions WHERE status = 'active'").fetchone()[0])


async def settle(measure: Callable[[], int], baseline: int, seconds: float) -> int:
    """``measure()`` once it is back to ``baseline``, or its value after ``seconds``."""
    value = measure()
    with trio.move_on_after(seconds):
        while value > baseline:
            await trio.sleep(0.05)
            value = measure()
    return value


FLOOD_DESCRIPTOR_LIMIT: Final = 1024


async def client_latency(url: str) -> float:
    """Seconds for one client to connect, authenticate and initialize."""
    started = time.perf_counter()
    async with connect(url) as client:
        await client.initialize()
    return time.perf_counter() - started


async def phase_flood(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """Idle sockets that never send a request, beyond the server's descriptors (issue #15, finding 7)."""
    count = arguments.flood
    print(
        f"flood: {count} idle sockets that never send a request, against a server subprocess"
        f" limited to {FLOOD_DESCRIPTOR_LIMIT} descriptors",
        flush=True,
    )
    async with server_process(directory, "flood", descriptor_limit=FLOOD_DESCRIPTOR_LIMIT) as (_, url, _db):
        port = urlsplit(url).port
        assert port is not None
        quiet = sorted([await client_latency(url) for _ in range(5)])
        idle: list[trio.SocketStream] = []
        try:
            with trio.move_on_after(arguments.timeout):
                for _ in range(count):
                    idle.append(await trio.open_tcp_stream("127.0.0.1", port))
            await trio.sleep(0.5)  # let the server accept (and evict) what it can
            flooded: list[float] = []
            for _ in range(5):
                with trio.move_on_after(30) as late:
                    flooded.append(await client_latency(url))
                if late.cancelled_caught:
                    flooded.append(math.inf)
            flooded.sort()
            evicted = 0
            for stream in idle:
                with trio.move_on_after(0.01):
                    evicted += await stream.receive_some(1) == b""
        finally:
            for stream in idle:
                await stream.aclose()
    print(
        f"  client connect+initialize p50: {quiet[2] * 1000:.1f} ms quiet, {flooded[2] * 1000:.1f} ms"
        f" with {len(idle)} idle sockets open ({evicted} of them already closed by the server); worst"
        f" {flooded[-1] * 1000:.1f} ms"
    )
    verdicts.expect(
        "a client gets in within 1 s while idle sockets exceed the server's descriptors",
        flooded[-1] < 1.0,
        f"worst {flooded[-1] * 1000:.1f} ms, quiet p50 {quiet[2] * 1000:.1f} ms",
    )
    return {
        "idle_sockets": len(idle),
        "evicted": evicted,
        "quiet_p50_ms": quiet[2] * 1000,
        "flooded_ms": [seconds * 1000 for seconds in flooded],
    }


async def phase_cycles(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    cycles = arguments.cycles
    print(f"cycles: {cycles} connect/initialize/close cycles against a server subprocess", flush=True)
    async with server_process(directory, "cycles") as (process, url, db):
        pid = process.pid

        async def cycle(index: int) -> None:
            async with connect(url) as client:
                await client.initialize()
                if index % 10 == 0:
                    await client.request("session/new", {"workspace": "ws"})

        for index in range(10):  # warm up, so lazily created state is in the baseline
            await cycle(index)
        fds_before, rss_before = open_fds(pid), rss_kib(pid)
        rows_before = active_rows(db)
        started = time.perf_counter()
        next_index = 0
        workers = 4

        async def worker() -> None:
            nonlocal next_index
            while next_index < cycles:
                index = next_index
                next_index += 1
                await cycle(index)

        with trio.move_on_after(arguments.timeout) as scope:
            async with trio.open_nursery() as nursery:
                for _ in range(workers):
                    nursery.start_soon(worker)
        elapsed = time.perf_counter() - started
        fds_after = await settle(lambda: open_fds(pid), fds_before, 5)
        rows_after = await settle(lambda: active_rows(db), rows_before, 5)
        rss_after = rss_kib(pid)
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(SIGTERM_SECONDS):
            await process.wait()
    done = min(next_index, cycles) - (1 if scope.cancelled_caught else 0)
    print(
        f"  {done} cycles in {elapsed:.1f} s ({done / elapsed:.0f}/s);"
        f" server RSS {rss_before:,} -> {rss_after:,} KiB"
    )
    verdicts.expect("all cycles ran within the time bound", not scope.cancelled_caught, f"{done}/{cycles}")
    verdicts.expect(
        "server file descriptors return to baseline", fds_after <= fds_before, f"{fds_before} -> {fds_after}"
    )
    verdicts.expect(
        "active sessions (store rows) return to baseline",
        rows_after <= rows_before,
        f"{rows_before} -> {rows_after}",
    )
    return {"cycles": done, "fds": [fds_before, fds_after], "active_rows": [rows_before, rows_after]}


@dataclass
class ShutdownRace:
    """What the sessions of the SIGTERM phase share."""

    asked: list[trio.Event]
    signalled: trio.Event = field(default_factory=trio.Event)
    signalled_at: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict[str, int])
    late: int = 0


async def answer_after_signal(client: AcpClient, session_id: str, index: int, race: ShutdownRace) -> None:
    """Report the permission request; even sessions answer it once SIGTERM has been sent."""
    async for note in client.notifications:
        event = note["params"]["event"]
        if event["type"] != "permission.requested":
            continue
        race.asked[index].set()
        if index % 2:
            continue
        await race.signalled.wait()
        answer = {"sessionId": session_id, "permissionId": event["data"]["permissionId"], "decision": "allow"}
        try:
            await client.request("permission/respond", answer)
        except (AcpClientError, ConnectionClosedError):
            return


async def shutdown_session(url: str, index: int, race: ShutdownRace) -> None:
    """One session in flight at SIGTERM; records how it ended (a response or a close code)."""
    outcome = "no outcome"
    try:
        async with connect(url) as client:
            await client.initialize()
            session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_after_signal, client, session_id, index, race)
                try:
                    params = {"sessionId": session_id, "content": "go"}
                    outcome = f"response {(await client.request('session/prompt', params))['status']}"
                except ConnectionClosedError as error:
                    outcome = f"close {error.code}"
                except AcpClientError as error:
                    outcome = f"error {error.code}"
                nursery.cancel_scope.cancel()
            if race.signalled.is_set() and time.perf_counter() - race.signalled_at > SIGTERM_SECONDS:
                race.late += 1
    except (OSError, HandshakeRejectedError, ConnectionClosedError, AcpClientError) as error:
        outcome = type(error).__name__
    race.outcomes[outcome] = race.outcomes.get(outcome, 0) + 1


async def phase_sigterm(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    count = arguments.sigterm_sessions
    print(f"sigterm: {count} sessions in flight, then SIGTERM to the server subprocess", flush=True)
    race = ShutdownRace(asked=[trio.Event() for _ in range(count)])
    async with server_process(directory, "sigterm") as (process, url, db):
        exit_code: int | None = None
        with trio.move_on_after(arguments.timeout):
            async with trio.open_nursery() as nursery:
                for index in range(count):
                    nursery.start_soon(shutdown_session, url, index, race)
                for event in race.asked:
                    await event.wait()
                race.signalled_at = time.perf_counter()
                process.send_signal(signal.SIGTERM)
                race.signalled.set()
                with trio.move_on_after(SIGTERM_SECONDS):
                    exit_code = await process.wait()
        exit_seconds = time.perf_counter() - race.signalled_at
    allowed = {"close 1001", "response completed"}
    verdicts.expect(
        "every client sees 1001 or its completed response within 10 s",
        set(race.outcomes) <= allowed and sum(race.outcomes.values()) == count and race.late == 0,
        f"{json.dumps(race.outcomes)}, {race.late} late",
    )
    verdicts.expect("the process exits 0", exit_code == 0, f"exit {exit_code} after {exit_seconds:.2f} s")
    with sqlite3.connect(db) as database:
        integrity = database.execute("PRAGMA integrity_check").fetchone()[0]
        sessions = [row[0] for row in database.execute("SELECT session_id FROM sessions")]
        still_active = active_rows(db)
    verdicts.expect("store passes PRAGMA integrity_check", integrity == "ok", str(integrity))
    readable = 0
    async with SqliteSessionStore(db) as store:
        for session_id in sessions:
            page = await store.read(session_id, limit=1000)
            readable += len(page.events)
    verdicts.expect(
        "store opens cleanly and every session reads back",
        len(sessions) == count,
        f"{len(sessions)} sessions, {readable} events, {still_active} rows left active",
    )
    return {"outcomes": race.outcomes, "exit_code": exit_code, "integrity": integrity}


# ------------------------------------------------------------------ driver


async def run(arguments: argparse.Namespace) -> dict[str, Any]:
    verdicts = Verdicts()
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        (directory / "root" / "ws").mkdir(parents=True)
        config = ServerConfig(
            port=0,
            workspace_root=str(directory / "root"),
            db_path=str(directory / "state" / "sessions.sqlite"),
            tools=echo_tools,
            models={"plain": plain_model, "tool": tool_model},
            max_connections=max(1024, max(arguments.levels) + arguments.idle + 64),
        )
        phases: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = []
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve, config)
            # Idle memory first, before the load levels leave freed heap behind for reuse.
            url = f"{handle.url}?token={handle.token}"
            report["idle"] = await phase_idle(url, arguments.idle, arguments.timeout)
            report["levels"] = await phase_levels(url, arguments, verdicts)
            report["mixed"] = await phase_mixed(handle, arguments, verdicts)
            report["tasks"] = await phase_task_cycles(url, arguments.task_cycles, verdicts)
            await handle.aclose()
        phases = [
            ("stalled", lambda: phase_stalled(directory, arguments, verdicts)),
            ("flood", lambda: phase_flood(directory, arguments, verdicts)),
            ("cycles", lambda: phase_cycles(directory, arguments, verdicts)),
            ("sigterm", lambda: phase_sigterm(directory, arguments, verdicts)),
        ]
        for phase, body in phases:
            report[phase] = await body()
    report["verdicts"] = [{"expectation": n, "passed": p, "detail": d} for n, p, d in verdicts.rows]
    report["failed"] = verdicts.failed
    return report


class CountingHandler(logging.Handler):
    """Counts the in-process server's log records instead of printing their tracebacks."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.messages[message] = self.messages.get(message, 0) + 1


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--levels",
        type=lambda text: [int(part) for part in text.split(",")],
        default=None,
        help="concurrent sessions per level, comma-separated (default 1,100,500)",
    )
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument("--timeout", type=float, default=120.0, help="upper bound per phase, seconds")
    parser.add_argument("--serve-stalled", nargs=2, metavar=("DB", "ROOT"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve_stalled is not None:  # the stalled phase's server subprocess
        db, root = arguments.serve_stalled
        trio.run(serve_stalled, Path(db), Path(root), arguments.trace)
        return
    quick = arguments.quick
    if arguments.levels is None:
        arguments.levels = [1, 20] if quick else [1, 100, 500]
    arguments.idle = 20 if quick else 200
    arguments.mixed_sessions = 20 if quick else 100
    arguments.offenders = 2 if quick else 10
    arguments.task_cycles = 100 if quick else 1000
    arguments.stalled = 4 if quick else 32
    arguments.flood = 1100
    arguments.cycles = 500 if quick else 10_000
    arguments.sigterm_sessions = 10 if quick else 64
    raise_fd_limit()
    # Aborted runs are answered -32603 and logged (spec §3.3); count them, print no tracebacks.
    logged = CountingHandler()
    server_log = logging.getLogger("agent_server")
    server_log.addHandler(logged)
    server_log.propagate = False
    started = time.perf_counter()
    print(
        f"python {sys.version.split()[0]}, {platform.machine()}, {os.cpu_count()} CPUs; loopback only",
        flush=True,
    )
    report = trio.run(run, arguments)
    elapsed = time.perf_counter() - started
    print(f"in-process server log records: {json.dumps(logged.messages, sort_keys=True)}")
    print(
        f"{len(report['verdicts']) - report['failed']}/{len(report['verdicts'])} expectations passed"
        f" in {elapsed:.0f} s"
    )
    summary = {
        "benchmark": "agent_server_load",
        "machine": {"platform": platform.platform(), "machine": platform.machine()},
        "python": sys.version.split()[0],
        "parameters": dict(vars(arguments)),
        "results": report,
    }
    print(json.dumps(summary, sort_keys=True, default=str))
    sys.exit(1 if report["failed"] else 0)


if __name__ == "__main__":
    main()
