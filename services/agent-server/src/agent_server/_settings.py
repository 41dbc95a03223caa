"""The one table of ``serve``'s settings: each row a field of :class:`ServerConfig` (spec §9.2).

A row names the field by its path in the nested configuration (``"limits.max_sessions"``) and
lists the command-line options that set it, each with its flag, the environment variable that
stands in for it, its parser, default and help. ``serve``'s, ``chat``'s and ``acp``'s options,
their help, and which of them chat refuses or acp leaves out are all built from this table;
a field no option sets has a row too, saying so (``test_settings.py`` holds the two together).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from agent_server._config import WORKSPACE_ADAPTERS
from agent_server._environment import parse_outbound_stall_ms

__all__ = [
    "SANDBOX_ENGINES",
    "SECTIONS",
    "SETTINGS",
    "Option",
    "Setting",
    "add_options",
    "chat_dests",
    "options",
]

SANDBOX_ENGINES: Final = ("docker", "bubblewrap")

SECTIONS: Final = {
    "network": "network",
    "storage": "storage",
    "model": "model",
    "workspace": "tools and workspace",
    "limits": "limits",
}
"""Each record of :class:`ServerConfig` and the title of its options' group in ``--help``."""

ChatUse = Literal["server", "listener", "connection"]
"""What an option is to ``chat``: the embedded server's setting, a listening server's
(refused), or the connection's to a running server (``--url``)."""


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Option:
    """One command-line option of ``serve`` (and of ``chat`` and ``acp`` where they take it)."""

    flag: str
    help: str
    default: object = None
    parse: Callable[[str], object] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: Literal["store_true", "append"] | None = None
    env: str | None = None
    """The environment variable that stands in for the option, named in its help."""
    exclusive: bool = False
    """One of the options of its section that exclude each other (``--db``, ``--no-db``)."""
    chat: ChatUse = "server"
    acp: bool = False
    """Whether ``acp`` offers it; the others keep their defaults there."""

    @property
    def initial(self) -> object:
        """The value parsed when the option is not given."""
        if self.switch == "store_true":
            return False
        return [] if self.switch == "append" else self.default

    @property
    def dest(self) -> str:
        """The option's name in the parsed arguments."""
        return self.flag.removeprefix("--").replace("-", "_")


@dataclass(frozen=True, kw_only=True, slots=True)
class Setting:
    """A field of :class:`ServerConfig` and the options that set it (none: set in code only)."""

    path: str
    options: tuple[Option, ...] = ()
    note: str = ""
    """For a field no option sets: who sets it."""


_ACP_ALL: Final = frozenset({"model", "workspace"})


def _setting(path: str, *options: Option, note: str = "") -> Setting:
    # model and workspace options are all acp's: an editor's agent chooses both.
    if path.partition(".")[0] in _ACP_ALL:
        options = tuple(dataclasses.replace(option, acp=True) for option in options)
    return Setting(path=path, options=options, note=note)


_IN_CODE: Final = "set by code embedding the server, not by a flag"

SETTINGS: Final[tuple[Setting, ...]] = (
    _setting(
        "network.host",
        Option(flag="--host", default="127.0.0.1", help="the address to listen on", chat="listener"),
    ),
    _setting(
        "network.port",
        Option(
            flag="--port",
            parse=_port,
            env="HARNESS_AGENT_PORT",
            chat="listener",
            help="the port to listen on, 0 for any free one (default: 8765; env HARNESS_AGENT_PORT)",
        ),
    ),
    _setting(
        "network.auth_tokens",
        Option(
            flag="--token-file",
            metavar="FILE",
            chat="connection",
            help="tokens, one a line (TOKEN or PRINCIPAL TOKEN), in a file only its owner can read"
            " (default: one created beside the default store)",
        ),
    ),
    _setting(
        "network.auth_token",
        Option(
            flag="--token-env",
            default="HARNESS_AGENT_TOKEN",
            metavar="VARIABLE",
            chat="connection",
            help="the variable holding one token; every process of this user can read it,"
            " prefer --token-file",
        ),
    ),
    _setting(
        "network.allow_plaintext_remote",
        Option(
            flag="--allow-plaintext-remote",
            switch="store_true",
            env="HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE",
            chat="listener",
            help="listen on a non-loopback address without TLS in front"
            " (env HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE=true)",
        ),
    ),
    _setting(
        "network.allowed_origins",
        Option(
            flag="--allow-origin",
            switch="append",
            default=[],
            metavar="ORIGIN",
            chat="listener",
            help="a browser Origin allowed to connect, repeatable"
            " (default: none; requests without Origin pass)",
        ),
    ),
    _setting(
        "network.readiness_path",
        Option(
            flag="--readiness-path",
            metavar="PATH",
            env="HARNESS_AGENT_READINESS_PATH",
            chat="listener",
            help="a file, relative to the workspace root, whose existence /health/ready also requires"
            " (default: none; env HARNESS_AGENT_READINESS_PATH)",
        ),
    ),
    _setting("network.path", note="the WebSocket path, /acp; " + _IN_CODE),
    _setting(
        "storage.database_url",
        Option(
            flag="--store",
            choices=("sqlite", "postgres"),
            help="where sessions are stored: one SQLite file, or PostgreSQL shared by several servers"
            " (default: postgres when HARNESS_DATABASE_URL is set, else sqlite)",
        ),
        Option(
            flag="--database-url",
            metavar="URL",
            env="HARNESS_DATABASE_URL",
            help="the PostgreSQL database of --store postgres, postgresql://USER@HOST/DB"
            " (default: env HARNESS_DATABASE_URL, which keeps a password out of the process list)",
        ),
    ),
    _setting(
        "storage.db_path",
        Option(
            flag="--db",
            metavar="FILE",
            exclusive=True,
            acp=True,
            help="the SQLite session store (default: sessions.sqlite in the user's state directory)",
        ),
    ),
    _setting(
        "storage.persistence",
        Option(
            flag="--no-db",
            switch="store_true",
            exclusive=True,
            help="keep sessions in memory only; lost on exit",
        ),
    ),
    _setting(
        "storage.resume_interrupted",
        Option(
            flag="--resume-interrupted",
            switch="store_true",
            chat="listener",
            help="at start-up, continue in the background every session of this root whose turn a"
            " crash interrupted (no client attached: permission requests are denied)",
        ),
    ),
    _setting(
        "storage.retention_days",
        Option(
            flag="--retention-days",
            parse=_non_negative,
            default=30,
            metavar="DAYS",
            help="delete sessions closed longer ago than this; 0 keeps them forever (default: 30)",
        ),
    ),
    _setting(
        "storage.retention_max_bytes",
        Option(
            flag="--retention-max-bytes",
            parse=_positive,
            metavar="BYTES",
            env="HARNESS_AGENT_RETENTION_MAX_BYTES",
            help="also delete the oldest finished sessions while finished sessions keep more than"
            " this many bytes of events (default: no size limit; env HARNESS_AGENT_RETENTION_MAX_BYTES)",
        ),
    ),
    _setting("storage.session_store", note="an open SessionStore the server uses as it is; " + _IN_CODE),
    _setting("storage.min_free_disk_bytes", note="256 MiB; " + _IN_CODE),
    _setting(
        "model.models",
        Option(
            flag="--model",
            metavar="PROVIDER:MODEL",
            env="HARNESS_MODEL",
            help="fake (offline, scripted), openai:MODEL, anthropic:MODEL, or openai-compatible:MODEL"
            " with --base-url (default: fake; env HARNESS_MODEL)",
        ),
        Option(
            flag="--base-url",
            metavar="URL",
            env="HARNESS_MODEL_BASE_URL",
            help="the provider API's base URL, required for openai-compatible"
            " (default: the provider's; env HARNESS_MODEL_BASE_URL)",
        ),
        Option(
            flag="--api-key-env",
            metavar="VARIABLE",
            help="the variable holding the provider key (default: env OPENAI_API_KEY or ANTHROPIC_API_KEY)",
        ),
        Option(
            flag="--api-key-file",
            metavar="FILE",
            env="HARNESS_MODEL_API_KEY_FILE",
            help="read the provider key from FILE (one line, mode 0600, not a link), so no key is in the"
            " environment for commands to read (default: env HARNESS_MODEL_API_KEY_FILE)",
        ),
        Option(
            flag="--api-key-fd",
            parse=_non_negative,
            metavar="N",
            help="read the provider key from the inherited file descriptor N (3 or more), e.g. a pipe"
            " (default: none)",
        ),
        Option(
            flag="--model-timeouts",
            metavar="CONNECT,READ,TOTAL",
            help="seconds to connect, between two reads of a stream, and for a whole request"
            " (default: 10,120,600)",
        ),
        Option(
            flag="--allow-insecure-http",
            switch="store_true",
            help="allow a plain http:// base URL to a host that is not loopback (the key travels in clear)",
        ),
        Option(
            flag="--scenario",
            metavar="FILE",
            help="a scenario file whose script the fake model plays (default: the fake model's own)",
        ),
    ),
    _setting(
        "model.context_policy",
        Option(
            flag="--context-window-tokens",
            parse=_positive,
            metavar="N",
            help="the model's context window: a request that would not fit fails before it is sent"
            " (default: none, the context is not measured; give it with --context-threshold-tokens)",
        ),
        Option(
            flag="--context-threshold-tokens",
            parse=_positive,
            metavar="N",
            help="compact the conversation (the model summarises its older part) once a request's"
            " estimate reaches this, at most the window less the reserve"
            " (default: none; required with --context-window-tokens)",
        ),
        Option(
            flag="--context-tail-messages",
            parse=_non_negative,
            metavar="N",
            help="the latest messages a compaction keeps word for word (default: 8)",
        ),
        Option(
            flag="--context-reserve-tokens",
            parse=_non_negative,
            metavar="N",
            help="tokens of the window kept free for the answer (default: 0)",
        ),
    ),
    _setting("model.default_model", note="the first of models unless named; " + _IN_CODE),
    _setting(
        "workspace.workspace_root",
        Option(
            flag="--workspace-root",
            metavar="DIR",
            chat="listener",
            help="the folder sessions' workspaces live under (default: the current directory)",
        ),
    ),
    _setting(
        "workspace.tools",
        Option(
            flag="--tools",
            default="echo",
            metavar="NAMES",
            help="comma-separated: echo, read_file, fs.read, fs.list, fs.write, process.exec, git.diff;"
            " dev = the last five; fs.write and process.exec need a sandbox or --allow-host-effects",
        ),
    ),
    _setting(
        "workspace.workspace_adapter",
        Option(
            flag="--workspace-adapter",
            choices=WORKSPACE_ADAPTERS,
            env="HARNESS_AGENT_WORKSPACE_ADAPTER",
            help="local: the host folder itself; sandbox: a disposable copy per session"
            " (default: none, workspace tools refused; env HARNESS_AGENT_WORKSPACE_ADAPTER=local)",
        ),
    ),
    _setting(
        "workspace.allow_host_effects",
        Option(
            flag="--allow-host-effects",
            switch="store_true",
            help="UNSAFE: with --workspace-adapter local, fs.write and process.exec act on the host,"
            " unconfined, as this user",
        ),
    ),
    _setting(
        "workspace.tasks_dir",
        Option(
            flag="--tasks-dir",
            metavar="DIR",
            help="read task manifests from DIR/<id>.yaml, a folder outside --workspace-root"
            " (default: tasks/<id>.yaml in the workspace repository's --task-base commit)",
        ),
    ),
    _setting(
        "workspace.task_base",
        Option(
            flag="--task-base",
            default="HEAD",
            metavar="REV",
            help="the commit of each workspace's repository that task manifests are read from:"
            " HEAD, a branch, a refs/ name or a commit id; the working tree's copy must match it"
            " (default: HEAD)",
        ),
    ),
    _setting(
        "workspace.sandbox_engine",
        Option(
            flag="--sandbox-engine",
            choices=SANDBOX_ENGINES,
            help="with --workspace-adapter sandbox: the isolation engine, never a fallback (default: docker)",
        ),
        Option(
            flag="--sandbox-image",
            metavar="NAME@sha256:...",
            help="the docker engine's image by digest, required for it"
            " (build one with packages/sandbox/scripts/build_image.py)",
        ),
    ),
    _setting("workspace.load_manifest", note="reads a task manifest in place of tasks_dir; " + _IN_CODE),
    _setting(
        "limits.max_sessions",
        Option(
            flag="--max-sessions",
            parse=_positive,
            default=256,
            metavar="N",
            help="live sessions, server-wide",
        ),
    ),
    _setting(
        "limits.max_sessions_per_principal",
        Option(
            flag="--max-sessions-per-principal",
            parse=_positive,
            metavar="N",
            env="HARNESS_AGENT_MAX_SESSIONS_PER_PRINCIPAL",
            help="live sessions one principal may hold (default: --max-sessions divided among the"
            " principals of --token-file; env HARNESS_AGENT_MAX_SESSIONS_PER_PRINCIPAL)",
        ),
    ),
    _setting(
        "limits.max_stored_bytes_per_principal",
        Option(
            flag="--max-stored-bytes-per-principal",
            parse=_positive,
            metavar="BYTES",
            env="HARNESS_AGENT_MAX_STORED_BYTES_PER_PRINCIPAL",
            help="event bytes one principal's sessions may keep in the store before its new sessions"
            " and prompts are refused (default: no limit; env HARNESS_AGENT_MAX_STORED_BYTES_PER_PRINCIPAL)",
        ),
    ),
    _setting(
        "limits.max_run_ms",
        Option(
            flag="--max-run-seconds",
            parse=_positive,
            default=1800,
            metavar="SECONDS",
            acp=True,
            help="wall time of one prompt's run",
        ),
    ),
    _setting(
        "limits.session_lease_ms",
        Option(
            flag="--session-lease-seconds",
            parse=_positive,
            default=30,
            metavar="SECONDS",
            help="how long a session stays owned by this server without a refresh: after a crash,"
            " another server on the same database may take it over once this has passed",
        ),
    ),
    _setting(
        "limits.max_message_bytes",
        Option(
            flag="--max-message-bytes",
            parse=_positive,
            default=1024 * 1024,
            metavar="BYTES",
            help="the largest WebSocket text message, in either direction",
        ),
    ),
    _setting(
        "limits.outbound_stall_ms",
        Option(
            flag="--outbound-stall-ms",
            parse=_stall_ms,
            metavar="MS",
            env="HARNESS_AGENT_OUTBOUND_STALL_MS",
            help="close (1013) a socket whose peer reads nothing this long while its queue is full"
            " (default: 5000; env HARNESS_AGENT_OUTBOUND_STALL_MS)",
        ),
    ),
    _setting(
        "limits.sandbox_limits",
        Option(
            flag="--sandbox-memory",
            parse=int,
            metavar="MIB",
            acp=True,
            help="memory per sandbox, MiB (default: the engine's)",
        ),
        Option(
            flag="--sandbox-pids",
            parse=int,
            metavar="N",
            acp=True,
            help="processes per sandbox (default: the engine's)",
        ),
        Option(
            flag="--sandbox-cpus",
            parse=float,
            metavar="CPUS",
            acp=True,
            help="CPUs per sandbox (default: the engine's)",
        ),
    ),
    _setting("limits.max_connections", note="1024; " + _IN_CODE),
    _setting("limits.max_pending_connections", note="128; " + _IN_CODE),
    _setting("limits.close_grace_ms", note="1000; " + _IN_CODE),
    _setting("limits.max_sessions_per_connection", note="32; " + _IN_CODE),
    _setting("limits.permission_timeout_ms", note="120000; " + _IN_CODE),
    _setting("limits.created_session_timeout_ms", note="300000, a day for chat and acp; " + _IN_CODE),
)


def options() -> Iterator[tuple[str, Option]]:
    """Every option of the table with its section, in ``--help`` order."""
    for setting in SETTINGS:
        for option in setting.options:
            yield setting.path.partition(".")[0], option


def chat_dests(use: ChatUse) -> frozenset[str]:
    """The destinations of the options that are ``use`` to ``chat``."""
    return frozenset(option.dest for _, option in options() if option.chat == use)


def add_options(parser: argparse.ArgumentParser, *, acp: bool = False) -> None:
    """Add the table's options to ``parser``, grouped by section in table order.

    For ``acp``, only the options it offers, model and workspace first; the others get their
    defaults, so the parsed arguments build a configuration exactly as ``serve``'s do.
    """
    order = ("model", "workspace", "storage", "limits") if acp else tuple(SECTIONS)
    chosen = sorted(
        ((section, option) for section, option in options() if option.acp or not acp),
        key=lambda item: order.index(item[0]),
    )
    used = {section for section, _ in chosen}
    groups = {section: parser.add_argument_group(SECTIONS[section]) for section in order if section in used}
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}  # pyright: ignore[reportPrivateUsage]
    for section, option in chosen:
        target: argparse._ActionsContainer = groups[section]  # pyright: ignore[reportPrivateUsage]
        if option.exclusive and sum(other.exclusive for place, other in chosen if place == section) > 1:
            if section not in exclusive:
                exclusive[section] = groups[section].add_mutually_exclusive_group()
            target = exclusive[section]
        _add(target, option)
    parser.set_defaults(**{option.dest: option.initial for _, option in options() if acp and not option.acp})


def _add(target: argparse._ActionsContainer, option: Option) -> None:  # pyright: ignore[reportPrivateUsage]
    if option.switch == "store_true":
        target.add_argument(option.flag, action="store_true", help=option.help)
        return
    if option.switch == "append":
        target.add_argument(
            option.flag, action="append", default=[], metavar=option.metavar, help=option.help
        )
        return
    settings: dict[str, object] = {"default": option.default, "metavar": option.metavar}
    if option.parse is not None:
        settings["type"] = option.parse
    if option.choices is not None:
        settings["choices"] = option.choices
    target.add_argument(option.flag, help=option.help, **settings)  # pyright: ignore[reportArgumentType]
