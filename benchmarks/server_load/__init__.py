"""The agent server's load and failure benchmark, one module per phase.

Run by hand through its entry point: ``uv run python benchmarks/agent_server_load.py [--quick]``
(that file describes the phases). Shared here: ``_clients`` (raw HTTP and frame-level
WebSocket clients), ``_sessions`` (levels of concurrent sessions), ``_server`` (the server's
configuration and subprocess), ``_measure`` (``/proc`` and trio figures), ``_verdicts``.
"""

from ._driver import main

__all__ = ["main"]
