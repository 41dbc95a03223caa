"""Where a provider's key and base URL come from, checked before any request is made.

The key is read from an environment mapping the caller passes (never ``os.environ`` behind
its back), or from a file or an inherited descriptor, so that nothing secret needs to be in
the process's environment (which a command the agent runs can read through
``/proc/$PPID/environ``); it is wrapped in an :class:`~harness_models._wire.ApiKey` at once. A base URL is
parsed with httpx's own parser, the one that will send the request, so the host checked is
the host connected to: plain ``http://`` only reaches a loopback address unless the
operator allows it, and a URL with user information is refused outright.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import stat
from collections.abc import Mapping
from typing import Final

import httpx

from harness_models._errors import MODEL_CONFIG_INVALID, ModelError
from harness_models._wire import ApiKey

__all__ = [
    "MAX_KEY_FILE_BYTES",
    "api_key_from_descriptor",
    "api_key_from_environment",
    "api_key_from_file",
    "check_base_url",
    "is_loopback_host",
]

MAX_KEY_FILE_BYTES: Final = 16 * 1024
"""The most a key file or descriptor may hold: a key is a line, not a document."""


def api_key_from_environment(variable: str, environ: Mapping[str, str]) -> ApiKey:
    """The API key in environment variable ``variable``.

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` naming the variable (never its value) when it is
            missing, empty, or not a printable ASCII token.
    """
    value = environ.get(variable, "")
    if not value.strip():
        raise ModelError(
            MODEL_CONFIG_INVALID, f"set the environment variable {variable} to the provider's API key"
        )
    try:
        return ApiKey(value.strip())
    except ValueError:
        raise ModelError(
            MODEL_CONFIG_INVALID,
            f"the environment variable {variable} does not hold an API key (printable ASCII, no spaces)",
        ) from None


def _key_of(raw: bytes, source: str) -> ApiKey:
    """The key in ``raw``, the whole content of ``source`` (named in errors, never the content)."""
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise ModelError(MODEL_CONFIG_INVALID, f"{source} holds more than {MAX_KEY_FILE_BYTES} bytes")
    # One line ending, as an editor or ``echo`` leaves it; anything else is part of the content.
    if raw.endswith(b"\r\n"):
        raw = raw[:-2]
    elif raw.endswith(b"\n"):
        raw = raw[:-1]
    if not raw:
        raise ModelError(MODEL_CONFIG_INVALID, f"{source} is empty")
    try:
        return ApiKey(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ModelError(
            MODEL_CONFIG_INVALID,
            f"{source} does not hold an API key (one line of printable ASCII, no spaces)",
        ) from None


def _read_all(descriptor: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while size <= MAX_KEY_FILE_BYTES:
        part = os.read(descriptor, MAX_KEY_FILE_BYTES + 1 - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def api_key_from_file(path: str) -> ApiKey:
    """The API key in the file at ``path``: its one line, without the line ending.

    The rules of agent-server's token file, as ssh has them for a private key: a regular file
    (not a symbolic link, which another account might point elsewhere), owned by this
    process's user, that nobody else may read or write (mode ``0600`` or ``0400``): a key
    other accounts can read is a key already leaked. A secret mounted as a link or shared
    with a group is handed over by descriptor instead (:func:`api_key_from_descriptor`).

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` naming the path (never the content): it cannot
            be opened (a link cannot), is not a regular file, is not this user's, is open to
            group or others, is empty, longer than :data:`MAX_KEY_FILE_BYTES`, or not one key.
    """
    source = f"the API key file {path!r}"
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        raise ModelError(MODEL_CONFIG_INVALID, f"{source} cannot be opened ({error.strerror})") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise ModelError(MODEL_CONFIG_INVALID, f"{source} is not a regular file")
        if status.st_uid != os.geteuid():
            raise ModelError(MODEL_CONFIG_INVALID, f"{source} is not owned by this user")
        if status.st_mode & 0o077:
            raise ModelError(
                MODEL_CONFIG_INVALID,
                f"{source} is open to group or others (mode {stat.S_IMODE(status.st_mode):04o});"
                " make it readable by its owner only (chmod 600)",
            )
        try:
            raw = _read_all(descriptor)
        except OSError as error:
            raise ModelError(MODEL_CONFIG_INVALID, f"{source} cannot be read ({error.strerror})") from None
    finally:
        os.close(descriptor)
    return _key_of(raw, source)


def api_key_from_descriptor(descriptor: int) -> ApiKey:
    """The API key read to its end from the inherited file descriptor ``descriptor``, then closed.

    For a key handed over by a pipe (``--api-key-fd 3 3< <(secret-tool …)``): the key
    never touches the disk nor the environment.

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` naming the descriptor: not open, not readable,
            one of the standard streams, empty, too long, or not one key.
    """
    source = f"the API key descriptor {descriptor}"
    if type(descriptor) is not int or descriptor < 3:
        raise ModelError(MODEL_CONFIG_INVALID, f"{source} must be 3 or more (not a standard stream)")
    try:
        raw = _read_all(descriptor)
    except OSError as error:
        raise ModelError(MODEL_CONFIG_INVALID, f"{source} cannot be read ({error.strerror})") from None
    finally:
        with contextlib.suppress(OSError):  # never open: the read has said so already
            os.close(descriptor)
    return _key_of(raw, source)


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (as httpx parses it: lower case, no brackets) is this machine.

    ``localhost``, an IPv4 address in 127.0.0.0/8 written in dotted quad, or ``::1``. Other
    spellings that might resolve to loopback (``127.1``, ``0x7f000001``, ``localhost.``)
    are not recognised: refusing them costs nothing, guessing them wrong would.
    """
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback


def check_base_url(url: str, *, allow_insecure_http: bool) -> str:
    """Check a provider base URL and return it normalised, without a trailing ``/``.

    Args:
        url: ``https://…`` anywhere, or ``http://…`` to a loopback host.
        allow_insecure_http: Also accept ``http://`` to any host (the operator's explicit flag).

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` for another scheme, a missing host, user
            information, a query or fragment, or plain HTTP to a remote host.
    """
    if any(ch.isspace() or not ch.isprintable() or ch == "\\" for ch in url):
        raise ModelError(
            MODEL_CONFIG_INVALID, "the base URL must not contain spaces, controls or backslashes"
        )
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise ModelError(MODEL_CONFIG_INVALID, "the base URL is not a valid URL") from None
    if parsed.scheme not in ("https", "http") or not parsed.host:
        raise ModelError(MODEL_CONFIG_INVALID, "the base URL must be an http:// or https:// URL with a host")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise ModelError(MODEL_CONFIG_INVALID, "the base URL's port must be 1..65535")
    if parsed.userinfo:
        raise ModelError(MODEL_CONFIG_INVALID, "the base URL must not carry a user name or password")
    if parsed.query or parsed.fragment or "?" in url or "#" in url:
        raise ModelError(MODEL_CONFIG_INVALID, "the base URL must not carry a query or fragment")
    if parsed.scheme == "http" and not allow_insecure_http and not is_loopback_host(parsed.host):
        raise ModelError(
            MODEL_CONFIG_INVALID,
            f"plain http:// is allowed only to a loopback address, not {parsed.host!r}; "
            "use https:// or allow insecure http explicitly",
        )
    return str(parsed).rstrip("/")
