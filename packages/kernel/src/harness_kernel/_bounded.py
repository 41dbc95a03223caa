"""Bounded JSON (kernel.md §8.12): what tool arguments, tool outputs, input schemas and
provider options must be before the runtime or the legacy loop accepts them.

JSON data (§1) walked iteratively, depth < 64 (the root is depth 0), at most 10 000 values,
no container seen twice (shared or cyclic), and a compact encoding of at most 256 KiB. The
result is a deep-frozen copy plus its compact bytes, so callers never re-encode.
"""

from __future__ import annotations

from typing import Final

from harness_kernel._json import JsonDataError, JsonValue, encode_json, freeze_json

__all__ = [
    "BOUNDED_JSON_MAX_BYTES",
    "BOUNDED_JSON_MAX_DEPTH",
    "BOUNDED_JSON_MAX_NODES",
    "BoundedJsonError",
    "bounded_json",
]

BOUNDED_JSON_MAX_DEPTH: Final = 63
"""Containers are allowed through depth 63: depth < 64 with the root at depth 0."""
BOUNDED_JSON_MAX_NODES: Final = 10_000
BOUNDED_JSON_MAX_BYTES: Final = 256 * 1024


class BoundedJsonError(ValueError):
    """A value is not bounded JSON; ``reason`` says why (for messages, not for branching)."""

    reason: str

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def bounded_json(value: object) -> tuple[JsonValue, bytes]:
    """Validate ``value`` as bounded JSON; return its frozen copy and compact encoding.

    Raises:
        BoundedJsonError: not JSON data, too deep, too many values, a container met twice,
            or an encoding over 256 KiB.
    """
    try:
        frozen = freeze_json(
            value, max_depth=BOUNDED_JSON_MAX_DEPTH, max_nodes=BOUNDED_JSON_MAX_NODES, allow_shared=False
        )
    except JsonDataError as error:
        raise BoundedJsonError(str(error)) from error
    wire = encode_json(frozen)
    if len(wire) > BOUNDED_JSON_MAX_BYTES:
        raise BoundedJsonError(f"encodes to {len(wire)} bytes, over {BOUNDED_JSON_MAX_BYTES}")
    return frozen, wire
