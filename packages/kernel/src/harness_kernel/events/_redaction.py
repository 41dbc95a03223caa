"""Redaction of secrets for process boundaries (spec §2.6); never used inside the runtime."""

from __future__ import annotations

import functools
import re
from typing import Final

from harness_kernel._json import FrozenDict, FrozenList, encode_json, is_exact_array, is_exact_dict
from harness_kernel.events._codec import (
    deserialize_event,
    event_to_document,
    parse_event_document,
    validate_event,
)
from harness_kernel.events._model import Event

__all__ = ["REDACTED", "REDACTION_MAX_DEPTH", "redact_event", "redact_string", "redact_value"]

REDACTED: Final = "[REDACTED]"
REDACTION_MAX_DEPTH: Final = 64

_IGNORE_CASE: Final = re.IGNORECASE | re.ASCII
# In the spec's order; each keeps group 1 and replaces the rest of the match.
_SECRET_PATTERNS: Final = (
    re.compile(r"\b(Bearer\s+)[A-Za-z0-9._~+/=-]+", _IGNORE_CASE),
    re.compile(
        r"\b((?:OPENAI|AZURE_OPENAI|ANTHROPIC|GOOGLE|AWS)[A-Z0-9_]*(?:KEY|TOKEN|SECRET)\s*=\s*)[^\s\"']+",
        _IGNORE_CASE,
    ),
    re.compile(r"\b(sk-(?:proj-|svcacct-)?)[A-Za-z0-9_-]{12,}", re.ASCII),
    re.compile(r"\b((?:Proxy-)?Authorization\s*:\s*Basic\s+)[A-Za-z0-9+/=]+", _IGNORE_CASE),
    re.compile(r"\b((?:Cookie|Set-Cookie)\s*:\s*)[^\r\n]+", _IGNORE_CASE),
    re.compile(
        r"((?:x[-_]?api[-_]?key|api[-_]?key|client[-_]?secret|access[-_]?token|refresh[-_]?token|id[-_]?token"
        r"|authorization|cookie|password|passwd|token|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"'&,;}]+",
        _IGNORE_CASE,
    ),
)
_KEEP_PREFIX: Final = r"\g<1>" + REDACTED
# Every secret pattern above needs one of these words (ASCII case-insensitively), so a text
# without any of them is left as it is after one search instead of six substitutions.
_SECRET_WORDS: Final = re.compile(
    r"bearer|key|token|secret|sk-|authorization|cookie|passw(?:or)?d", _IGNORE_CASE
)

_NOT_ALPHANUMERIC: Final = re.compile(r"[^a-z0-9]", re.ASCII)
_SENSITIVE_KEYS: Final = frozenset(
    {"authorization", "proxyauthorization", "cookie", "setcookie", "credential", "credentials"}
)
_SENSITIVE_SUFFIXES: Final = ("apikey", "privatekey", "secretkey", "token", "secret", "password", "passwd")


def redact_string(text: str) -> str:
    """``text`` with every secret the six patterns find replaced by ``[REDACTED]``."""
    if _SECRET_WORDS.search(text) is None:
        return text
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(_KEEP_PREFIX, text)
    return text


@functools.lru_cache(maxsize=4096)
def is_sensitive_key(key: str) -> bool:
    """Whether a mapping key names a secret (compared lower-cased, alphanumerics only).

    Remembered per key: events use a few dozen keys over and over.
    """
    normalized = _NOT_ALPHANUMERIC.sub("", key.lower())
    return normalized in _SENSITIVE_KEYS or normalized.endswith(_SENSITIVE_SUFFIXES)


_NON_TEXT_SCALARS: Final = (int, float, bool)


class _Redactor:
    __slots__ = ("_keep_non_text", "_visited", "changed")

    def __init__(self, *, keep_non_text: bool = False) -> None:
        self._visited: set[int] = set()
        self.changed = False
        """Whether anything was replaced (a copy of a container is not a change)."""
        # For events: a number, boolean or null under a sensitive key (``fencingToken``) holds
        # no text, so it cannot carry a secret, and the schema types it; it is kept.
        self._keep_non_text = keep_non_text

    def _sensitive(self, key: object, item: object) -> bool:
        if type(key) is not str or not is_sensitive_key(str(key)):
            return False
        sensitive = not (self._keep_non_text and (item is None or type(item) in _NON_TEXT_SCALARS))
        self.changed = self.changed or sensitive
        return sensitive

    def redact(self, value: object, depth: int) -> object:
        kind = type(value)
        if kind is str:
            assert isinstance(value, str)
            redacted = redact_string(value)
            self.changed = self.changed or redacted != value
            return redacted
        if is_exact_dict(value) or type(value) is FrozenDict:
            assert isinstance(value, dict | FrozenDict)
            if not self._enter(value, depth):
                return REDACTED
            entries: tuple[tuple[object, object], ...] = tuple(value.items())
            return {
                key: REDACTED if self._sensitive(key, item) else self.redact(item, depth + 1)
                for key, item in entries
            }
        if is_exact_array(value) or type(value) is FrozenList:
            assert isinstance(value, list | tuple | FrozenList)
            if not self._enter(value, depth):
                return REDACTED
            items: tuple[object, ...] = tuple(value)
            return [self.redact(item, depth + 1) for item in items]
        return value

    def may_change(self, value: object, depth: int) -> bool:
        """Whether :meth:`redact` could change ``value``: the same walk, building nothing.

        False only when no string holds a secret keyword, no key is sensitive, and no container
        is too deep or met twice; so a false answer means ``redact`` would change nothing.
        """
        if type(value) is str:
            return _SECRET_WORDS.search(value) is not None
        if is_exact_dict(value) or type(value) is FrozenDict:
            assert isinstance(value, dict | FrozenDict)
            if not self._enter(value, depth):
                return True
            entries: tuple[tuple[object, object], ...] = tuple(value.items())
            return any(
                self._sensitive(key, item) or self.may_change(item, depth + 1) for key, item in entries
            )
        if is_exact_array(value) or type(value) is FrozenList:
            assert isinstance(value, list | tuple | FrozenList)
            if not self._enter(value, depth):
                return True
            items: tuple[object, ...] = tuple(value)
            return any(self.may_change(item, depth + 1) for item in items)
        return False

    def _enter(self, container: object, depth: int) -> bool:
        """Whether to descend: below the depth cap and not seen before in this call."""
        identity = id(container)
        if depth >= REDACTION_MAX_DEPTH or identity in self._visited:
            self.changed = True
            return False
        self._visited.add(identity)
        return True


def redact_value(value: object) -> object:
    """A redacted copy of ``value``; the input is left untouched.

    Strings lose what the secret patterns match; ``dict`` (and frozen objects) become new
    ``dict``s whose sensitive keys hold ``[REDACTED]``; ``list``/``tuple`` (and frozen arrays)
    become new ``list``s. A container at depth 64 or more (root 0), or one already visited in
    this call (a cycle or a shared container), becomes ``[REDACTED]``. Other values are
    returned unchanged and never inspected.
    """
    return _Redactor().redact(value, 0)


def redact_event(event: Event) -> Event:
    """A schema-valid event whose ``data`` is redacted; ``event`` is untouched.

    ``data`` is redacted in its wire-key structure, then the event is rebuilt through its
    JSON text and decoded again, so the result passes every gate; when nothing was
    redacted, the result is ``validate_event(event)`` (the same event when the codec built
    it: such an event is immutable). Unlike
    :func:`redact_value`, a number, boolean or null under a sensitive key is kept: it holds no
    text, and replacing it would break the schema (``run.leased``'s ``fencingToken``).

    Raises:
        TypeError: ``event`` is not exactly an ``Event``.
    """
    if type(event) is not Event:
        raise TypeError(f"redact_event expects an Event, not {type(event).__name__}")
    assert isinstance(event, Event)
    document = event_to_document(event)
    if not _Redactor(keep_non_text=True).may_change(document["data"], 0):
        return validate_event(event)
    redactor = _Redactor(keep_non_text=True)
    document["data"] = redactor.redact(document["data"], 0)
    if not redactor.changed:
        return validate_event(event)
    # The JSON gate first: the encoder would quietly write NaN as null.
    return deserialize_event(encode_json(parse_event_document(document)))
