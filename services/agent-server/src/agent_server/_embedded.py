"""``embedded_server``: a server private to this process, for its own clients (spec §9.3).

``demo``, ``chat`` and ``acp`` each run the real :func:`~agent_server.serve` for one local user
and talk to it with :mod:`agent_server.client`; this is the one way they start it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import trio

from agent_server._config import NetworkConfig, ServerConfig
from agent_server._server import ServerHandle, serve

__all__ = ["embedded_server", "private_config"]


def private_config(config: ServerConfig) -> ServerConfig:
    """``config`` made private to this process: its network record replaced by loopback, any free
    port, no configured token (``serve`` then generates one and hands it out only on its handle),
    no origins and no readiness file; only the path is kept."""
    network = NetworkConfig(path=config.network.path, port=0)
    return dataclasses.replace(config, network=network)


@asynccontextmanager
async def embedded_server(config: ServerConfig) -> AsyncGenerator[ServerHandle]:
    """Serve ``config``, made private to this process, while the block runs.

    The server listens on 127.0.0.1 on a free port with a token generated for this process
    (``handle.url``, ``handle.token``, ``handle.connect()``); every other setting — store,
    model, tools, workspace adapter, limits — is ``config``'s. Leaving the block closes the
    server gracefully, also when the caller is cancelled.

    Raises:
        ExceptionGroup: holding the ``ValueError`` of a setting ``serve`` refuses before
            binding, or the ``OSError`` of an address or store that cannot be opened (the
            server runs in a trio nursery, which groups what its tasks raise).
    """
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, private_config(config))
        try:
            yield handle
        finally:
            with trio.CancelScope(shield=True):
                await handle.aclose()
