"""Pack files: the ``.idx`` version 2 lookup, entry headers, inflation and deltas, all bounded.

Nothing is memory-mapped (a file truncated under a mapping would kill the process with
SIGBUS): the index is read whole, under a cap, and pack entries are read with ``pread``.
Every size a pack claims is checked before it is used: an entry larger than the object
bound, a zlib stream that inflates past its declared size (a bomb) or ends early (a
truncated pack), a delta whose instructions leave its base or its declared result, an
offset outside the pack, all raise typed errors.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from typing import Final

from harness_workspace.local._git.bounds import Budget
from harness_workspace.local._git.files import GitDirectory

__all__ = ["BLOB", "COMMIT", "OFS_DELTA", "REF_DELTA", "TAG", "TREE", "Pack", "PackEntry", "apply_delta"]

COMMIT: Final = 1
TREE: Final = 2
BLOB: Final = 3
TAG: Final = 4
OFS_DELTA: Final = 6
REF_DELTA: Final = 7
_BASE_TYPES: Final = frozenset({COMMIT, TREE, BLOB, TAG})

_IDX_MAGIC: Final = b"\377tOc"
_FANOUT_END: Final = 8 + 256 * 4
_READ_CHUNK: Final = 64 * 1024
_HEADER_BYTES: Final = 32
_LARGE_OFFSET: Final = 0x80000000
_CHECK_EVERY: Final = 4096


class PackEntry:
    """One entry's header: its type, inflated size, where its data starts, and its delta base."""

    __slots__ = ("base_id", "base_offset", "data_offset", "kind", "size")

    def __init__(
        self, kind: int, size: int, data_offset: int, base_offset: int | None, base_id: bytes | None
    ) -> None:
        self.kind = kind
        self.size = size
        self.data_offset = data_offset
        self.base_offset = base_offset
        self.base_id = base_id


class Pack:
    """One ``pack-*.pack`` with its ``.idx``; the caller closes it.

    Args:
        git: The ``.git`` directory.
        stem: ``pack-<hex>``, the file names without their extensions.
        hash_size: 20 (SHA-1) or 32 (SHA-256).
        budget: The call's budget.

    Raises:
        LocalWorkspaceError: ``WORKSPACE_GIT_UNSUPPORTED`` for an index other than version 2,
            ``WORKSPACE_GIT_FAILED`` for an index or pack that is malformed or does not match.
    """

    __slots__ = (
        "_budget",
        "_end",
        "_fd",
        "_hash_size",
        "_index",
        "_large_start",
        "_offsets_start",
        "count",
        "name",
    )

    def __init__(self, git: GitDirectory, stem: str, hash_size: int, budget: Budget) -> None:
        self.name = stem
        self._budget = budget
        self._hash_size = hash_size
        index = git.read(("objects", "pack", f"{stem}.idx"), budget.limits.max_index_bytes)
        if index is None:
            budget.fail(f"pack index {stem}.idx disappeared")
        self._index = index
        count = self._check_index(index)
        self.count = count
        self._offsets_start = _FANOUT_END + count * (hash_size + 4)
        self._large_start = self._offsets_start + count * 4
        self._fd = git.open_file(("objects", "pack", f"{stem}.pack"))
        try:
            self._end = self._check_pack(count, index[-2 * hash_size : -hash_size])
        except BaseException:
            os.close(self._fd)
            raise

    def close(self) -> None:
        """Close the pack's descriptor."""
        os.close(self._fd)

    def _check_index(self, index: bytes) -> int:
        size = self._hash_size
        if index[:4] != _IDX_MAGIC:
            self._budget.unsupported(f"{self.name}.idx is not a version 2 pack index")
        if index[4:8] != struct.pack(">I", 2):
            self._budget.unsupported(f"{self.name}.idx has an unsupported version")
        if len(index) < _FANOUT_END + 2 * size:
            self._budget.fail(f"{self.name}.idx is truncated")
        fanout = struct.unpack_from(">256I", index, 8)
        if any(fanout[i] > fanout[i + 1] for i in range(255)):
            self._budget.fail(f"{self.name}.idx has a malformed fan-out table")
        count = fanout[255]
        minimum = _FANOUT_END + count * (size + 8) + 2 * size
        if len(index) < minimum or (len(index) - minimum) % 8:
            self._budget.fail(f"{self.name}.idx has the wrong size for {count} objects")
        if hashlib.new(_algorithm(size), index[:-size]).digest() != index[-size:]:
            self._budget.fail(f"{self.name}.idx fails its checksum")
        self._budget.entries(count // 64)  # reading an index costs, but far less than a tree entry
        return count

    def _check_pack(self, count: int, trailer: bytes) -> int:
        size = os.fstat(self._fd).st_size
        header = os.pread(self._fd, 12, 0)
        if len(header) < 12 or header[:4] != b"PACK" or header[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
            self._budget.fail(f"{self.name}.pack is not a pack file")
        if struct.unpack(">I", header[8:12])[0] != count or size < 12 + self._hash_size:
            self._budget.fail(f"{self.name}.pack does not match its index")
        if os.pread(self._fd, self._hash_size, size - self._hash_size) != trailer:
            self._budget.fail(f"{self.name}.pack does not match its index's checksum")
        return size - self._hash_size

    def find(self, object_id: bytes) -> int | None:
        """Return the offset of ``object_id`` in the pack, or ``None``."""
        index, size = self._index, self._hash_size
        first = object_id[0]
        low = struct.unpack_from(">I", index, 8 + 4 * (first - 1))[0] if first else 0
        high = struct.unpack_from(">I", index, 8 + 4 * first)[0]
        while low < high:
            middle = (low + high) // 2
            start = _FANOUT_END + middle * size
            candidate = index[start : start + size]
            if candidate == object_id:
                return self._offset(middle)
            if candidate < object_id:
                low = middle + 1
            else:
                high = middle
        return None

    def shared_prefix(self, object_id: bytes) -> int:
        """The most leading hex digits ``object_id`` shares with any *other* object of the pack."""
        index, size = self._index, self._hash_size
        low, high = 0, self.count
        while low < high:
            middle = (low + high) // 2
            start = _FANOUT_END + middle * size
            if index[start : start + size] < object_id:
                low = middle + 1
            else:
                high = middle
        shared = 0
        for position in (low - 1, low, low + 1):
            if 0 <= position < self.count:
                start = _FANOUT_END + position * size
                other = index[start : start + size]
                if other != object_id:
                    shared = max(shared, _shared_hex_digits(object_id, other))
        return shared

    def _offset(self, position: int) -> int:
        value = struct.unpack_from(">I", self._index, self._offsets_start + 4 * position)[0]
        if value & _LARGE_OFFSET:
            where = self._large_start + 8 * (value & ~_LARGE_OFFSET)
            if where + 8 > len(self._index) - 2 * self._hash_size:
                self._budget.fail(f"{self.name}.idx has a large offset outside its table")
            value = struct.unpack_from(">Q", self._index, where)[0]
        return value

    def entry(self, offset: int) -> PackEntry:
        """Parse the entry header at ``offset``."""
        if offset < 12 or offset >= self._end:
            self._budget.fail(f"{self.name}.pack: offset {offset} is outside the pack")
        header = os.pread(self._fd, _HEADER_BYTES + self._hash_size, offset)
        try:
            byte = header[0]
            kind = (byte >> 4) & 7
            size = byte & 15
            shift, position = 4, 1
            while byte & 0x80:
                byte = header[position]
                position += 1
                size |= (byte & 0x7F) << shift
                shift += 7
                if shift > 63:
                    self._budget.fail(f"{self.name}.pack: entry size at {offset} does not end")
            base_offset = base_id = None
            if kind == OFS_DELTA:
                byte = header[position]
                position += 1
                distance = byte & 0x7F
                while byte & 0x80:
                    byte = header[position]
                    position += 1
                    distance = ((distance + 1) << 7) | (byte & 0x7F)
                base_offset = offset - distance
                if distance == 0 or base_offset < 12:
                    self._budget.fail(f"{self.name}.pack: delta at {offset} has a bad base offset")
            elif kind == REF_DELTA:
                base_id = header[position : position + self._hash_size]
                position += self._hash_size
                if len(base_id) != self._hash_size:
                    raise IndexError
            elif kind not in _BASE_TYPES:
                self._budget.fail(f"{self.name}.pack: entry at {offset} has invalid type {kind}")
        except IndexError:
            self._budget.fail(f"{self.name}.pack: entry header at {offset} is truncated")
        self._budget.object_size(size, f"pack entry at {offset} in {self.name}")
        return PackEntry(kind, size, offset + position, base_offset, base_id)

    def inflate(self, entry: PackEntry) -> bytes:
        """Return the inflated data of ``entry``, exactly ``entry.size`` bytes or a typed error."""
        inflater = zlib.decompressobj()
        output: list[bytes] = []
        produced = 0
        position = entry.data_offset
        try:
            while not inflater.eof:
                self._budget.check()
                pending = inflater.unconsumed_tail
                if not pending:
                    if position >= self._end:
                        self._budget.fail(f"{self.name}.pack: data at {entry.data_offset} is truncated")
                    pending = os.pread(self._fd, min(_READ_CHUNK, self._end - position), position)
                    position += len(pending)
                piece = inflater.decompress(pending, entry.size + 1 - produced)
                produced += len(piece)
                if produced > entry.size:
                    self._budget.fail(f"{self.name}.pack: data at {entry.data_offset} inflates past its size")
                output.append(piece)
        except zlib.error:
            self._budget.fail(f"{self.name}.pack: data at {entry.data_offset} is not valid zlib")
        if produced != entry.size:
            self._budget.fail(f"{self.name}.pack: data at {entry.data_offset} has the wrong size")
        return b"".join(output)


def _shared_hex_digits(first: bytes, second: bytes) -> int:
    for position, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return 2 * position + (1 if a >> 4 == b >> 4 else 0)
    return 2 * min(len(first), len(second))


def _algorithm(hash_size: int) -> str:
    return "sha256" if hash_size == 32 else "sha1"


def _size(delta: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = delta[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position
        if shift > 63:
            raise IndexError


def apply_delta(base: bytes, delta: bytes, budget: Budget) -> bytes:
    """Return ``base`` with git's binary ``delta`` applied, checking every instruction."""
    try:
        base_size, position = _size(delta, 0)
        result_size, position = _size(delta, position)
        if base_size != len(base):
            budget.fail("a delta does not fit its base")
        budget.object_size(result_size, "a delta's result")
        result = bytearray()
        steps = 0
        while position < len(delta):
            steps += 1
            if steps % _CHECK_EVERY == 0:
                budget.check()
            instruction = delta[position]
            position += 1
            if instruction & 0x80:
                start = length = 0
                for bit in range(4):
                    if instruction & (1 << bit):
                        start |= delta[position] << (8 * bit)
                        position += 1
                for bit in range(3):
                    if instruction & (0x10 << bit):
                        length |= delta[position] << (8 * bit)
                        position += 1
                length = length or 0x10000
                if start + length > len(base) or len(result) + length > result_size:
                    budget.fail("a delta copies outside its base or past its result")
                result += base[start : start + length]
            elif instruction:
                if position + instruction > len(delta) or len(result) + instruction > result_size:
                    budget.fail("a delta inserts past its end or past its result")
                result += delta[position : position + instruction]
                position += instruction
            else:
                budget.fail("a delta has a reserved instruction")
    except IndexError:
        budget.fail("a delta is truncated")
    if len(result) != result_size:
        budget.fail("a delta's result has the wrong size")
    return bytes(result)
