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
from agent_server._cli_config import build_config, build_embedded_config, with_default_tokens
from agent_server._cli_help import SuggestingParser, examples
from agent_server._config import ServerConfig
from agent_server._environment import refuse_unsupported
from agent_server._server import ServerHandle, serve
from agent_server._settings import add_options

__all__ = ["build_config", "main"]


class _Parser(SuggestingParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"agent-server: error: {message}\n")


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
    add_options(run)
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
    add_options(acp, acp=True)
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
