"""What an endless model answer costs agent-server in memory, with and without stream limits.

Run by hand (it is not a test):
``uv run python benchmarks/model_stream_memory.py [--seconds 45] [--delta-chars 400]
[--client reading|stalled] [--store sqlite|memory]``.

Each variant runs in a fresh child process (so its resident size is its own): agent-server
(``serve``, sessions in SQLite under a temporary folder as ``serve`` keeps them, or in
memory as ``serve --no-db`` does) on an
``openai-compatible`` model, whose provider is a loopback HTTP/1.1 server in the same process
that answers every request with a role chunk and then text-delta chunks of
``--delta-chars`` characters without end. One client connects and prompts once; it either
counts its notifications as they come (``reading``) or never takes one (``stalled``; the
client library still reads the socket into its own unbounded channel, in this same process,
so the figure counts that buffer as well). The child samples its ``VmRSS`` once
per second until the turn ends or ``--seconds`` pass, and prints the samples, the peak, the
text deltas the client received and the turn's status.

Variants:

- ``limited``: the default :class:`~harness_models.StreamLimits` (8 MiB of text, 262 144
  events, 64 MiB of body per response): the turn must fail with ``MODEL_STREAM_TOO_LARGE``
  and the resident size level off.
- ``unlimited``: every limit at its maximum (1 GiB, 2**30 events), which is what a server
  without the limits did: the stream runs on, and the resident size grows with it.

The figures depend on the machine (2 shared cores here): compare the shapes, not the digits.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

import trio

from agent_server import (
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    ServerHandle,
    StorageConfig,
    WorkspaceConfig,
    serve,
)
from agent_server._catalogue import catalogue_provider
from agent_server.client import AcpClient, connect
from harness_models import ModelSpec, StreamLimits, model_factory

MODEL: Final = "openai-compatible:endless"
UNLIMITED: Final = StreamLimits(
    max_text_bytes=2**30, max_argument_bytes=2**30, max_events=2**30, max_response_bytes=2**30
)


def resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _event(data: object) -> bytes:
    payload = f"data: {json.dumps(data)}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def endless_provider(stream: trio.SocketStream, delta_chars: int) -> None:
    """Read one request head and answer with text deltas until the client hangs up."""
    received = b""
    while b"\r\n\r\n" not in received:
        piece = await stream.receive_some(65536)
        if not piece:
            return
        received += piece
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    role = {"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    delta = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"content": "x" * delta_chars}, "finish_reason": None}],
    }
    burst = _event(delta) * 64
    try:
        await stream.send_all(head + _event(role))
        while True:
            await stream.send_all(burst)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


async def child(variant: str, seconds: float, delta_chars: int, client_mode: str, store_kind: str) -> None:
    limits = StreamLimits() if variant == "limited" else UNLIMITED
    samples: list[float] = [resident_mib()]
    deltas = 0
    status = "still running"

    async def count(client: AcpClient) -> None:
        nonlocal deltas
        async for note in client.notifications:
            deltas += note["params"]["event"]["type"] == "message.delta"

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "root"
        (root / "ws").mkdir(parents=True)
        async with trio.open_nursery() as nursery:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]

            async def answer(stream: trio.SocketStream) -> None:
                await endless_provider(stream, delta_chars)

            nursery.start_soon(trio.serve_listeners, answer, listeners)
            spec = ModelSpec(
                provider="openai-compatible",
                model="endless",
                base_url=f"http://127.0.0.1:{port}/v1",
                stream_limits=limits,
            )
            config = ServerConfig(
                network=NetworkConfig(port=0),
                storage=StorageConfig(
                    db_path=str(Path(folder) / "sessions.sqlite") if store_kind == "sqlite" else None,
                    persistence=store_kind == "sqlite",
                ),
                model=ModelConfig(models={MODEL: model_factory(spec, {})}),
                workspace=WorkspaceConfig(workspace_root=str(root), tools=catalogue_provider(["echo"])),
            )
            handle: ServerHandle = await nursery.start(serve, config)

            async def sample() -> None:
                while True:
                    await trio.sleep(1)
                    samples.append(resident_mib())

            nursery.start_soon(sample)
            with trio.move_on_after(seconds):
                async with connect(handle.url, token=handle.token) as client:
                    await client.initialize()
                    session = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
                    if client_mode == "reading":
                        nursery.start_soon(count, client)
                    # The client keeps nothing: it counts (reading) or never reads (stalled).
                    result = await client.request("session/prompt", {"sessionId": session, "content": "talk"})
                    status = str(result["status"])
            await handle.aclose()
            nursery.cancel_scope.cancel()
    print(
        json.dumps(
            {
                "variant": variant,
                "client": client_mode,
                "store": store_kind,
                "status": status,
                "deltas_received": deltas,
                "rss_start_mib": round(samples[0], 1),
                "rss_peak_mib": round(max(samples), 1),
                "rss_samples_mib": [round(value) for value in samples],
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="What an endless model answer costs agent-server in memory.")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--delta-chars", type=int, default=400)
    parser.add_argument("--client", choices=["reading", "stalled"], default="reading")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--variant", choices=["limited", "unlimited"], default=None, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.variant is not None:
        trio.run(
            child,
            arguments.variant,
            arguments.seconds,
            arguments.delta_chars,
            arguments.client,
            arguments.store,
        )
        return
    for variant in ("limited", "unlimited"):
        command = [sys.executable, __file__, "--variant", variant, "--seconds", str(arguments.seconds)]
        command += ["--delta-chars", str(arguments.delta_chars), "--client", arguments.client]
        command += ["--store", arguments.store]
        subprocess.run(command, check=True, env=os.environ.copy())


if __name__ == "__main__":
    main()
