"""Who may connect: bearer tokens, their principals, token files and the failed-attempt throttle.

Every upgrade must present a token (``Authorization: Bearer <token>``, or ``?token=<token>``
for clients that cannot set headers, such as browsers). A server always has at least one:
configured ones, or one generated at start-up with 256 bits from :mod:`secrets`. Each token
names a *principal*; the sessions a connection creates are bound to its principal, and only
that principal may restore them.

Tokens are compared by their SHA-256 digests with :func:`hmac.compare_digest`, against every
configured token, so neither the position of the first differing byte nor the length of a
token, nor which principal matched, shows in the time a check takes.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Final

__all__ = [
    "DEFAULT_PRINCIPAL",
    "TOKEN_MAX_CHARS",
    "TOKEN_MIN_CHARS",
    "Authenticator",
    "FailureThrottle",
    "check_principal",
    "check_token",
    "ensure_token_file",
    "generate_token",
    "read_token_file",
]

_log: Final = logging.getLogger("agent_server")

DEFAULT_PRINCIPAL: Final = "default"
"""The principal of a single token given without a name (and of a generated token)."""
TOKEN_MIN_CHARS: Final = 32
"""At least 128 bits when the token is hexadecimal; a generated token has 43 characters (256 bits)."""
TOKEN_MAX_CHARS: Final = 512
MAX_TOKEN_FILE_BYTES: Final = 64 * 1024

_TOKEN: Final = re.compile(r"[\x21-\x7e]+", re.ASCII)
_PRINCIPAL: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}", re.ASCII)


def generate_token() -> str:
    """A fresh token: 32 random bytes from :mod:`secrets`, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def check_token(token: object, what: str = "auth token") -> str:
    """``token`` if it is a usable token, else ``ValueError`` naming ``what``.

    A token is 32 to 512 printable ASCII characters without spaces: long enough to carry 128 bits
    even as hexadecimal, and safe in a header or a query string as it is.

    Raises:
        ValueError: the token is not a ``str``, too short, too long or holds other characters.
    """
    if type(token) is not str:
        raise ValueError(f"{what} must be a str")
    if not TOKEN_MIN_CHARS <= len(token) <= TOKEN_MAX_CHARS:
        raise ValueError(
            f"{what} must be {TOKEN_MIN_CHARS} to {TOKEN_MAX_CHARS} characters "
            f"(at least 128 bits; `agent-server token` prints a fresh one)"
        )
    if _TOKEN.fullmatch(token) is None:
        raise ValueError(f"{what} must be printable ASCII without spaces")
    return token


def check_principal(name: object) -> str:
    """``name`` if it is a principal name (``[a-z0-9][a-z0-9._-]{0,63}``), else ``ValueError``."""
    if type(name) is not str or _PRINCIPAL.fullmatch(name) is None:
        raise ValueError(f"principal names are 1 to 64 of a-z, 0-9, '.', '_', '-', got {name!r}")
    return name


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


class Authenticator:
    """Maps a presented token to its principal, in time independent of which token matched.

    Args:
        tokens: Principal name → token; at least one, each checked by :func:`check_token`,
            no token given twice.

    Raises:
        ValueError: no tokens, a bad principal name or token, or a token given twice.
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ValueError("at least one auth token is required")
        credentials: list[tuple[bytes, str]] = []
        for principal, token in tokens.items():
            digest = _digest(check_token(token, f'the token of principal "{check_principal(principal)}"'))
            if any(hmac.compare_digest(digest, known) for known, _ in credentials):
                raise ValueError("the same token is given for two principals")
            credentials.append((digest, principal))
        self._credentials: Final = tuple(credentials)

    @property
    def principals(self) -> tuple[str, ...]:
        """The configured principal names, in configuration order."""
        return tuple(principal for _, principal in self._credentials)

    def identify(self, presented: str) -> str | None:
        """The principal whose token is ``presented``, or ``None``."""
        digest = _digest(presented)
        found: str | None = None
        for known, principal in self._credentials:  # no early exit: every token is compared
            if hmac.compare_digest(digest, known):
                found = principal
        return found


class FailureThrottle:
    """Slows down and logs failed authentication, per peer address.

    The *n*-th failure from one address within ``forgive_after`` seconds of the previous one
    is answered after ``min(base_delay * 2 ** (n - 1), max_delay)`` seconds; a correct token is
    never delayed, so an attacker on the same address cannot lock out its owner. At most
    ``max_addresses`` addresses are remembered (the least recently failed is forgotten), so
    the table cannot grow without bound. The first failure of an address, and each one whose
    count is a power of two, is logged as a warning.

    Args:
        clock: Seconds, monotonic (``trio.current_time`` in the server).
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        base_delay: float = 0.1,
        max_delay: float = 10.0,
        forgive_after: float = 600.0,
        max_addresses: int = 4096,
    ) -> None:
        self._clock = clock
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._forgive_after = forgive_after
        self._max_addresses = max_addresses
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def record_failure(self, address: str) -> float:
        """Count one failure from ``address``; returns the delay before it is answered."""
        now = self._clock()
        count, last = self._failures.pop(address, (0, now))
        count = 1 if now - last > self._forgive_after else count + 1
        self._failures[address] = (count, now)
        while len(self._failures) > self._max_addresses:
            self._failures.popitem(last=False)
        if count & (count - 1) == 0:
            _log.warning("authentication failed from %s (%d recent failures)", address, count)
        return min(self._base_delay * 2 ** min(count - 1, 32), self._max_delay)

    def failures(self, address: str) -> int:
        """How many recent failures ``address`` has (0 once forgiven or forgotten)."""
        entry = self._failures.get(address)
        if entry is None or self._clock() - entry[1] > self._forgive_after:
            return 0
        return entry[0]


def _parse_token_lines(text: str, path: str) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) > 2:
            raise ValueError(f"{path}:{number}: a line is TOKEN or PRINCIPAL TOKEN")
        principal, token = (DEFAULT_PRINCIPAL, fields[0]) if len(fields) == 1 else (fields[0], fields[1])
        check_principal(principal)
        if principal in tokens:
            raise ValueError(f'{path}:{number}: principal "{principal}" is given twice')
        tokens[principal] = check_token(token, f"{path}:{number}: the token")
    if not tokens:
        raise ValueError(f"{path} holds no token")
    return tokens


def read_token_file(path: str) -> dict[str, str]:
    """Read tokens from ``path``: one per line, ``TOKEN`` or ``PRINCIPAL TOKEN``; ``#`` comments.

    The file must be a regular file (not a link), owned by this process's user, and readable
    by its owner only (mode ``0600`` or stricter), as ssh requires of a private key: a token
    file others can read is no secret.

    Raises:
        ValueError: the file cannot be read, is not private, or holds a malformed line.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as error:
        raise ValueError(f"cannot open token file {path}: {error.strerror}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"token file {path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise ValueError(f"token file {path} is not owned by this user")
        if info.st_mode & 0o077:
            raise ValueError(f"token file {path} must be readable by its owner only (chmod 600)")
        data = os.read(descriptor, MAX_TOKEN_FILE_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise ValueError(f"token file {path} is larger than {MAX_TOKEN_FILE_BYTES} bytes")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError(f"token file {path} is not ASCII text") from None
    return _parse_token_lines(text, path)


def ensure_token_file(path: str) -> tuple[dict[str, str], bool]:
    """Read the token file at ``path``, creating it with a fresh token first if it is missing.

    A missing parent folder is created with mode ``0700``. The token is written and synced
    to a private temporary file (mode ``0600``) that is then hard-linked to ``path``, which
    fails if ``path`` exists: a reader never sees a half-written file, and two servers
    starting at once agree on one token.

    Returns:
        The tokens, and whether the file was created now.

    Raises:
        ValueError: as :func:`read_token_file`, or the file cannot be created.
    """
    created = False
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        if not os.path.lexists(path):
            created = _publish_new_token(path)
    except OSError as error:
        raise ValueError(f"cannot create token file {path}: {error.strerror}") from None
    return read_token_file(path), created


def _publish_new_token(path: str) -> bool:
    """Write a fresh token file at ``path`` unless one appears first; whether this call wrote it."""
    temporary = f"{path}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(temporary, flags, 0o600)
    try:
        try:
            os.write(descriptor, f"{generate_token()}\n".encode("ascii"))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)
