"""The object database: loose objects and packs, read-only, every object's id verified.

An object is looked up in the packs (``objects/pack``) and then as a loose file
(``objects/xx/yyyy…``). Whatever it came from, its bytes are hashed with the repository's
algorithm and must give the id that was asked for, so a corrupt or forged object is a typed
error (``WORKSPACE_GIT_FAILED``) rather than wrong output. Delta chains are followed
iteratively, up to ``max_delta_depth`` (a loop of ``REF_DELTA`` entries ends there), with a
small byte-bounded cache of pack objects for shared bases.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from harness_workspace.local._git.bounds import Budget
from harness_workspace.local._git.config import ObjectFormat
from harness_workspace.local._git.files import GitDirectory
from harness_workspace.local._git.packs import (
    BLOB,
    COMMIT,
    OFS_DELTA,
    REF_DELTA,
    TAG,
    TREE,
    Pack,
    apply_delta,
)
from harness_workspace.local._paths import fail_os

__all__ = [
    "BLOB",
    "COMMIT",
    "EXECUTABLE",
    "GITLINK",
    "REGULAR",
    "SYMLINK",
    "TREE",
    "TREE_MODE",
    "ObjectStore",
    "TreeEntry",
    "hash_object",
]

REGULAR: Final = 0o100644
EXECUTABLE: Final = 0o100755
SYMLINK: Final = 0o120000
GITLINK: Final = 0o160000
TREE_MODE: Final = 0o040000

_TYPE_NAMES: Final = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob", TAG: b"tag"}
_TYPE_NUMBERS: Final = {name: number for number, name in _TYPE_NAMES.items()}
_MAX_TAG_DEPTH: Final = 8
_MIN_ABBREVIATION: Final = 7
_LOOSE_HEADER: Final = 64


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One entry of a tree object, its mode canonical (``100644``, ``100755``, ``120000``, …)."""

    name: bytes
    mode: int
    object_id: bytes


def hash_object(algorithm: ObjectFormat, kind: int, data: bytes) -> bytes:
    """Return the binary id git gives an object of ``kind`` with content ``data``."""
    digest = hashlib.new(algorithm, b"%s %d\0" % (_TYPE_NAMES[kind], len(data)))
    digest.update(data)
    return digest.digest()


class ObjectStore:
    """Reads objects of one repository; :meth:`close` releases its pack descriptors.

    Args:
        git: The ``.git`` directory.
        algorithm: The repository's object format.
        budget: The call's budget.
    """

    __slots__ = (
        "_abbreviation",
        "_budget",
        "_cache",
        "_cached_bytes",
        "_git",
        "_loose_names",
        "_packs",
        "algorithm",
        "hash_size",
    )

    def __init__(self, git: GitDirectory, algorithm: ObjectFormat, budget: Budget) -> None:
        self._git = git
        self._budget = budget
        self.algorithm: ObjectFormat = algorithm
        self.hash_size = 32 if algorithm == "sha256" else 20
        self._packs: list[Pack] | None = None
        self._cache: OrderedDict[tuple[int, int], tuple[int, bytes]] = OrderedDict()
        self._cached_bytes = 0
        self._abbreviation: int | None = None
        self._loose_names: dict[str, list[bytes]] = {}

    def close(self) -> None:
        """Close every pack opened so far."""
        for pack in self._packs or ():
            pack.close()
        self._packs = None

    # -- lookups ------------------------------------------------------------------

    def read(self, object_id: bytes, kind: int) -> bytes:
        """Return the content of object ``object_id``, which must be of ``kind``.

        Raises:
            LocalWorkspaceError: ``WORKSPACE_GIT_FAILED`` if it is missing, corrupt, of another
                type or does not hash to its id; ``WORKSPACE_GIT_TOO_LARGE`` past the bounds.
        """
        self._budget.check()
        found = self._read_any(object_id)
        if found is None:
            self._budget.fail(f"object {object_id.hex()} is missing")
        actual, data = found
        if hash_object(self.algorithm, actual, data) != object_id:
            self._budget.fail(f"object {object_id.hex()} is corrupt (its content has another id)")
        if actual != kind:
            self._budget.fail(
                f"object {object_id.hex()} is a {_TYPE_NAMES[actual].decode()}, "
                f"not a {_TYPE_NAMES[kind].decode()}"
            )
        return data

    def _read_any(self, object_id: bytes) -> tuple[int, bytes] | None:
        for number, pack in enumerate(self._open_packs()):
            offset = pack.find(object_id)
            if offset is not None:
                return self._read_packed(number, offset)
        return self._read_loose(object_id)

    def _open_packs(self) -> list[Pack]:
        if self._packs is not None:
            return self._packs
        packs: list[Pack] = []
        self._packs = packs
        directory = self._git.open_directory(("objects", "pack"))
        if directory is None:
            return packs
        try:
            names = sorted(os.listdir(directory))
        except OSError as error:
            fail_os(error, ".git/objects/pack", self._budget.operation)
        finally:
            os.close(directory)
        stems = [name[: -len(".idx")] for name in names if name.startswith("pack-") and name.endswith(".idx")]
        available = set(names)
        for stem in stems:
            if f"{stem}.pack" not in available:
                continue  # git ignores an index without its pack
            if len(packs) >= self._budget.limits.max_packs:
                self._budget.too_large(f"more than {self._budget.limits.max_packs} packs")
            packs.append(Pack(self._git, stem, self.hash_size, self._budget))
        return packs

    def _read_loose(self, object_id: bytes) -> tuple[int, bytes] | None:
        limits = self._budget.limits
        hexadecimal = object_id.hex()
        compressed = self._git.read(
            ("objects", hexadecimal[:2], hexadecimal[2:]),
            limits.max_object_bytes + limits.max_object_bytes // 8 + 4096,
        )
        if compressed is None:
            return None
        what = f"loose object {hexadecimal}"
        inflater = zlib.decompressobj()
        try:
            head = inflater.decompress(compressed, _LOOSE_HEADER)
            end = head.find(b"\0")
            if end < 0:
                self._budget.fail(f"{what} has no header")
            kind_name, _, size_text = head[:end].partition(b" ")
            kind = _TYPE_NUMBERS.get(kind_name)
            if kind is None or not size_text.isdigit() or len(size_text) > 18:
                self._budget.fail(f"{what} has a malformed header")
            size = int(size_text)
            self._budget.object_size(size, what)
            body = head[end + 1 :]
            if len(body) <= size:
                body += inflater.decompress(inflater.unconsumed_tail, size + 1 - len(body))
            if len(body) != size or inflater.unconsumed_tail or not inflater.eof:
                self._budget.fail(f"{what} does not inflate to its declared size")
        except zlib.error:
            self._budget.fail(f"{what} is not valid zlib")
        return kind, body

    def _read_packed(self, number: int, offset: int) -> tuple[int, bytes]:
        packs = self._open_packs()
        chain: list[tuple[int, int, bytes]] = []  # (pack, offset, delta), outermost first
        while True:
            cached = self._cache.get((number, offset))
            if cached is not None:
                self._cache.move_to_end((number, offset))
                kind, data = cached
                break
            pack = packs[number]
            entry = pack.entry(offset)
            if entry.kind not in (OFS_DELTA, REF_DELTA):
                kind, data = entry.kind, pack.inflate(entry)
                self._remember(number, offset, kind, data)
                break
            chain.append((number, offset, pack.inflate(entry)))
            if len(chain) > self._budget.limits.max_delta_depth:
                self._budget.fail(f"a delta chain in {pack.name} is deeper than the bound (or a loop)")
            if entry.base_offset is not None:
                offset = entry.base_offset
                continue
            assert entry.base_id is not None
            located = self._locate(entry.base_id)
            if located is None:
                loose = self._read_loose(entry.base_id)
                if loose is None:
                    self._budget.fail(f"the delta base {entry.base_id.hex()} is missing")
                kind, data = loose
                break
            number, offset = located
        for delta_pack, delta_offset, delta in reversed(chain):
            self._budget.check()
            data = apply_delta(data, delta, self._budget)
            self._remember(delta_pack, delta_offset, kind, data)
        return kind, data

    def _locate(self, object_id: bytes) -> tuple[int, int] | None:
        for number, pack in enumerate(self._open_packs()):
            offset = pack.find(object_id)
            if offset is not None:
                return number, offset
        return None

    def _remember(self, number: int, offset: int, kind: int, data: bytes) -> None:
        budget = self._budget.limits.cache_bytes
        if len(data) > budget // 4:
            return
        self._cache[(number, offset)] = (kind, data)
        self._cached_bytes += len(data)
        while self._cached_bytes > budget:
            _, (_, evicted) = self._cache.popitem(last=False)
            self._cached_bytes -= len(evicted)

    # -- abbreviations ------------------------------------------------------------

    def abbreviation_length(self) -> int:
        """git's default abbreviation: 7 hex digits, more once there are over 2^14 packed objects."""
        if self._abbreviation is None:
            count = sum(pack.count for pack in self._open_packs())
            self._abbreviation = max(_MIN_ABBREVIATION, (count.bit_length() + 1) // 2)
        return self._abbreviation

    def abbreviate(self, object_id: bytes) -> str:
        """The shortest prefix of ``object_id``, at least the default length, no other object shares."""
        shared = max((pack.shared_prefix(object_id) for pack in self._open_packs()), default=0)
        hexadecimal = object_id.hex()
        for name in self._loose_folder(hexadecimal[:2]):
            if name != object_id:
                shared = max(shared, _shared_prefix(hexadecimal, name.hex()))
        return hexadecimal[: max(self.abbreviation_length(), shared + 1)]

    def _loose_folder(self, folder: str) -> list[bytes]:
        names = self._loose_names.get(folder)
        if names is None:
            names = list[bytes]()
            fd = self._git.open_directory(("objects", folder))
            if fd is not None:
                try:
                    entries = os.listdir(fd)
                finally:
                    os.close(fd)
                self._budget.entries(len(entries) // 64)
                for entry in entries:
                    try:
                        names.append(bytes.fromhex(folder + entry))
                    except ValueError:
                        continue  # not an object file
            self._loose_names[folder] = names
        return names

    # -- typed objects ------------------------------------------------------------

    def commit_tree(self, commit_id: bytes) -> bytes:
        """Return the id of the tree of commit ``commit_id``."""
        return self._hex_field(self.read(commit_id, COMMIT), b"tree ", f"commit {commit_id.hex()}")

    def peel_commit(self, object_id: bytes) -> bytes:
        """Return the commit ``object_id`` names, peeling annotated tags."""
        for _ in range(_MAX_TAG_DEPTH):
            found = self._read_any(object_id)
            if found is None:
                self._budget.fail(f"object {object_id.hex()} is missing")
            kind, _ = found
            if kind == COMMIT:
                self.read(object_id, COMMIT)  # verifies the id
                return object_id
            if kind != TAG:
                self._budget.fail(f"HEAD names {object_id.hex()}, which is not a commit")
            object_id = self._tag_target(self.read(object_id, TAG))
        raise self._budget.failure("HEAD names a chain of tags that is too long")

    def _tag_target(self, data: bytes) -> bytes:
        return self._hex_field(data, b"object ", "a tag")

    def _hex_field(self, data: bytes, prefix: bytes, what: str) -> bytes:
        width = 2 * self.hash_size
        line = data[len(prefix) : len(prefix) + width + 1]
        if not data.startswith(prefix) or len(line) != width + 1 or line[-1:] != b"\n":
            self._budget.fail(f"{what} is malformed")
        try:
            value = bytes.fromhex(line[:-1].decode("ascii"))
        except ValueError:
            self._budget.fail(f"{what} is malformed")
        if line[:-1] != line[:-1].lower():
            self._budget.fail(f"{what} is malformed")
        return value

    def tree_entries(self, tree_id: bytes) -> list[TreeEntry]:
        """Return the entries of tree ``tree_id``, each name checked and each mode canonical."""
        data = self.read(tree_id, TREE)
        entries: list[TreeEntry] = []
        position, size = 0, self.hash_size
        what = f"tree {tree_id.hex()}"
        while position < len(data):
            space = data.find(b" ", position, position + 8)
            end = data.find(b"\0", space + 1)
            if space < 0 or end < 0 or end + 1 + size > len(data):
                self._budget.fail(f"{what} is malformed")
            mode_text = data[position:space]
            name = data[space + 1 : end]
            if not mode_text or not all(48 <= digit <= 55 for digit in mode_text):
                self._budget.fail(f"{what} has a malformed mode")
            if not name or name in (b".", b"..") or b"/" in name:
                self._budget.fail(f"{what} has an invalid entry name")
            entries.append(
                TreeEntry(
                    name,
                    _canonical_mode(int(mode_text, 8), self._budget, what),
                    data[end + 1 : end + 1 + size],
                )
            )
            position = end + 1 + size
        self._budget.entries(len(entries))
        return entries


def _shared_prefix(first: str, second: str) -> int:
    for position, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return position
    return min(len(first), len(second))


def _canonical_mode(mode: int, budget: Budget, what: str) -> int:
    kind = mode & 0o170000
    if kind == 0o100000:
        return EXECUTABLE if mode & 0o100 else REGULAR
    if kind in (SYMLINK, GITLINK, TREE_MODE):
        return kind
    raise budget.failure(f"{what} has an entry of unknown mode {mode:o}")
