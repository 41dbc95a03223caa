"""``agent-server chat``: its own flags, and which of ``serve``'s flags apply when.

The chat parser is built with ``parents=[serve]``, so every flag of ``serve`` (the model, the
tools, the workspace adapter, the store, the limits) configures chat's embedded server exactly
as it configures ``serve``, with the same names, checks and help. Flags that only make sense for
a listening server (host, port, origins …) are refused here, and with ``--url`` every
embedded-server flag is refused too: a flag that silently does nothing is a lie.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from agent_server._auth import read_token_file
from agent_server._settings import chat_dests

__all__ = ["ACTION_CLASSES", "ChatOptions", "add_chat_flags", "chat_options"]

ACTION_CLASSES: Final[Mapping[str, frozenset[str]]] = {
    "read": frozenset({"fs.read", "fs.list", "git.diff"}),
    "edit": frozenset({"fs.write"}),
    "execute": frozenset({"process.exec"}),
}
"""``--yes-to`` classes → the tool actions they answer ``allow`` (``all``: every action)."""

_YES_TO: Final = (*ACTION_CLASSES, "all")
# Chat's own destinations; every other one comes from serve.
_OWN: Final = frozenset({"command", "url", "workspace", "yes_to"})
# serve flags for a listening server: chat's embedded server always listens on 127.0.0.1, port 0.
_LISTENER_ONLY: Final = chat_dests("listener")
_TOKEN: Final = chat_dests("connection")
# The defaults chat changes: one command gives an agent that can read the current repository.
_CHAT_DEFAULTS: Final = {"tools": "fs.read,fs.list,git.diff", "workspace_adapter": "local"}


def add_chat_flags(chat: argparse.ArgumentParser) -> None:
    """Add chat's own flags to ``chat`` (built with ``parents=[serve]``)."""
    chat.description = (
        "Talk to an agent in the terminal. Without --url, an embedded server on 127.0.0.1 (an"
        " ephemeral port and token, no store unless --db) serves the current directory with serve's"
        " flags; chat's defaults are --tools fs.read,fs.list,git.diff --workspace-adapter local."
    )
    chat.add_argument(
        "--url",
        default=None,
        help="a running server's ws://HOST:PORT/acp (its token: --token-file, else $--token-env)",
    )
    chat.add_argument(
        "--workspace",
        default=None,
        metavar="DIR",
        help="the session workspace: a directory (default: the current one); with --url, a path"
        " relative to the server's workspace root (default: the root)",
    )
    chat.add_argument(
        "--yes-to",
        action="append",
        choices=_YES_TO,
        default=[],
        help="answer allow, without asking, to permission requests of this kind (repeatable):"
        " read (fs.read, fs.list, git.diff), edit (fs.write), execute (process.exec), all",
    )
    chat.set_defaults(**_CHAT_DEFAULTS)
    # The copied serve flags keep serve's help; say chat's own defaults where they differ.
    for action in chat._actions:  # argparse has no public walk of its actions
        if action.dest in _CHAT_DEFAULTS and action.help is not None:
            serve_help = action.help.split(" (default:", 1)[0]
            action.help = f"{serve_help} (default: {_CHAT_DEFAULTS[action.dest]})"


@dataclass(frozen=True, kw_only=True)
class ChatOptions:
    """What chat connects to and how it answers permission requests."""

    url: str | None
    """A running server, or ``None`` for the embedded one."""
    token: str | None
    """The token for ``url`` (``None``: the URL's own ``?token=``, or none)."""
    workspace: str
    """``session/new``'s workspace: ``"."`` for the embedded server, else ``--workspace`` or ``"."``."""
    root: str | None
    """The embedded server's workspace root (a real directory), ``None`` with ``url``."""
    yes_to: frozenset[str]


def _given(arguments: argparse.Namespace, defaults: argparse.Namespace, names: frozenset[str]) -> list[str]:
    return [
        "--" + name.replace("_", "-")
        for name in sorted(names)
        if getattr(arguments, name) != getattr(defaults, name)
    ]


def chat_options(
    arguments: argparse.Namespace, defaults: argparse.Namespace, environ: Mapping[str, str]
) -> ChatOptions:
    """Check chat's flags and resolve its token and workspace.

    Args:
        arguments: The parsed ``chat`` command line.
        defaults: ``chat`` parsed with no flags, to tell which flags were given.
        environ: The environment (the token variable of ``--token-env``).

    Raises:
        ValueError: a flag that does not apply (the message names it), a URL that is not
            ``ws://``, an unreadable or ambiguous token file, or a missing workspace directory.
    """
    listener = _given(arguments, defaults, _LISTENER_ONLY)
    if listener:
        raise ValueError(
            f"{', '.join(listener)} configure a listening server; chat's own server listens on 127.0.0.1"
            " only (use --workspace DIR for the directory)"
        )
    embedded = frozenset(vars(arguments)) - _OWN - _LISTENER_ONLY - _TOKEN
    yes_to = frozenset(arguments.yes_to)
    if arguments.url is None:
        token_flags = _given(arguments, defaults, _TOKEN)
        if token_flags:
            flags = ", ".join(token_flags)
            raise ValueError(f"{flags} are for --url (the embedded server's token is ephemeral)")
        root = os.path.realpath(arguments.workspace if arguments.workspace is not None else os.getcwd())
        if not os.path.isdir(root):
            raise ValueError(f"workspace {arguments.workspace} is not a directory")
        return ChatOptions(url=None, token=None, workspace=".", root=root, yes_to=yes_to)
    server_flags = _given(arguments, defaults, embedded)
    if server_flags:
        raise ValueError(
            f"{', '.join(server_flags)} configure chat's embedded server; with --url the running"
            " server's own configuration applies"
        )
    url: str = arguments.url
    parts = urlsplit(url)
    if parts.scheme != "ws" or not parts.hostname:
        raise ValueError(
            "--url must be ws://HOST:PORT/PATH (this client speaks no TLS: reach a remote server"
            " through an SSH tunnel to a loopback port)"
        )
    return ChatOptions(
        url=url,
        token=_url_token(arguments, environ),
        workspace=arguments.workspace if arguments.workspace is not None else ".",
        root=None,
        yes_to=yes_to,
    )


def _url_token(arguments: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The token of ``--token-file`` (exactly one in it), else of ``$--token-env``, else ``None``.

    Raises:
        ValueError: the token file cannot be read, is not private, or holds several tokens.
    """
    if arguments.token_file is not None:
        tokens = read_token_file(arguments.token_file)
        if len(tokens) != 1:
            raise ValueError(f"token file {arguments.token_file} must hold exactly one token for chat")
        return next(iter(tokens.values()))
    value = environ.get(arguments.token_env, "").strip()
    return value or None
