"""``agent-server serve | demo`` (spec §9.2). Invalid settings print to stderr and exit 2."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Final, NoReturn

import trio

from agent_server._auth import DEFAULT_PRINCIPAL, ensure_token_file, generate_token, read_token_file
from agent_server._catalogue import EFFECT_TOOL_NAMES, catalogue_provider, expand_tool_names
from agent_server._chat_cli import add_chat_flags
from agent_server._cli_help import SuggestingParser, examples
from agent_server._config import (
    DEFAULT_MODEL_NAME,
    WORKSPACE_ADAPTERS,
    ModelFactory,
    ServerConfig,
    check_database_url,
)
from agent_server._environment import (
    QUOTA_VARIABLES,
    Environment,
    parse_outbound_stall_ms,
    read_environment,
    refuse_unsupported,
)
from agent_server._scenario import ScenarioModelFactory, read_script
from agent_server._server import ServerHandle, default_token_path, serve
from harness_kernel.runtime import ContextPolicy
from harness_models import ModelError, ModelSpec, Timeouts, model_factory, parse_model_spec
from harness_sandbox import BubblewrapEngine, DockerEngine, SandboxEngine, SandboxLimits

__all__ = ["build_config", "main", "with_default_tokens"]

SANDBOX_ENGINES: Final = ("docker", "bubblewrap")
_DEFAULT_PORT: Final = 8765


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
        help=f"the port to listen on, 0 for any free one (default: {_DEFAULT_PORT}; env HARNESS_AGENT_PORT)",
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


def build_config(arguments: argparse.Namespace, environ: dict[str, str]) -> ServerConfig:
    """The :class:`ServerConfig` of ``serve`` from its arguments and the environment.

    Raises:
        ValueError: an invalid argument, variable or setting.
    """
    environment = read_environment(environ, token_variable=arguments.token_env)
    root = arguments.workspace_root if arguments.workspace_root is not None else os.getcwd()
    port = arguments.port
    if port is None:
        port = environment.port if environment.port is not None else _DEFAULT_PORT
    models = _provider_models(arguments, environment, environ)
    if arguments.scenario is not None:
        if models is not None:
            raise ValueError("--scenario scripts the fake model; it does not go with a provider --model")
        try:
            with open(arguments.scenario, encoding="utf-8") as handle:
                script = read_script(handle.read())
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read scenario {arguments.scenario}: {error}") from None
        models = {DEFAULT_MODEL_NAME: ScenarioModelFactory(script)}
    names = [name.strip() for name in arguments.tools.split(",") if name.strip()]
    tools = catalogue_provider(names)
    allow_remote = arguments.allow_plaintext_remote or environment.allow_plaintext_remote is True
    readiness = (
        arguments.readiness_path if arguments.readiness_path is not None else environment.readiness_path
    )
    adapter = (
        arguments.workspace_adapter
        if arguments.workspace_adapter is not None
        else environment.workspace_adapter
    )
    options: dict[str, object] = {}
    stall_ms = (
        arguments.outbound_stall_ms
        if arguments.outbound_stall_ms is not None
        else environment.outbound_stall_ms
    )
    if stall_ms is not None:
        options["outbound_stall_ms"] = stall_ms
    if models is not None:
        options["models"] = models
    if arguments.token_file is not None:
        options["auth_tokens"] = read_token_file(arguments.token_file)
    elif environment.token is not None:
        options["auth_token"] = environment.token
    options.update(_sandbox_options(arguments, adapter))
    if arguments.allow_host_effects:
        if adapter != "local":
            raise ValueError(
                "--allow-host-effects is for --workspace-adapter local (a sandbox needs no opt-in)"
            )
        options["allow_host_effects"] = True
    options.update(_store_options(arguments, environment))
    for name, value in environment.quotas.items():
        options[name] = value  # a flag, read next, wins over its variable
    for name in QUOTA_VARIABLES.values():
        if getattr(arguments, name) is not None:
            options[name] = getattr(arguments, name)
    policy = _context_policy(arguments)
    if policy is not None:
        options["context_policy"] = policy
    if arguments.resume_interrupted:
        options["resume_interrupted"] = True
    if arguments.tasks_dir is not None:
        options["tasks_dir"] = arguments.tasks_dir
    config = ServerConfig(
        host=arguments.host,
        port=port,
        workspace_root=root,
        db_path=arguments.db,
        persistence=not arguments.no_db,
        allow_plaintext_remote=allow_remote,
        allowed_origins=tuple(arguments.allow_origin),
        max_message_bytes=arguments.max_message_bytes,
        readiness_path=readiness,
        max_sessions=arguments.max_sessions,
        max_run_ms=arguments.max_run_seconds * 1000,
        session_lease_ms=arguments.session_lease_seconds * 1000,
        retention_days=arguments.retention_days or None,
        workspace_adapter=adapter,
        tools=tools,
        task_base=arguments.task_base,
        **options,  # pyright: ignore[reportArgumentType]
    )
    config.check_serving()
    _check_effect_tools(names, config)
    return config


def _store_options(arguments: argparse.Namespace, environment: Environment) -> dict[str, object]:
    """``database_url`` for ``--store postgres`` (explicit, or implied by HARNESS_DATABASE_URL).

    Raises:
        ValueError: the flags contradict each other, or postgres has no URL. The messages
            never repeat a URL: it may hold a password.
    """
    url: str | None = arguments.database_url
    if url is not None:
        url = check_database_url(url)
    elif environment.database_url is not None:
        url = environment.database_url
    store = arguments.store or ("postgres" if url is not None else "sqlite")
    if store == "sqlite":
        if arguments.database_url is not None:
            raise ValueError("--database-url is for --store postgres")
        return {}
    if url is None:
        raise ValueError("--store postgres needs --database-url or HARNESS_DATABASE_URL")
    if arguments.db is not None or arguments.no_db:
        raise ValueError("--db and --no-db are for --store sqlite")
    return {"database_url": url}


def _context_policy(arguments: argparse.Namespace) -> ContextPolicy | None:
    """The ``--context-*`` flags as a :class:`ContextPolicy` (ranges are checked by ``ServerConfig``).

    Raises:
        ValueError: only one of the window and the threshold, or the tail or the reserve
            without them.
    """
    window, threshold = arguments.context_window_tokens, arguments.context_threshold_tokens
    if window is None and threshold is None:
        if arguments.context_tail_messages is not None or arguments.context_reserve_tokens is not None:
            raise ValueError(
                "--context-tail-messages and --context-reserve-tokens need"
                " --context-window-tokens and --context-threshold-tokens"
            )
        return None
    if window is None or threshold is None:
        raise ValueError("give --context-window-tokens and --context-threshold-tokens together")
    tail = arguments.context_tail_messages
    reserve = arguments.context_reserve_tokens
    return ContextPolicy(
        window_tokens=window,
        threshold_tokens=threshold,
        tail_messages=8 if tail is None else tail,
        reserve_tokens=0 if reserve is None else reserve,
    )


def _check_effect_tools(names: list[str], config: ServerConfig) -> None:
    """Refuse at start-up what every ``session/new`` would refuse: effect tools without isolation.

    Raises:
        ValueError: ``--tools`` names ``fs.write`` or ``process.exec`` (or ``dev``) on a server
            whose workspaces are not isolated.
    """
    effects = sorted(set(expand_tool_names(names)) & EFFECT_TOOL_NAMES)
    if effects and not config.effects_admitted:
        raise ValueError(
            f"{' and '.join(effects)} write or run commands and need an isolated workspace:"
            " use --workspace-adapter sandbox, or --workspace-adapter local with --allow-host-effects"
            " (unsafe: they act on the host); for reading only, use --tools fs.read,fs.list,git.diff"
        )


def _provider_models(
    arguments: argparse.Namespace, environment: Environment, environ: Mapping[str, str]
) -> dict[str, ModelFactory] | None:
    """The provider model of ``--model`` (or ``HARNESS_MODEL``), checked now; ``None`` for ``fake``.

    Raises:
        ValueError: an unknown model, a missing key (the message names the variable), a
            missing or refused base URL, or provider options without a provider model.
    """
    text = arguments.model if arguments.model is not None else environment.model
    base_url = arguments.base_url if arguments.base_url is not None else environment.model_base_url
    key_file = arguments.api_key_file
    if key_file is None and arguments.api_key_env is None and arguments.api_key_fd is None:
        key_file = environment.model_api_key_file
    if text is None or text.strip() == "fake":
        provider_only = (
            arguments.api_key_env,
            key_file,
            arguments.api_key_fd,
            arguments.model_timeouts,
        )
        if (
            base_url is not None
            or any(value is not None for value in provider_only)
            or arguments.allow_insecure_http
        ):
            raise ValueError(
                "--base-url, --api-key-env, --api-key-file, --api-key-fd and --allow-insecure-http"
                " need a provider model"
                " (--model PROVIDER:MODEL)"
            )
        return None
    try:
        provider, model = parse_model_spec(text)
        spec = ModelSpec(
            provider=provider,
            model=model,
            base_url=base_url,
            api_key_env=arguments.api_key_env,
            api_key_file=key_file,
            api_key_fd=arguments.api_key_fd,
            allow_insecure_http=arguments.allow_insecure_http,
            timeouts=_model_timeouts(arguments.model_timeouts),
        )
        factory = model_factory(spec, environ)
    except ModelError as error:
        raise ValueError(error.message) from None
    return {spec.name: factory}


def _model_timeouts(text: str | None) -> Timeouts:
    """``CONNECT,READ,TOTAL`` seconds as :class:`Timeouts` (the defaults without the flag).

    Raises:
        ValueError: not three numbers, or one out of (0, 86400].
    """
    if text is None:
        return Timeouts()
    parts = text.split(",")
    try:
        connect, read, total = (float(part) for part in parts)
    except ValueError:
        raise ValueError("--model-timeouts takes three numbers of seconds: CONNECT,READ,TOTAL") from None
    return Timeouts(connect_s=connect, read_s=read, total_s=total)


def _sandbox_options(arguments: argparse.Namespace, adapter: str | None) -> dict[str, object]:
    """``sandbox_engine`` and ``sandbox_limits`` from the ``--sandbox-*`` flags.

    Raises:
        ValueError: a sandbox flag without ``--workspace-adapter sandbox``, the docker engine
            without ``--sandbox-image``, or a limit out of range.
    """
    given = [
        name
        for name in ("sandbox_engine", "sandbox_image", "sandbox_memory", "sandbox_pids", "sandbox_cpus")
        if getattr(arguments, name) is not None
    ]
    if adapter != "sandbox":
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise ValueError(f"{flags} need --workspace-adapter sandbox")
        return {}
    limits: dict[str, object] = {}
    if arguments.sandbox_memory is not None:
        limits["memory_bytes"] = arguments.sandbox_memory * 1024 * 1024
    if arguments.sandbox_pids is not None:
        limits["pids"] = arguments.sandbox_pids
    if arguments.sandbox_cpus is not None:
        limits["cpus"] = arguments.sandbox_cpus
    engine_name = arguments.sandbox_engine or "docker"
    engine: SandboxEngine
    if engine_name == "docker":
        if arguments.sandbox_image is None:
            raise ValueError(
                "the docker sandbox engine needs --sandbox-image NAME@sha256:... "
                "(build one with packages/sandbox/scripts/build_image.py)"
            )
        engine = DockerEngine(arguments.sandbox_image)
    else:
        if arguments.sandbox_image is not None:
            raise ValueError("--sandbox-image is for the docker engine; bubblewrap runs the host's /usr")
        engine = BubblewrapEngine()
    return {"sandbox_engine": engine, "sandbox_limits": SandboxLimits(**limits)}  # pyright: ignore[reportArgumentType]


def with_default_tokens(config: ServerConfig, arguments: argparse.Namespace) -> tuple[ServerConfig, str]:
    """``config`` with its tokens, and a line saying where clients find them.

    Without ``--token-file`` or the token variable, the tokens come from the default token
    file beside the default store, created with a fresh token on first use.

    Raises:
        ValueError: the default token file cannot be created, or is not private.
    """
    if arguments.token_file is not None:
        return config, f"tokens from {arguments.token_file}"
    if config.auth_token is not None:
        return config, (
            f"token from ${arguments.token_env} (readable by every process of this user through"
            " /proc/<pid>/environ; prefer --token-file)"
        )
    path = default_token_path(config.workspace_root)
    tokens, created = ensure_token_file(path)
    if DEFAULT_PRINCIPAL not in tokens:
        raise ValueError(f'token file {path} has no token for principal "{DEFAULT_PRINCIPAL}"')
    config = dataclasses.replace(config, auth_tokens=tokens)
    return config, f"token file {path}" + (" (created now)" if created else "")


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
            arguments.no_db = arguments.db is None
            # An editor names each session's cwd; the root only bounds where one may be.
            arguments.workspace_root = arguments.workspace_root or os.path.abspath(os.sep)
            from agent_server._acp_stdio import embedded_config, run_stdio_process  # noqa: PLC0415

            return run_stdio_process(embedded_config(build_config(arguments, environ)))
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
