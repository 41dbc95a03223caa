"""``agent-server serve | demo`` (spec §9.2). Invalid settings print to stderr and exit 2."""

from __future__ import annotations

import argparse
import copy
import os
import signal
import sys
from collections.abc import Sequence
from typing import Final, NoReturn

import trio

from agent_server._auth import generate_token
from agent_server._chat_cli import add_chat_flags
from agent_server._cli_config import DEFAULT_PORT, build_config, build_embedded_config, with_default_tokens
from agent_server._cli_help import SuggestingParser, examples
from agent_server._config import WORKSPACE_ADAPTERS, ServerConfig
from agent_server._environment import parse_outbound_stall_ms, refuse_unsupported
from agent_server._server import ServerHandle, serve

__all__ = ["build_config", "main"]

SANDBOX_ENGINES: Final = ("docker", "bubblewrap")


class _Parser(SuggestingParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"agent-server: error: {message}\n")


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError("port must be an integer from 0 to 65535")
    return int(text)


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return int(text)


def _non_negative(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError("must be a non-negative integer")
    return int(text)


def _stall_ms(text: str) -> int:
    try:
        return parse_outbound_stall_ms(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


_TOP_EXAMPLES: Final = examples(
    ("serve the current directory on 127.0.0.1:8765 with the offline scripted model", ["agent-server serve"]),
    ("print a fresh token to append to a token file", ["agent-server token"]),
    ("run one scripted session end to end", ["agent-server demo"]),
)
_SERVE_EXAMPLES: Final = examples(
    (
        "read-only tools on a repository, offline",
        [
            "agent-server serve --workspace-root ~/src/app",
            "--workspace-adapter local --tools fs.read,fs.list,git.diff",
        ],
    ),
    (
        "a provider model and the development tools in a disposable bubblewrap sandbox",
        [
            "agent-server serve --model openai:gpt-4o-mini --tools dev",
            "--workspace-adapter sandbox --sandbox-engine bubblewrap",
        ],
    ),
    (
        "a local OpenAI-compatible server, sessions kept in memory only",
        [
            "agent-server serve --model openai-compatible:llama3",
            "--base-url http://127.0.0.1:11434/v1 --no-db",
        ],
    ),
)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agent-server",
        description="The harness/acp/1 agent server: sessions over WebSocket, one kernel run per prompt.",
        epilog=_TOP_EXAMPLES + "\n\nEach command's options: agent-server COMMAND --help",
    )
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=_Parser,
        help="what to run; each command has its own --help",
    )
    run = commands.add_parser(
        "serve",
        help="serve harness/acp/1 until SIGINT or SIGTERM",
        description="Serve harness/acp/1 over WebSocket until SIGINT or SIGTERM. A flag wins over"
        " its environment variable; invalid settings exit 2 before anything listens.",
        epilog=_SERVE_EXAMPLES,
    )
    _add_network_options(run.add_argument_group("network"))
    _add_storage_options(run.add_argument_group("storage"))
    _add_model_options(run.add_argument_group("model"))
    _add_workspace_options(run.add_argument_group("tools and workspace"))
    _add_limit_options(run.add_argument_group("limits"))
    # chat takes every serve flag for its embedded server (_chat_cli refuses the listener's);
    # a copy, since parents share their actions and chat changes two defaults.
    chat = commands.add_parser(
        "chat",
        parents=[copy.deepcopy(run)],
        add_help=False,
        help="talk to an agent in a terminal (an embedded server, or --url)",
        description="An interactive terminal client: a prompt line, streamed answers, tool calls"
        " and permission questions. Without --url it runs a server on loopback over the current"
        " directory with serve's flags.",
    )
    add_chat_flags(chat)
    acp = commands.add_parser(
        "acp",
        help="speak the Agent Client Protocol (agentclientprotocol.com) on stdin/stdout, for editors",
        description="Run as an editor's ACP agent: JSON-RPC on stdin/stdout, logs on stderr, an embedded"
        " server on a private loopback port. Each session's workspace is the editor's cwd (under"
        " --workspace-root, default /). Sessions are kept, and session/load offered, only with --db.",
        epilog=examples(
            (
                "read-only tools in the editor's project, a provider model, sessions kept",
                [
                    "agent-server acp --workspace-adapter local --tools fs.read,fs.list,git.diff",
                    "--model anthropic:MODEL --db ~/.local/state/harness-acp.sqlite",
                ],
            ),
        ),
    )
    _add_acp_parser(acp, run)
    commands.add_parser(
        "demo",
        help="run one scripted session against an ephemeral local server",
        description="Start a server on a free loopback port, run one scripted session against it, stop.",
    )
    commands.add_parser(
        "token",
        help="print a fresh 256-bit token, for a token file",
        description="Print a fresh 256-bit token: append it to a --token-file (TOKEN or PRINCIPAL TOKEN).",
    )
    return parser


def _add_network_options(group: argparse._ArgumentGroup) -> None:  # pyright: ignore[reportPrivateUsage]
    group.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    group.add_argument(
        "--port",
        type=_port,
        default=None,
        help=f"the port to listen on, 0 for any free one (default: {DEFAULT_PORT}; env HARNESS_AGENT_PORT)",
    )
    group.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="tokens, one a line (TOKEN or PRINCIPAL TOKEN), in a file only its owner can read"
        " (default: one created beside the default store)",
    )
    group.add_argument(
        "--token-env",
        default="HARNESS_AGENT_TOKEN",
        metavar="VARIABLE",
        help="the variable holding one token; every process of this user can read it, prefer --token-file",
    )
    group.add_argument(
        "--allow-plaintext-remote",
        action="store_true",
        help="listen on a non-loopback address without TLS in front"
        " (env HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE=true)",
    )
    group.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser Origin allowed to connect, repeatable (default: none; requests without Origin pass)",
    )
    group.add_argument(
        "--readiness-path",
        default=None,
        metavar="PATH",
        help="a file, relative to the workspace root, whose existence /health/ready also requires"
        " (default: none; env HARNESS_AGENT_READINESS_PATH)",
    )


def _add_storage_options(group: argparse._ArgumentGroup) -> None:  # pyright: ignore[reportPrivateUsage]
    group.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default=None,
        help="where sessions are stored: one SQLite file, or PostgreSQL shared by several servers"
        " (default: postgres when HARNESS_DATABASE_URL is set, else sqlite)",
    )
    group.add_argument(
        "--database-url",
        default=None,
        metavar="URL",
        help="the PostgreSQL database of --store postgres, postgresql://USER@HOST/DB"
        " (default: env HARNESS_DATABASE_URL, which keeps a password out of the process list)",
    )
    store = group.add_mutually_exclusive_group()
    store.add_argument(
        "--db",
        default=None,
        metavar="FILE",
        help="the SQLite session store (default: sessions.sqlite in the user's state directory)",
    )
    store.add_argument("--no-db", action="store_true", help="keep sessions in memory only; lost on exit")
    group.add_argument(
        "--resume-interrupted",
        action="store_true",
        help="at start-up, continue in the background every session of this root whose turn a"
        " crash interrupted (no client attached: permission requests are denied)",
    )
    group.add_argument(
        "--retention-days",
        type=_non_negative,
        default=30,
        metavar="DAYS",
        help="delete sessions closed longer ago than this; 0 keeps them forever (default: 30)",
    )
    group.add_argument(
        "--retention-max-bytes",
        type=_positive,
        default=None,
        metavar="BYTES",
        help="also delete the oldest finished sessions while finished sessions keep more than"
        " this many bytes of events (default: no size limit; env HARNESS_AGENT_RETENTION_MAX_BYTES)",
    )


def _add_model_options(group: argparse._ArgumentGroup) -> None:  # pyright: ignore[reportPrivateUsage]
    group.add_argument(
        "--model",
        default=None,
        metavar="PROVIDER:MODEL",
        help="fake (offline, scripted), openai:MODEL, anthropic:MODEL, or openai-compatible:MODEL"
        " with --base-url (default: fake; env HARNESS_MODEL)",
    )
    group.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="the provider API's base URL, required for openai-compatible"
        " (default: the provider's; env HARNESS_MODEL_BASE_URL)",
    )
    group.add_argument(
        "--api-key-env",
        default=None,
        metavar="VARIABLE",
        help="the variable holding the provider key (default: env OPENAI_API_KEY or ANTHROPIC_API_KEY)",
    )
    group.add_argument(
        "--api-key-file",
        default=None,
        metavar="FILE",
        help="read the provider key from FILE (one line, mode 0600, not a link), so no key is in the"
        " environment for commands to read (default: env HARNESS_MODEL_API_KEY_FILE)",
    )
    group.add_argument(
        "--api-key-fd",
        type=_non_negative,
        default=None,
        metavar="N",
        help="read the provider key from the inherited file descriptor N (3 or more), e.g. a pipe"
        " (default: none)",
    )
    group.add_argument(
        "--model-timeouts",
        default=None,
        metavar="CONNECT,READ,TOTAL",
        help="seconds to connect, between two reads of a stream, and for a whole request"
        " (default: 10,120,600)",
    )
    group.add_argument(
        "--allow-insecure-http",
        action="store_true",
        help="allow a plain http:// base URL to a host that is not loopback (the key travels in clear)",
    )
    group.add_argument(
        "--scenario",
        default=None,
        metavar="FILE",
        help="a scenario file whose script the fake model plays (default: the fake model's own)",
    )
    group.add_argument(
        "--context-window-tokens",
        type=_positive,
        default=None,
        metavar="N",
        help="the model's context window: a request that would not fit fails before it is sent"
        " (default: none, the context is not measured; give it with --context-threshold-tokens)",
    )
    group.add_argument(
        "--context-threshold-tokens",
        type=_positive,
        default=None,
        metavar="N",
        help="compact the conversation (the model summarises its older part) once a request's"
        " estimate reaches this, at most the window less the reserve"
        " (default: none; required with --context-window-tokens)",
    )
    group.add_argument(
        "--context-tail-messages",
        type=_non_negative,
        default=None,
        metavar="N",
        help="the latest messages a compaction keeps word for word (default: 8)",
    )
    group.add_argument(
        "--context-reserve-tokens",
        type=_non_negative,
        default=None,
        metavar="N",
        help="tokens of the window kept free for the answer (default: 0)",
    )


def _add_workspace_options(group: argparse._ArgumentGroup) -> None:  # pyright: ignore[reportPrivateUsage]
    group.add_argument(
        "--workspace-root",
        default=None,
        metavar="DIR",
        help="the folder sessions' workspaces live under (default: the current directory)",
    )
    group.add_argument(
        "--tools",
        default="echo",
        metavar="NAMES",
        help="comma-separated: echo, read_file, fs.read, fs.list, fs.write, process.exec, git.diff;"
        " dev = the last five; fs.write and process.exec need a sandbox or --allow-host-effects",
    )
    group.add_argument(
        "--workspace-adapter",
        choices=WORKSPACE_ADAPTERS,
        default=None,
        help="local: the host folder itself; sandbox: a disposable copy per session"
        " (default: none, workspace tools refused; env HARNESS_AGENT_WORKSPACE_ADAPTER=local)",
    )
    group.add_argument(
        "--allow-host-effects",
        action="store_true",
        help="UNSAFE: with --workspace-adapter local, fs.write and process.exec act on the host,"
        " unconfined, as this user",
    )
    group.add_argument(
        "--tasks-dir",
        default=None,
        metavar="DIR",
        help="read task manifests from DIR/<id>.yaml, a folder outside --workspace-root"
        " (default: tasks/<id>.yaml in the workspace repository's --task-base commit)",
    )
    group.add_argument(
        "--task-base",
        default="HEAD",
        metavar="REV",
        help="the commit of each workspace's repository that task manifests are read from:"
        " HEAD, a branch, a refs/ name or a commit id; the working tree's copy must match it"
        " (default: HEAD)",
    )
    group.add_argument(
        "--sandbox-engine",
        choices=SANDBOX_ENGINES,
        default=None,
        help="with --workspace-adapter sandbox: the isolation engine, never a fallback (default: docker)",
    )
    group.add_argument(
        "--sandbox-image",
        default=None,
        metavar="NAME@sha256:...",
        help="the docker engine's image by digest, required for it"
        " (build one with packages/sandbox/scripts/build_image.py)",
    )


def _add_limit_options(group: argparse._ArgumentGroup) -> None:  # pyright: ignore[reportPrivateUsage]
    group.add_argument(
        "--max-sessions", type=_positive, default=256, metavar="N", help="live sessions, server-wide"
    )
    group.add_argument(
        "--max-sessions-per-principal",
        type=_positive,
        default=None,
        metavar="N",
        help="live sessions one principal may hold (default: --max-sessions divided among the"
        " principals of --token-file; env HARNESS_AGENT_MAX_SESSIONS_PER_PRINCIPAL)",
    )
    group.add_argument(
        "--max-stored-bytes-per-principal",
        type=_positive,
        default=None,
        metavar="BYTES",
        help="event bytes one principal's sessions may keep in the store before its new sessions"
        " and prompts are refused (default: no limit; env HARNESS_AGENT_MAX_STORED_BYTES_PER_PRINCIPAL)",
    )
    group.add_argument(
        "--max-run-seconds",
        type=_positive,
        default=1800,
        metavar="SECONDS",
        help="wall time of one prompt's run",
    )
    group.add_argument(
        "--session-lease-seconds",
        type=_positive,
        default=30,
        metavar="SECONDS",
        help="how long a session stays owned by this server without a refresh: after a crash,"
        " another server on the same database may take it over once this has passed",
    )
    group.add_argument(
        "--max-message-bytes",
        type=_positive,
        default=1024 * 1024,
        metavar="BYTES",
        help="the largest WebSocket text message, in either direction",
    )
    group.add_argument(
        "--outbound-stall-ms",
        type=_stall_ms,
        default=None,
        metavar="MS",
        help="close (1013) a socket whose peer reads nothing this long while its queue is full"
        " (default: 5000; env HARNESS_AGENT_OUTBOUND_STALL_MS)",
    )
    group.add_argument(
        "--sandbox-memory",
        type=int,
        default=None,
        metavar="MIB",
        help="memory per sandbox, MiB (default: the engine's)",
    )
    group.add_argument(
        "--sandbox-pids",
        type=int,
        default=None,
        metavar="N",
        help="processes per sandbox (default: the engine's)",
    )
    group.add_argument(
        "--sandbox-cpus",
        type=float,
        default=None,
        metavar="CPUS",
        help="CPUs per sandbox (default: the engine's)",
    )


_ACP_SHARED: Final = {
    "db": "storage",
    "max_run_seconds": "limits",
    "sandbox_memory": "limits",
    "sandbox_pids": "limits",
    "sandbox_cpus": "limits",
}
"""serve's flags that ``acp`` shares beyond the model and workspace groups, by destination and group."""


def _add_acp_parser(acp: argparse.ArgumentParser, serve_parser: argparse.ArgumentParser) -> None:
    """``acp``: serve's model, tools, workspace, store and run-limit flags, with the same help."""
    _add_model_options(acp.add_argument_group("model"))
    _add_workspace_options(acp.add_argument_group("tools and workspace"))
    groups = {name: acp.add_argument_group(name) for name in ("storage", "limits")}
    for action in serve_parser._actions:
        if action.dest in _ACP_SHARED:
            # A copy of serve's action: the same help, and a default acp could never change for serve.
            groups[_ACP_SHARED[action.dest]]._add_action(copy.copy(action))
    # The embedded server is private to this process: serve's network options keep their defaults.
    defaults = {
        "host": "127.0.0.1",
        "port": 0,
        "no_db": False,
        "token_file": None,
        "token_env": "HARNESS_AGENT_TOKEN",
    }
    defaults |= {"allow_plaintext_remote": False, "allow_origin": [], "max_message_bytes": 1024 * 1024}
    defaults |= {"readiness_path": None, "max_sessions": 256, "retention_days": 30, "outbound_stall_ms": None}
    # The embedded server keeps its sessions in SQLite, whatever HARNESS_DATABASE_URL says.
    defaults |= {"store": "sqlite", "database_url": None, "session_lease_seconds": 30}
    defaults |= {"resume_interrupted": False}
    defaults |= {"max_sessions_per_principal": None, "max_stored_bytes_per_principal": None}
    defaults |= {"retention_max_bytes": None}
    acp.set_defaults(**defaults)


async def _serve_until_signal(config: ServerConfig, token_note: str) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve, config)
            print(f"agent-server: {handle.url}", flush=True)
            print(f"agent-server: {token_note}", flush=True)
            async for _ in signals:
                await handle.aclose()
                break


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit status."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command == "chat":
        from agent_server._chat import run_chat  # noqa: PLC0415 - only chat needs the client

        return run_chat(arguments, parser.parse_args(["chat"]), dict(os.environ))
    if arguments.command == "token":
        print(generate_token())
        return 0
    environ = dict(os.environ)
    config: ServerConfig | None = None
    token_note = ""
    try:
        if arguments.command == "demo":
            refuse_unsupported(environ)
        elif arguments.command == "acp":
            from agent_server._acp_stdio import run_stdio_process  # noqa: PLC0415 - only acp needs it

            # An editor names each session's cwd; the root only bounds where one may be.
            root = arguments.workspace_root or os.path.abspath(os.sep)
            return run_stdio_process(build_embedded_config(arguments, environ, workspace_root=root))
        else:
            config, token_note = with_default_tokens(build_config(arguments, environ), arguments)
    except ValueError as error:
        print(f"agent-server: error: {error}", file=sys.stderr)
        return 2
    if config is None:
        from agent_server._demo import run_demo  # noqa: PLC0415 - only the demo needs the client

        return trio.run(run_demo)
    status = 0
    try:
        trio.run(_serve_until_signal, config, token_note)
    except* (ValueError, OSError) as group:
        for error in group.exceptions:
            print(f"agent-server: error: {error}", file=sys.stderr)
        status = 2
    return status
