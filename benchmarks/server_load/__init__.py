"""The agent server's load and failure benchmark, one module per phase.

Run by hand through its entry point: ``uv run python benchmarks/agent_server_load.py [--quick]``
(that file describes the phases). Shared here: ``_arguments`` (the command line), ``_clients``
(raw HTTP and frame-level WebSocket clients), ``_sessions`` (levels of concurrent sessions),
``_workers`` (client worker processes that run them), ``_server`` (the server's configuration
and subprocess), ``_levels_server`` (the levels' server subprocess), ``_measure`` (``/proc``
and trio figures), ``_profile`` and ``_flame`` (cProfile and py-spy), ``_postgres`` (the
levels' PostgreSQL: a throwaway cluster and its CPU), ``_verdicts``.
"""

from ._driver import main

__all__ = ["main"]
