"""agent-server: the ``harness/acp/1`` JSON-RPC service over WebSocket.

One trio process drives kernel runs for WebSocket clients: each session's prompt is one run
of ``harness_kernel.runtime.MinimalAgentRuntime``, and every event is redacted and stored
before it is streamed. :func:`serve` runs the server for a :class:`ServerConfig`;
:func:`embedded_server` runs one private to this process for its own clients; the client side
lives in :mod:`agent_server.client`.
"""

from agent_server._config import (
    LimitsConfig,
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    StorageConfig,
    ToolProviderContext,
    WorkspaceConfig,
)
from agent_server._embedded import embedded_server
from agent_server._errors import AcpError
from agent_server._protocol import PROTOCOL_VERSION
from agent_server._server import ServerHandle, serve
from agent_server._version import __version__

__all__ = [
    "PROTOCOL_VERSION",
    "AcpError",
    "LimitsConfig",
    "ModelConfig",
    "NetworkConfig",
    "ServerConfig",
    "ServerHandle",
    "StorageConfig",
    "ToolProviderContext",
    "WorkspaceConfig",
    "__version__",
    "embedded_server",
    "serve",
]
