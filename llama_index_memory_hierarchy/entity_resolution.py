"""Entity resolution: which mentions name the same thing.

"Alice", "alice" and "Alice Chen" become one node when the evidence says so:

1. **Normalisation** (Unicode NFKC, case, whitespace, punctuation, possessive ``'s``, a
   leading article): equal normal forms, or a known alias, are the same entity.
2. **Token containment** ("alice" ⊂ "alice chen"): one entity of a compatible type whose
   name contains the mention's words (or the reverse) is evidence; it lowers the
   embedding-similarity bar to ``containment_threshold``. Ambiguous containment ("Alice"
   with both "Alice Chen" and "Alice Smith" known) is no evidence.
   Containment never joins names that conflict: "Alice" seen as "Alice Smith" is not
   "Alice Jones" (a shared first name is not enough when the surnames differ).
3. **Embedding similarity** of the names at or above ``similarity_threshold`` ("Acme
   Corporation" ~ "Acme Corp", "NYC" ~ "New York City") with compatible types, unless the
   names share words but each has one the other lacks ("Alice Chen-Kim" / "Alice Chen-Novak"),
   or their numbers differ ("A320" / "A321", "iPhone 14" / "iPhone 15").
4. **The user's own name** ("I'm Zhang San", "我叫张三") is an alias of the ``User`` entity
   (:meth:`EntityResolver.name_user`), so the user and their name are one node.

Both thresholds are calibrated similarities (:mod:`llama_index_memory_hierarchy.calibration`, role
``"name"``): 0 for unrelated names, 1 for identical ones, whatever the embedding model (unrelated
names sit at cosine ~0.23 with MiniLM, ~0.83 with multilingual-E5, so a raw cosine bar that joins
"Acme Corp" and "Acme Corporation" with one model joins "Paris" and "Berlin" with the other).

Node ids are stable across processes and machines: ``uuid5`` of (user id, canonical
name), never Python's salted ``hash()``. The first name an entity is seen with fixes
its id; later, longer names become its display name and every name an alias.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from llama_index_memory_hierarchy.calibration import IDENTITY, SimilarityCalibration, group_of
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.extraction import USER_ENTITY

#: Namespace of entity ids (fixed forever: changing it would change every node id).
ENTITY_NAMESPACE = uuid.UUID("5b0f7c1e-3f57-4b8e-9a43-6d2a0c1b9e11")
#: Types that tell entities apart: a PERSON is never merged with a PLACE or an ORG. Every other
#: type (ENTITY, CONCEPT, PRODUCT, ...) is too noisy across extractors to keep names apart.
STRONG_TYPES = frozenset({"PERSON", "PLACE", "ORG"})
_TYPE_SYNONYMS = {
    "PER": "PERSON", "PEOPLE": "PERSON", "HUMAN": "PERSON",
    "GPE": "PLACE", "LOC": "PLACE", "LOCATION": "PLACE", "CITY": "PLACE", "COUNTRY": "PLACE", "FAC": "PLACE",
    "ORGANIZATION": "ORG", "ORGANISATION": "ORG", "COMPANY": "ORG", "NORP": "GROUP",
}  # fmt: skip
_POSSESSIVE = re.compile(r"(?:'s|’s|')(?=\s|$)")
_PUNCT = re.compile(r"[^\w\s]+")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_TITLES = {"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam"}


def normalize_name(name: str) -> str:
    """The comparison form of a name: NFKC, case-folded, no possessive/punctuation/article, single spaces."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _POSSESSIVE.sub("", text)
    text = _PUNCT.sub(" ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return _ARTICLE.sub("", text)


@functools.lru_cache(maxsize=65536)
def name_tokens(normalized: str) -> frozenset[str]:
    """Words of a normalised name, without titles (Dr, Mr, ...); cached, since every search asks it of the names
    of every entity the query's words reach."""
    return frozenset(t for t in normalized.split() if t not in _TITLES)


def normalize_type(entity_type: str | None) -> str:
    """Coarse entity type: PERSON, PLACE, ORG, ... (extractor-specific spellings folded)."""
    upper = (entity_type or "ENTITY").strip().upper()
    return _TYPE_SYNONYMS.get(upper, upper)


def types_compatible(a: str, b: str) -> bool:
    """Same coarse type, or either is not one of the :data:`STRONG_TYPES`."""
    return a == b or a not in STRONG_TYPES or b not in STRONG_TYPES


def _upgrade(entity: Entity, kind: str) -> None:
    """A weak type gives way to a strong one ("Carol": PRODUCT, then PERSON)."""
    if entity.type not in STRONG_TYPES and kind in STRONG_TYPES:
        entity.type = kind


def _same_token(a: str, b: str) -> bool:
    return a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)))


def tokens_conflict(a: frozenset[str], b: frozenset[str]) -> bool:
    """Names that share words but each has a word the other lacks ("Alice Chen-Kim" / "Alice Chen-Novak").

    Such pairs can embed close together yet name different people, so similarity alone
    never merges them. Abbreviations count as the same word ("corp" / "corporation").
    """
    if not any(_same_token(x, y) for x in a for y in b):
        return False
    extra_a = any(not any(_same_token(x, y) for y in b) for x in a)
    extra_b = any(not any(_same_token(x, y) for x in a) for y in b)
    return extra_a and extra_b


def numbers_differ(a: str, b: str) -> bool:
    """Names whose digits differ name different things ("A320" / "A321"), however close they embed."""
    return re.findall(r"\d+", a) != re.findall(r"\d+", b)


def entity_id(user_id: str, canonical: str) -> str:
    """Stable node id of a user's entity: ``ent_`` + uuid5(user, canonical name) hex."""
    if not canonical:
        raise MemoryValidationError("entity", "an entity name must contain a letter or digit")
    return "ent_" + uuid.uuid5(ENTITY_NAMESPACE, f"{user_id}\x1f{canonical}").hex


@dataclass
class Entity:
    """A resolved entity of one user."""

    id: str
    name: str
    type: str = "ENTITY"
    aliases: set[str] = field(default_factory=set)  # normalised forms
    embedding: np.ndarray | None = None

    @property
    def canonical(self) -> str:
        return normalize_name(self.name)


class _VectorTable:
    """Entity name vectors in one growing matrix (amortised appends, one matrix product per lookup)."""

    def __init__(self) -> None:
        self._matrix: np.ndarray | None = None
        self._ids: list[str] = []
        self._row: dict[str, int] = {}

    def set(self, eid: str, vector: np.ndarray) -> None:
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._matrix is None:
            self._matrix = np.zeros((16, vector.shape[0]), dtype=np.float32)
        if vector.shape[0] != self._matrix.shape[1]:
            return
        row = self._row.get(eid)
        if row is None:
            row = len(self._ids)
            if row >= self._matrix.shape[0]:
                grown = np.zeros((self._matrix.shape[0] * 2, self._matrix.shape[1]), dtype=np.float32)
                grown[:row] = self._matrix[:row]
                self._matrix = grown
            self._ids.append(eid)
            self._row[eid] = row
        self._matrix[row] = vector

    def drop(self, eid: str) -> None:
        row = self._row.get(eid)
        if row is not None and self._matrix is not None:
            self._matrix[row] = 0.0

    def nearest(self, vector: np.ndarray, k: int = 8) -> list[tuple[str, float]]:
        if self._matrix is None or not self._ids or vector.shape[0] != self._matrix.shape[1]:
            return []
        scores = self._matrix[: len(self._ids)] @ vector
        k = min(k, len(self._ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(self._ids[i], float(scores[i])) for i in top]


class EntityRegistry:
    """A user's entities with their alias and word indexes (kept in memory, rebuilt from records)."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.entities: dict[str, Entity] = {}
        self._alias: dict[str, str] = {}
        self._tokens: dict[str, set[str]] = {}
        self.vectors = _VectorTable()

    def set_embedding(self, entity: Entity, vector: np.ndarray) -> None:
        entity.embedding = np.asarray(vector, dtype=np.float32)
        if entity.name != USER_ENTITY:
            self.vectors.set(entity.id, entity.embedding)

    def __len__(self) -> int:
        return len(self.entities)

    def get(self, entity_id_: str) -> Entity | None:
        return self.entities.get(entity_id_)

    def by_alias(self, normalized: str) -> Entity | None:
        eid = self._alias.get(normalized)
        return self.entities.get(eid) if eid else None

    def add(self, entity: Entity) -> Entity:
        """Register an entity (or merge names into the one with the same id)."""
        existing = self.entities.get(entity.id)
        if existing is None:
            self.entities[entity.id] = entity
            existing = entity
            if entity.embedding is not None:
                self.set_embedding(entity, entity.embedding)
        else:
            self.note_name(existing, entity.name)
            _upgrade(existing, entity.type)
        for alias in {*entity.aliases, normalize_name(entity.name)}:
            self._index(existing, alias)
        return existing

    def note_name(self, entity: Entity, name: str) -> None:
        """Record another name of ``entity``; a longer name becomes its display name."""
        normalized = normalize_name(name)
        if not normalized:
            return
        self._index(entity, normalized)
        if len(name_tokens(normalized)) > len(name_tokens(entity.canonical)) and entity.name != USER_ENTITY:
            entity.name = name

    def _index(self, entity: Entity, alias: str) -> None:
        if not alias:
            return
        entity.aliases.add(alias)
        self._alias.setdefault(alias, entity.id)
        for token in name_tokens(alias):
            self._tokens.setdefault(token, set()).add(entity.id)

    def absorb(self, keep: Entity, other: Entity) -> None:
        """Fold ``other`` into ``keep``: its names become aliases of ``keep`` and it leaves the registry."""
        aliases = set(other.aliases)
        self.remove(other.id)
        for alias in aliases:
            self._alias.pop(alias, None)
            self._index(keep, alias)

    def remove(self, entity_id_: str) -> None:
        entity = self.entities.pop(entity_id_, None)
        if entity is None:
            return
        self.vectors.drop(entity_id_)
        for alias in entity.aliases:
            if self._alias.get(alias) == entity_id_:
                del self._alias[alias]
            for token in name_tokens(alias):
                self._tokens.get(token, set()).discard(entity_id_)

    def containing(self, tokens: frozenset[str]) -> set[str]:
        """Entities with an alias whose words contain ``tokens`` or are contained in them."""
        if not tokens:
            return set()
        candidates: set[str] = set()
        for token in tokens:
            candidates |= self._tokens.get(token, set())
        found = set()
        for eid in candidates:
            for alias in self.entities[eid].aliases:
                words = name_tokens(alias)
                if words and words != tokens and (tokens < words or words < tokens):
                    found.add(eid)
                    break
        return found

    def search(self, text: str, limit: int = 10) -> list[Entity]:
        """Entities whose aliases share words with ``text`` (most shared words first)."""
        tokens = name_tokens(normalize_name(text))
        counts: dict[str, int] = {}
        for token in tokens:
            for eid in self._tokens.get(token, ()):
                counts[eid] = counts.get(eid, 0) + 1
        exact = self.by_alias(normalize_name(text))
        if exact is not None:
            counts[exact.id] = counts.get(exact.id, 0) + 100
        ranked = sorted(counts, key=lambda eid: (-counts[eid], self.entities[eid].name))
        return [self.entities[eid] for eid in ranked[:limit]]


EmbedFn = Callable[[Sequence[str]], Awaitable[np.ndarray]]


class EntityResolver:
    """Resolves mentions against a registry: alias, then containment + similarity, then similarity."""

    def __init__(self, *, similarity_threshold: float = 0.85, containment_threshold: float = 0.45) -> None:
        for name, value in (
            ("similarity_threshold", similarity_threshold),
            ("containment_threshold", containment_threshold),
        ):
            if not 0.0 < value <= 1.0:
                raise MemoryValidationError(name, f"must be in (0, 1], got {value!r}")
        self.similarity_threshold = similarity_threshold
        self.containment_threshold = containment_threshold

    async def aresolve(
        self,
        registry: EntityRegistry,
        mentions: Sequence[tuple[str, str]],
        embed: EmbedFn | None = None,
        calibration: SimilarityCalibration = IDENTITY,
    ) -> list[Entity]:
        """The entity of each ``(name, type)`` mention, creating entities as needed (in order).

        ``calibration``: that of ``embed``'s model, on whose scale the thresholds are read.
        """
        normalized = [normalize_name(name) for name, _ in mentions]
        for (name, _), norm in zip(mentions, normalized, strict=True):
            if not norm:
                raise MemoryValidationError("entity", f"{name[:80]!r} has no letter or digit")
        needs_vectors = [
            name
            for (name, _), norm in zip(mentions, normalized, strict=True)
            if registry.by_alias(norm) is None and name != USER_ENTITY
        ]
        vectors: dict[str, np.ndarray] = {}
        if embed is not None:
            await self._ensure_embeddings(registry, embed)
            unique = list(dict.fromkeys(needs_vectors))
            if unique:
                for name, vector in zip(unique, await embed(unique), strict=True):
                    vectors[name] = np.asarray(vector, dtype=np.float32)
        return [
            self._resolve_one(registry, name, normalize_type(kind), norm, vectors.get(name), calibration)
            for (name, kind), norm in zip(mentions, normalized, strict=True)
        ]

    async def _ensure_embeddings(self, registry: EntityRegistry, embed: EmbedFn) -> None:
        missing = [e for e in registry.entities.values() if e.embedding is None and e.name != USER_ENTITY]
        if missing:
            for entity, vector in zip(missing, await embed([e.name for e in missing]), strict=True):
                registry.set_embedding(entity, vector)

    @staticmethod
    def user(registry: EntityRegistry) -> Entity:
        """The entity of the user the registry belongs to (created on first use)."""
        entity = registry.by_alias(USER_ENTITY.casefold())
        return entity or registry.add(
            Entity(id=entity_id(registry.user_id, USER_ENTITY.casefold()), name=USER_ENTITY, type="PERSON")
        )

    def name_user(self, registry: EntityRegistry, name: str) -> bool:
        """Make ``name`` (the user's own: "I'm Zhang San") an alias of the user; False when another entity has it."""
        norm = normalize_name(name)
        user = self.user(registry)
        owner = registry.by_alias(norm) if norm else None
        if not norm or (owner is not None and owner.id != user.id):
            return False
        registry.note_name(user, name)
        user.name = name  # the user's node is labelled with their name; "User" stays an alias
        return True

    def _resolve_one(
        self,
        registry: EntityRegistry,
        name: str,
        kind: str,
        norm: str,
        vector: np.ndarray | None,
        calibration: SimilarityCalibration = IDENTITY,
    ) -> Entity:
        if name == USER_ENTITY or norm == USER_ENTITY.casefold():
            return self.user(registry)
        entity = registry.by_alias(norm)
        if entity is not None and types_compatible(entity.type, kind):
            registry.note_name(entity, name)
            _upgrade(entity, kind)
            return entity
        match = self._match(registry, norm, kind, vector, calibration) if vector is not None else None
        if match is not None:
            registry.note_name(match, name)
            _upgrade(match, kind)
            return match
        canonical = norm if registry.by_alias(norm) is None else f"{norm}\x1f{kind.lower()}"
        return registry.add(Entity(id=entity_id(registry.user_id, canonical), name=name, type=kind, embedding=vector))

    def _match(
        self, registry: EntityRegistry, norm: str, kind: str, vector: np.ndarray, calibration: SimilarityCalibration
    ) -> Entity | None:
        group = group_of(norm)

        def similar(entity: Entity, cosine: float, threshold: float) -> bool:
            return calibration.calibrate(cosine, group, group_of(entity.canonical), role="name") >= threshold

        contained = {
            eid for eid in registry.containing(name_tokens(norm)) if types_compatible(registry.entities[eid].type, kind)
        }
        tokens = name_tokens(norm)
        if len(contained) == 1:
            [eid] = contained
            entity = registry.entities[eid]
            conflicting = any(tokens_conflict(tokens, name_tokens(alias)) for alias in entity.aliases)
            if (
                not conflicting
                and entity.embedding is not None
                and similar(entity, float(entity.embedding @ vector), self.containment_threshold)
            ):
                return entity
        for eid, score in registry.vectors.nearest(vector):
            entity = registry.entities.get(eid)
            if (
                entity is not None
                and similar(entity, score, self.similarity_threshold)
                and types_compatible(entity.type, kind)
                and not tokens_conflict(tokens, name_tokens(entity.canonical))
                and not numbers_differ(norm, entity.canonical)
            ):
                return entity
        return None
