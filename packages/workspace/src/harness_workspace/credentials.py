"""The credential deny list and the ``.git/config`` scrubber, shared by every host-side read.

One list serves both places a workspace's files leave the host: ``LocalWorkspace`` withholds
what it names from ``read_file`` and ``diff``, and harness-sandbox leaves it out of a sandbox's
copy. A model that reads a repository's files sends them to its provider, so a live key in
``.env`` or a token in a remote URL would leave the machine with the next request.

**Patterns.** Each pattern is one or more path components joined by ``/``, each an
``fnmatch`` pattern matched **case-insensitively** (``ID_RSA`` is ``id_rsa``; a file system
that folds case would open one for the other). A path is a credential path when any run of
its consecutive components matches a pattern: ``*.pem`` names a file (or a directory, whose
whole content is then withheld) anywhere in the tree, ``.aws`` a directory anywhere (and all
below it), ``.config/gcloud`` that pair of directories anywhere.

**``.git/config``** — and every other git configuration file inside a ``.git`` folder
(:func:`is_git_config_path`: a submodule's, a worktree's, a nested repository's) — is not
withheld (the repository's format lives there) but returned scrubbed by
:func:`scrub_git_config`: ``[credential…]`` sections go, so do variables whose name says
they hold a secret (``extraHeader``, ``*token*``, ``*pass*``, ``*secret*``), and the user
information of every URL on every line, section names included
(``[url "https://tok:SECRET@host/"]`` becomes ``[url "https://host/"]``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence
from typing import Final

__all__ = [
    "CREDENTIAL_PATTERNS",
    "GIT_CONFIG_PATH",
    "is_credential_path",
    "is_git_config_path",
    "scrub_git_config",
]

CREDENTIAL_PATTERNS: Final[tuple[str, ...]] = (
    # Environment files and key material.
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    # Tool credential files.
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".yarnrc.yml",
    ".pgpass",
    ".vault-token",
    ".dockercfg",
    ".terraformrc",
    "terraform.rc",
    "credentials.json",
    "kubeconfig",
    "*service-account*.json",
    "*service_account*.json",
    # Terraform state holds every secret the configuration created.
    "*.tfstate",
    "*.tfstate.backup",
    # Directories whose whole content is credentials or configuration that holds them.
    ".aws",
    ".azure",
    ".docker",
    ".gnupg",
    ".kube",
    ".ssh",
    ".config/gcloud",
    ".git/credentials",
)
"""Path patterns (``/``-separated components, case-insensitive ``fnmatch``) of credential files."""

GIT_CONFIG_PATH: Final = ".git/config"
"""The repository configuration, read scrubbed (:func:`scrub_git_config`), never withheld whole."""
_GIT_CONFIG_NAMES: Final = frozenset({"config", "config.worktree"})

# A section header and the name before its subsection: "[credential "https://x"]" → credential.
_SECTION: Final = re.compile(r'^\s*\[\s*([^\]\s"]*)[^\]]*\]?')
# A variable whose name says it carries a secret (the line is dropped).
_SECRET_VARIABLE: Final = re.compile(
    r"^\s*[a-z0-9-]*(?:extraheader|token|pass|secret|authorization|cookie)[a-z0-9-]*\s*(?:=|$)",
    re.IGNORECASE,
)
# The user information of a URL: everything from "scheme://" to the last "@" before the host ends.
_URL_USERINFO: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s]*@")


def is_credential_path(path: str, patterns: Sequence[str] = CREDENTIAL_PATTERNS) -> bool:
    """Whether the relative ``path`` (``/``-separated) is, or lies below, a credential name.

    Args:
        path: A workspace-relative path; empty and ``.`` components are ignored.
        patterns: The patterns to match (:data:`CREDENTIAL_PATTERNS` by default).
    """
    components = _components(path)
    return any(_matches_run(components, compiled) for compiled in _compiled(tuple(patterns)))


def is_git_config_path(path: str) -> bool:
    """Whether the relative ``path`` is a git configuration file, read scrubbed.

    That is a ``config`` or ``config.worktree`` anywhere inside a ``.git`` folder, in any
    letter case: the repository's own (``.git/config``), a submodule's
    (``.git/modules/<name>/config``), a linked worktree's, and a nested repository's
    (``vendor/lib/.git/config``); each can carry a remote URL with a token in it.
    """
    components = _components(path)
    return len(components) >= 2 and components[-1] in _GIT_CONFIG_NAMES and ".git" in components[:-1]


def scrub_git_config(text: str) -> str:
    """``text`` (a git configuration) without credentials.

    Removed: ``[credential…]`` sections (every spelling), variables named like a secret
    (``extraHeader``, ``*token*``, ``*pass*``, ``*secret*``, ``*authorization*``,
    ``*cookie*``), and the user information of every URL on every line, section headers
    included. A value continued with a trailing backslash is joined first, so a URL split
    over lines is scrubbed whole.
    """
    kept: list[str] = []
    in_credential = False
    for line in _logical_lines(text):
        header = _SECTION.match(line)
        rest = line
        head = ""
        if header is not None:
            in_credential = header.group(1).casefold().startswith("credential")
            head, rest = line[: header.end()], line[header.end() :]
        if in_credential:
            continue
        if _SECRET_VARIABLE.match(rest):
            rest = "\n" if line.endswith("\n") and head else ""
        kept.append(_URL_USERINFO.sub(r"\1", head + rest))
    return "".join(kept)


def _logical_lines(text: str) -> list[str]:
    """The lines of ``text``, a line ending in an unescaped backslash joined with the next."""
    lines: list[str] = []
    pending = ""
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        trailing = len(body) - len(body.rstrip("\\"))
        if trailing % 2 == 1:
            pending += body[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _components(path: str) -> tuple[str, ...]:
    """The case-folded components of the ``/``-separated ``path``, empty and ``.`` ones left out."""
    return tuple(part.casefold() for part in path.split("/") if part not in ("", "."))


@functools.lru_cache(maxsize=16)
def _compiled(patterns: tuple[str, ...]) -> tuple[tuple[re.Pattern[str], ...], ...]:
    return tuple(
        tuple(re.compile(fnmatch.translate(part)) for part in _components(pattern)) for pattern in patterns
    )


def _matches_run(components: tuple[str, ...], pattern: tuple[re.Pattern[str], ...]) -> bool:
    width = len(pattern)
    if not width:
        return False
    for start in range(len(components) - width + 1):
        if all(part.match(components[start + index]) for index, part in enumerate(pattern)):
            return True
    return False
