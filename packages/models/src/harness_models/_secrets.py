"""Where a provider's key and base URL come from, checked before any request is made.

The key is read from an environment mapping the caller passes (never ``os.environ`` behind
its back) and wrapped in an :class:`~harness_models._wire.ApiKey` at once. A base URL is
parsed with httpx's own parser, the one that will send the request, so the host checked is
the host connected to: plain ``http://`` only reaches a loopback address unless the
operator allows it, and a URL with user information is refused outright.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import httpx

from harness_models._errors import MODEL_CONFIG_INVALID, ModelError
from harness_models._wire import ApiKey

__all__ = ["api_key_from_environment", "check_base_url", "is_loopback_host"]


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
