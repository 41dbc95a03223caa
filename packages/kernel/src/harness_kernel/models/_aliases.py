"""Provider-safe aliases of canonical tool names, reversible and without collisions.

Canonical tool names (``fs.read``) are what the operator, the manifest, policy, permission
and the event store see. Some providers refuse dots in a function name: OpenAI and
Anthropic both accept only ``^[a-zA-Z0-9_-]{1,64}$``. A model adapter therefore shows the
provider an alias of each tool and turns every alias that comes back into the canonical name
before the kernel sees it; aliases never leave the adapter (decision 040).

:class:`ToolNameAliases` is the table of one request, built from its ordered canonical
names. Each name gets exactly one alias, in three steps:

1. A name that is already provider-safe is its own alias (``read_file`` → ``read_file``).
2. Any other name takes its *readable form* — every run of characters outside the
   provider alphabet becomes one ``_`` (``fs.read`` → ``fs_read``) — if that form holds a
   letter or a digit, is at most 64 characters long, and no other name of the table has
   the same readable form (a provider-safe name counts with itself).
3. The rest (names that share a readable form, whose readable form is too long, or has
   no letter or digit left) take ``<stem>_<digest>``: the readable form (or ``tool``)
   cut so the alias fits 64 characters, and the first 12 hex digits of the name's SHA-256.
   In the rare case that exact string is already taken, the next free
   ``<stem>_<digest>-<n>`` (``n`` = 1, 2, …) is used, so the table is injective by
   construction, never by the odds of a hash.

So an alias depends only on the name itself and on the names that compete for the same
alias, never on the order of the names nor on unrelated names: the table of a set is the
same in any order, and adding a tool never renames an unrelated one.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from typing import Final, final

from harness_kernel._errors import HarnessError
from harness_kernel._ids import MAX_ID_CHARS

__all__ = [
    "MODEL_TOOL_NAME_DUPLICATE",
    "MODEL_TOOL_NAME_INVALID",
    "MODEL_TOOL_NAME_UNKNOWN",
    "PROVIDER_TOOL_NAME_PATTERN",
    "ToolNameAliasError",
    "ToolNameAliases",
]

PROVIDER_TOOL_NAME_PATTERN: Final = "^[a-zA-Z0-9_-]{1,64}$"
"""The tool names every supported provider accepts (OpenAI function names, Anthropic tool names)."""

MODEL_TOOL_NAME_INVALID: Final = "MODEL_TOOL_NAME_INVALID"
MODEL_TOOL_NAME_DUPLICATE: Final = "MODEL_TOOL_NAME_DUPLICATE"
MODEL_TOOL_NAME_UNKNOWN: Final = "MODEL_TOOL_NAME_UNKNOWN"

_MAX_ALIAS_CHARS: Final = 64
_DIGEST_HEX_DIGITS: Final = 12
_EMPTY_STEM: Final = "tool"
# A name no registered tool can have: harness-tools' names start with an ASCII letter.
_UNKNOWN_PREFIX: Final = "?"

_PROVIDER_SAFE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OUTSIDE_ALPHABET: Final = re.compile(r"[^A-Za-z0-9_-]+")
_LETTER_OR_DIGIT: Final = re.compile(r"[A-Za-z0-9]")
# Characters a canonical name may not hold: control and format characters (invisible ones,
# bidirectional overrides), lone surrogates, line and paragraph separators. Two names that
# differ only in them would look the same to the operator who approves a call.
_REFUSED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class ToolNameAliasError(HarnessError):
    """A tool name cannot be aliased or looked up.

    Codes: ``MODEL_TOOL_NAME_INVALID`` (a canonical name breaks the rules, or the names are
    not an iterable of names), ``MODEL_TOOL_NAME_DUPLICATE`` (a name repeats),
    ``MODEL_TOOL_NAME_UNKNOWN`` (:meth:`ToolNameAliases.alias` of a name not in the table).

    Attributes:
        index: The position of the offending name among the names given, when there is one.
    """

    def __init__(self, code: str, message: str, *, index: int | None = None) -> None:
        super().__init__(code, message)
        self.index = index

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_error, (self.code, self.message, self.index))


def _rebuild_error(code: str, message: str, index: int | None) -> ToolNameAliasError:
    return ToolNameAliasError(code, message, index=index)


@final
class ToolNameAliases:
    """The provider-safe alias of every canonical tool name of one request, and back.

    Build it from the request's canonical names, in order (see the module docstring for the
    rules). The table is immutable; two tables are equal when they hold the same names in
    the same order with the same aliases.

    A canonical name is an exact ``str`` of 1..256 code points, not only whitespace, with no
    control or format character, lone surrogate, line or paragraph separator. That admits
    every name harness-tools registers (a letter, then up to 63 letters, digits, ``_``,
    ``-`` or ``.``) and any other printable name, dots, colons, spaces and non-ASCII letters
    included.

    Args:
        names: The canonical names, each once, in the order the request lists them.

    Raises:
        ToolNameAliasError: ``MODEL_TOOL_NAME_INVALID`` when ``names`` is a ``str`` or
            ``bytes`` or not iterable, or a name breaks the rules above;
            ``MODEL_TOOL_NAME_DUPLICATE`` when a name repeats.
    """

    __slots__ = ("_alias_of", "_canonical_of", "_pairs")

    _pairs: tuple[tuple[str, str], ...]
    _alias_of: dict[str, str]
    _canonical_of: dict[str, str]

    def __init__(self, names: Iterable[str]) -> None:
        canonical_names = _canonical_names(names)
        alias_of = _assign_aliases(canonical_names)
        canonical_of = {alias: name for name, alias in alias_of.items()}
        if len(canonical_of) != len(alias_of):  # the construction rules this out; never trust it silently
            raise AssertionError("tool name aliases collided")
        object.__setattr__(self, "_pairs", tuple((name, alias_of[name]) for name in canonical_names))
        object.__setattr__(self, "_alias_of", alias_of)
        object.__setattr__(self, "_canonical_of", canonical_of)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ToolNameAliases is immutable; cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ToolNameAliases is immutable; cannot delete {name}")

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every ``(canonical name, alias)`` pair, in the order the names were given."""
        return self._pairs

    def alias(self, canonical: str) -> str:
        """The provider-safe alias of ``canonical``, to show the provider.

        Args:
            canonical: A canonical name the table was built from.

        Raises:
            ToolNameAliasError: ``MODEL_TOOL_NAME_UNKNOWN`` when the table was not built
                with ``canonical``; an adapter translates only names it put in the table.
        """
        alias = self._alias_of.get(canonical) if type(canonical) is str else None
        if alias is None:
            raise ToolNameAliasError(MODEL_TOOL_NAME_UNKNOWN, f"no alias for tool name {canonical!r}")
        return alias

    def canonical(self, alias: str) -> str | None:
        """The canonical name the table issued ``alias`` for, or ``None`` if it issued no such alias.

        ``None`` is an ordinary answer, not an error: a model may name a tool that was never
        offered. Nothing is guessed — no case folding, no reverse sanitizing, no canonical
        name accepted in place of its alias — so an unknown name never resolves to a tool.

        Args:
            alias: A tool name as the provider sent it back.
        """
        return self._canonical_of.get(alias) if type(alias) is str else None

    def call_name(self, provider_name: str) -> str:
        """The tool name to put in the kernel's ``ToolCall`` for a name the provider sent back.

        The canonical name when the table issued ``provider_name``; otherwise ``"?"``
        followed by ``provider_name`` if that is provider-safe, else by its
        ``<stem>_<digest>`` form. Such a name starts with ``?``, which no harness-tools
        tool name does, so the runtime answers ``TOOL_NOT_FOUND`` and records what the
        model asked for; it is a kernel id (at most 65 ASCII characters), never an alias.

        Args:
            provider_name: A tool name as the provider sent it back (any ``str``).

        Raises:
            ToolNameAliasError: ``MODEL_TOOL_NAME_INVALID`` when ``provider_name`` is not a ``str``.
        """
        if type(provider_name) is not str:
            raise ToolNameAliasError(
                MODEL_TOOL_NAME_INVALID,
                f"a provider tool name must be a str, not {type(provider_name).__name__}",
            )
        canonical = self._canonical_of.get(provider_name)
        if canonical is not None:
            return canonical
        if _PROVIDER_SAFE.fullmatch(provider_name):
            return _UNKNOWN_PREFIX + provider_name
        return _UNKNOWN_PREFIX + _digest_alias(provider_name, 0)

    def __len__(self) -> int:
        return len(self._pairs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolNameAliases):
            return NotImplemented
        return self._pairs == other._pairs

    def __hash__(self) -> int:
        return hash(self._pairs)

    def __repr__(self) -> str:
        return f"ToolNameAliases({dict(self._pairs)!r})"


def _canonical_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names, checked: an iterable of valid canonical names, none repeated."""
    if isinstance(names, str | bytes):
        raise ToolNameAliasError(
            MODEL_TOOL_NAME_INVALID, "tool names must be an iterable of names, not a single str or bytes"
        )
    try:
        iterator = iter(names)
    except TypeError:
        raise ToolNameAliasError(
            MODEL_TOOL_NAME_INVALID, f"tool names must be iterable, not {type(names).__name__}"
        ) from None
    checked: list[str] = []
    seen: set[str] = set()
    for index, name in enumerate(iterator):
        _check_canonical_name(name, index)
        if name in seen:
            raise ToolNameAliasError(
                MODEL_TOOL_NAME_DUPLICATE, f"tool name {name!r} is given twice", index=index
            )
        seen.add(name)
        checked.append(name)
    return tuple(checked)


def _check_canonical_name(name: object, index: int) -> None:
    def invalid(problem: str) -> ToolNameAliasError:
        return ToolNameAliasError(MODEL_TOOL_NAME_INVALID, f"tool name {index} {problem}", index=index)

    if type(name) is not str:
        raise invalid(f"must be a str, not {type(name).__name__}")
    assert isinstance(name, str)
    if not 1 <= len(name) <= MAX_ID_CHARS:
        raise invalid(f"must hold 1..{MAX_ID_CHARS} characters, not {len(name)}")
    if not name.strip():
        raise invalid("must not be only whitespace")
    # ASCII is printable exactly when it holds no control character; only other names
    # need the per-character look-up.
    if name.isascii() and name.isprintable():
        return
    for char in name:
        category = unicodedata.category(char)
        if category in _REFUSED_CATEGORIES:
            raise invalid(f"holds U+{ord(char):04X} (category {category}): {name!r}")


def _assign_aliases(names: tuple[str, ...]) -> dict[str, str]:
    """Each name's alias, by the three steps of the module docstring."""
    alias_of: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        if _PROVIDER_SAFE.fullmatch(name):
            alias_of[name] = name
            taken.add(name)
    claimants: dict[str, list[str]] = {}
    for name in names:
        if name not in alias_of:
            readable = _readable_alias(name)
            if readable is not None:
                claimants.setdefault(readable, []).append(name)
    for readable, claiming in claimants.items():
        if len(claiming) == 1 and readable not in taken:
            alias_of[claiming[0]] = readable
            taken.add(readable)
    # Sorted, so that who gets the rare numbered fallback depends on the set, not its order.
    for name in sorted(name for name in names if name not in alias_of):
        attempt = 0
        alias = _digest_alias(name, attempt)
        while alias in taken:
            attempt += 1
            alias = _digest_alias(name, attempt)
        alias_of[name] = alias
        taken.add(alias)
    return alias_of


def _sanitized(name: str) -> str:
    """``name`` with every run of characters outside the provider alphabet turned into one ``_``."""
    return _OUTSIDE_ALPHABET.sub("_", name)


def _readable_alias(name: str) -> str | None:
    """The readable form of ``name`` if it is a usable alias: a letter or digit, 64 at most."""
    readable = _sanitized(name)
    if len(readable) > _MAX_ALIAS_CHARS or _LETTER_OR_DIGIT.search(readable) is None:
        return None
    return readable


def _digest_alias(name: str, attempt: int) -> str:
    """``<stem>_<digest>`` (attempt 0) or ``<stem>_<digest>-<attempt>``, at most 64 characters.

    The digest contains no ``-``, so different attempts never give the same string.
    """
    # surrogatepass: call_name digests whatever a provider sent, lone surrogates included.
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX_DIGITS]
    suffix = f"_{digest}" if attempt == 0 else f"_{digest}-{attempt}"
    stem = _sanitized(name)
    if _LETTER_OR_DIGIT.search(stem) is None:
        stem = _EMPTY_STEM
    return stem[: _MAX_ALIAS_CHARS - len(suffix)] + suffix
