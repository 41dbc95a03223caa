"""Phase mixed: plain sessions beside offending connections, each of which must end as documented."""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any, Final

import trio
from wsproto.events import TextMessage

from agent_server import ServerHandle
from agent_server.client import HandshakeRejectedError, connect

from ._clients import health, http_status, masked_frame, raw_websocket, url_token
from ._sessions import LevelResult, print_level, run_level
from ._verdicts import Verdicts

MAX_MESSAGE_BYTES: Final = 1024 * 1024
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


async def _offend_over_http(port: int, url: str, kind: str) -> str:
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
    status = await http_status(port, b"GET /acp HTTP/1.1\r\nHost: x\r\n")  # a slow request head
    return f"HTTP {status}"


async def offend(port: int, url: str, kind: str) -> str:
    """Run one offending connection; its observed outcome (``close 1003``, ``HTTP 400``, ...)."""
    if kind in ("bad handshake", "wrong token", "slow request head"):
        return await _offend_over_http(port, url, kind)
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


async def _run_beside_offenders(
    handle: ServerHandle, url: str, arguments: argparse.Namespace
) -> tuple[LevelResult, dict[str, dict[str, int]]]:
    """The sessions again, with ``arguments.offenders`` of each offender started first."""
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
            mixed = await run_level(url, arguments.mixed_sessions, arguments.timeout)
    assert mixed is not None
    return mixed, outcomes


async def phase_mixed(
    handle: ServerHandle, arguments: argparse.Namespace, verdicts: Verdicts
) -> dict[str, Any]:
    """A baseline of sessions alone, then beside offenders; outcomes, health and latency ratio."""
    count = arguments.mixed_sessions
    print(f"mixed: {count} sessions alone, then with {arguments.offenders} of each offender", flush=True)
    url = f"{handle.url}?token={handle.token}"
    baseline = await run_level(url, count, arguments.timeout)
    print_level("baseline", baseline)
    mixed, outcomes = await _run_beside_offenders(handle, url, arguments)
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
