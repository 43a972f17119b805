"""An immutable mapping whose changed copy costs what changed, not the size of the map.

The metadata image is replaced whole on every committed step, so its big maps (topics
by name, names by topic id, configs by resource) must not be copied whole per step: at
10,000 topics one dict copy cost more than the whole rest of a leader change.
PersistentMap keeps its entries in chunks of up to CHUNK, in insertion order, and an
index split into BUCKETS dicts by key hash telling each key's chunk. `evolve` copies
only the chunks and index buckets it touches (plus the two short tuples holding them);
everything else is shared with the map it came from.

It iterates exactly like a dict updated the same way: insertion order, a replaced key
keeps its place, a removed and re-added key goes last. Immutable once built; any
reader may share it.
"""
from __future__ import annotations

from typing import Any, Hashable, Iterable, Iterator, ItemsView, KeysView, Mapping, ValuesView

CHUNK = 128
BUCKETS = 256


class PersistentMap(Mapping[Any, Any]):
    __slots__ = ("_chunks", "_index", "_len")

    def __init__(self, items: Mapping[Any, Any] | None = None) -> None:
        self._chunks: tuple[dict[Any, Any], ...] = ()
        self._index: tuple[dict[Any, int], ...] = tuple({} for _ in range(BUCKETS))
        self._len = 0
        if items:
            built = self.evolve(items, ())
            self._chunks, self._index, self._len = built._chunks, built._index, built._len

    @classmethod
    def of(cls, mapping: Mapping[Any, Any]) -> "PersistentMap":
        """`mapping` itself when it is one, else a PersistentMap of its items (once)."""
        return mapping if isinstance(mapping, PersistentMap) else cls(mapping)

    # -- reading ---------------------------------------------------------------------------

    def __getitem__(self, key: Hashable) -> Any:
        return self._chunks[self._index[hash(key) % BUCKETS][key]][key]

    def get(self, key: Hashable, default: Any = None) -> Any:
        n = self._index[hash(key) % BUCKETS].get(key)
        return default if n is None else self._chunks[n][key]

    def __contains__(self, key: object) -> bool:
        try:
            return key in self._index[hash(key) % BUCKETS]
        except TypeError:   # unhashable: never a key
            return False

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._chunks:
            yield from chunk

    def __reversed__(self) -> Iterator[Any]:   # as a dict's (Python 3.8+)
        for chunk in reversed(self._chunks):
            yield from reversed(chunk)

    def __len__(self) -> int:
        return self._len

    def keys(self) -> KeysView[Any]:
        return _Keys(self)

    def items(self) -> ItemsView[Any, Any]:
        return _Items(self)

    def values(self) -> ValuesView[Any]:
        return _Values(self)

    def __repr__(self) -> str:
        return f"PersistentMap({dict(self.items())!r})"

    # -- changing (into a new map) -----------------------------------------------------------

    def evolve(self, changes: Mapping[Any, Any], removed: Iterable[Hashable]) -> "PersistentMap":
        """A new map: `removed` keys gone (absent ones ignored), then `changes` set."""
        chunks = list(self._chunks)
        index = list(self._index)
        own_chunks: set[int] = set()   # copied for the new map: safe to change
        own_buckets: set[int] = set()
        size = self._len

        def chunk(n: int) -> dict[Any, Any]:
            if n not in own_chunks:
                chunks[n] = dict(chunks[n])
                own_chunks.add(n)
            return chunks[n]

        def bucket(b: int) -> dict[Any, int]:
            if b not in own_buckets:
                index[b] = dict(index[b])
                own_buckets.add(b)
            return index[b]

        for key in removed:
            b = hash(key) % BUCKETS
            n = index[b].get(key)
            if n is not None:
                del bucket(b)[key]
                del chunk(n)[key]
                size -= 1
        for key, value in changes.items():
            b = hash(key) % BUCKETS
            n = index[b].get(key)
            if n is None:
                if not chunks or len(chunks[-1]) >= CHUNK:
                    chunks.append({})
                    own_chunks.add(len(chunks) - 1)
                n = len(chunks) - 1
                bucket(b)[key] = n
                size += 1
            chunk(n)[key] = value
        out = PersistentMap.__new__(PersistentMap)
        out._chunks, out._index, out._len = tuple(chunks), tuple(index), size
        if len(chunks) > 2 * (size // CHUNK) + 8:
            # Removals left many chunks (nearly) empty: pack them (rare, whole-map cost).
            return PersistentMap(dict(out.items()))
        return out


class _Keys(KeysView[Any]):
    """Keys in order, reversible as a dict's keys() is."""
    _mapping: PersistentMap

    def __iter__(self) -> Iterator[Any]:
        return iter(self._mapping)

    def __reversed__(self) -> Iterator[Any]:
        return reversed(self._mapping)


class _Items(ItemsView[Any, Any]):
    """Items straight from the chunks (one lookup each, not two)."""
    _mapping: PersistentMap

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        for chunk in self._mapping._chunks:
            yield from chunk.items()

    def __reversed__(self) -> Iterator[tuple[Any, Any]]:
        for chunk in reversed(self._mapping._chunks):
            yield from reversed(chunk.items())


class _Values(ValuesView[Any]):
    _mapping: PersistentMap

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._mapping._chunks:
            yield from chunk.values()

    def __reversed__(self) -> Iterator[Any]:
        for chunk in reversed(self._mapping._chunks):
            yield from reversed(chunk.values())
