"""Phase stalled: clients that stop reading mid-prompt are closed with 1013 and cost bounded memory.

A fresh server subprocess (``--serve-stalled``, see ``_stalled_server``) runs the
``DeltaFlood`` seam. Control connections run that workload and read normally; then as many
clients run it and stop reading. The server's RSS per stalled connection beyond a control must
stay under the outbound cap while stalled, be mostly released after the closes, and every
committed event must be restorable.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import trio

from agent_server.client import JsonObject, connect, initialize_params
from harness_kernel.store import SqliteSessionStore

from ._clients import raw_websocket, replay_all, url_token
from ._measure import open_fds, rss_kib, settle, vm_hwm_kib
from ._server import SIGTERM_SECONDS, server_process
from ._stalled_server import STALL_DELTA_BYTES, STALL_EVENTS, STALL_MESSAGE_BYTES
from ._verdicts import Verdicts

STALL_RESIDUAL_SHARE: Final = 0.25
"""After the 1013 closes, what may stay per connection, as a share of the stalled growth."""


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
                    message = json.loads(text)
                    delta = message.get("method") == "session/event" and (
                        message["params"]["event"]["type"] == "message.delta"
                    )
                    events += 1 if delta else 0
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
    """Start ``count`` flood clients in ``nursery`` and wait until each is ready."""
    readies = [trio.Event() for _ in range(count)]
    for ready in readies:
        nursery.start_soon(flood_client, port, reads, ready, stall)
    for ready in readies:
        await ready.wait()


@dataclass
class StallRun:
    """One pass of the stalled scenario against a fresh server subprocess."""

    count: int
    stall: Stall = field(default_factory=Stall)
    rss: dict[str, int] = field(default_factory=dict[str, int])
    restored: dict[str, tuple[int, int]] = field(default_factory=dict[str, tuple[int, int]])
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


async def restored_counts(url: str, sessions: list[str]) -> dict[str, tuple[int, int]]:
    """Per session, the events a restore from -1 returns (-1 where their ``seq`` has a gap), and
    how many of them are the run's ``message.delta`` events."""
    restored: dict[str, tuple[int, int]] = {}
    async with connect(url) as fresh:
        await fresh.initialize()
        for session_id in sessions:
            notes = await replay_all(fresh, session_id)
            gapless = [note["seq"] for note in notes] == list(range(len(notes)))
            deltas = sum(1 for note in notes if note["event"]["type"] == "message.delta")
            restored[session_id] = (len(notes) if gapless else -1, deltas)
    return restored


async def _measure_pass(
    process: trio.Process, run: StallRun, ask: Callable[[str], Awaitable[dict[str, Any]]], *, trace: bool
) -> None:
    """Warm up, then controls, then stalled clients, recording the RSS points of :func:`stall_pass`."""
    pid, stall = process.pid, run.stall
    port = urlsplit(stall.url).port
    assert port is not None
    fds_idle = open_fds(pid)
    warm = Stall(url=stall.url)
    warm.over.set()
    async with trio.open_nursery() as clients:  # lazily created state joins the baseline
        await start_clients(clients, port, True, warm, min(run.count, 4))
    await settle(lambda: open_fds(pid), fds_idle, 5)
    await ask("trim")
    run.rss["baseline"] = rss_kib(pid)
    async with trio.open_nursery() as clients:
        await start_clients(clients, port, True, stall, run.count)
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
    run.restored = await restored_counts(stall.url, stall.sessions)


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

    def entry(db: Path) -> list[str]:
        return ["--serve-stalled", str(db), str(directory / "root"), *(["--trace"] if trace else [])]

    async with server_process(directory, name, entry=entry) as (process, url, db):
        stall.url = url
        assert process.stdout is not None
        commands = process.stdin
        assert commands is not None

        async def ask(command: str) -> dict[str, Any]:
            await commands.send_all(command.encode() + b"\n")
            return await replies.receive()

        async with trio.open_nursery() as reader:
            reader.start_soon(read_reports, process.stdout, stall, replies_in)
            with trio.move_on_after(seconds) as scope:
                await _measure_pass(process, run, ask, trace=trace)
            run.timed_out = scope.cancelled_caught
            await commands.aclose()  # end of stdin: the server shuts down gracefully
            with trio.move_on_after(SIGTERM_SECONDS):
                await process.wait()
            reader.cancel_scope.cancel()
    async with SqliteSessionStore(db) as store:
        for session_id in stall.sessions:
            run.stored[session_id] = await store.size(session_id)
    return run


def _memory_verdicts(run: StallRun, cap: int, verdicts: Verdicts) -> tuple[dict[str, Any], bool]:
    """Print the server's RSS figures and judge them against ``cap``; the report, and whether it is over."""
    # What a stalled connection holds beyond a control connection that ran the same workload:
    # its queue, the message waiting for room (the largest notification a control received,
    # plus its 10-byte frame header), the run's own event waiting to be sent and the objects of
    # the waiting task. The spec's bound is the outbound cap itself. Beyond it, the runtime
    # keeps the answer text streamed so far (it builds ``message.completed`` from it); the
    # control's runs keep theirs too, but they streamed more, so that text is counted apart.
    frame = run.stall.largest_message + 10
    stalled = run.stall.sessions
    held = sum(run.stall.emitted.get(sid, 0) for sid in stalled) * STALL_DELTA_BYTES / max(1, len(stalled))
    bound = cap + held
    control = run.per_connection("control", "baseline")
    growth = run.per_connection("peak", "control")
    live = run.per_connection("stalled_trimmed", "control")
    shown = ", ".join(f"{key} {value:,}" for key, value in run.rss.items())
    print(f"  server RSS (KiB): {shown}")
    print(
        f"  per connection: control {control:.1f} KiB; stalled beyond control {growth:.1f} KiB at peak,"
        f" {live:.1f} KiB after malloc_trim while stalled;"
        f" bound = the outbound cap, {cap:,} B ({cap / 1024:.0f} KiB), plus the {held / 1024:.0f} KiB of"
        f" answer text a stalled run keeps; one waiting frame is {frame:,} B"
    )
    # "Stays under": what a stalled connection keeps while it is stalled (after malloc_trim
    # returns the allocator's free pages), not the transient high-water mark of building frames.
    verdicts.expect(
        "RSS per stalled connection beyond a like-for-like control and its run's answer text stays"
        " under the outbound cap",
        live * 1024 <= bound,
        f"{live:.1f} KiB per stalled connection while stalled ({growth:.1f} KiB at the peak),"
        f" cap {cap // 1024} KiB + {held / 1024:.0f} KiB of answer text",
    )
    residual = run.per_connection("closed", "control")
    trimmed = run.per_connection("trimmed", "control")
    verdicts.expect(
        "memory of the stalled connections is released after their 1013 closes",
        min(residual, trimmed) <= STALL_RESIDUAL_SHARE * growth,
        f"{residual:.1f} KiB per stalled connection left after the closes, {trimmed:.1f} KiB after"
        f" malloc_trim (at most {STALL_RESIDUAL_SHARE:.0%} of the {growth:.1f} KiB stalled growth)",
    )
    return {
        "rss_kib": run.rss,
        "kib_per_control_connection": control,
        "kib_per_stalled_connection_beyond_control": growth,
        "bound_bytes": {"cap": cap, "waiting_frame": frame, "answer_text": held},
        "residual_kib_per_connection": {"closed": residual, "trimmed": trimmed},
    }, live * 1024 > bound


async def phase_stalled(directory: Path, arguments: argparse.Namespace, verdicts: Verdicts) -> dict[str, Any]:
    """The stalled scenario; a second pass under tracemalloc when the memory bound fails."""
    count = arguments.stalled
    cap = max(64 * 1024, 2 * STALL_MESSAGE_BYTES)
    print(
        f"stalled: {count} clients stop reading mid-prompt (outbound cap {cap // 1024} KiB), beside"
        f" {count} control connections running the same workload ({STALL_EVENTS} events of"
        f" {STALL_DELTA_BYTES // 1024} KiB) that read normally; a fresh server subprocess",
        flush=True,
    )
    run = await stall_pass(directory, count, arguments.timeout, trace=False)
    stall = run.stall
    codes = list(stall.codes.values())
    seen = {str(code): codes.count(code) for code in set(codes)}
    verdicts.expect(
        "stalled clients are closed with 1013 (then aborted)", seen == {"1013": count}, json.dumps(seen)
    )
    memory, over_cap = _memory_verdicts(run, cap, verdicts)
    emitted = sum(stall.emitted[session_id] for session_id in stall.sessions)
    ok = (
        not run.timed_out
        and len(run.restored) == count
        and all(
            run.restored[sid][0] == run.stored[sid] and run.restored[sid][1] == stall.emitted[sid]
            for sid in stall.sessions
        )
    )
    restored = sum(max(0, events) for events, _ in run.restored.values())
    deltas = sum(deltas for _, deltas in run.restored.values())
    verdicts.expect(
        "committed events of stalled sessions restorable, gapless, equal to the store",
        ok,
        f"{restored} events restored, {sum(run.stored.values())} stored;"
        f" {deltas} deltas restored, {emitted} emitted by the runs",
    )
    result: dict[str, Any] = {"codes": seen, **memory, "restored": restored}
    if over_cap:
        # Where does it go? The same pass under tracemalloc: allocations alive at the stall that
        # were not alive with the controls alone, per stalled connection.
        print("  where the stalled memory was allocated (tracemalloc pass, per stalled connection):")
        traced = await stall_pass(directory, count, arguments.timeout, trace=True)
        for size, blocks, where in traced.sites:
            print(f"    {size / count / 1024:8.1f} KiB {blocks / count:6.1f} blocks  {where}")
        result["sites"] = traced.sites
    return result
