"""Hostile input: huge strings, deep or cyclic metadata, NaN/inf, invalid Unicode, wrong types and
floods of tiny adds. Every call either works or raises a precise ``MemoryHierarchyError`` naming
the field; memory stays bounded; the process never crashes and the store stays consistent.

The public API is also fuzzed with hypothesis: arbitrary Python values for every argument.
"""

from __future__ import annotations

import math
import resource
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from store_checks import assert_indexes_agree, hashing, minilm, read_sqlite, vector_ids

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.types import MAX_BATCH_ITEMS, MAX_CONTENT_CHARS, MAX_METADATA_DEPTH


def _user(shared_dir: Path, model: Any = None) -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id=f"h-{uuid.uuid4().hex[:10]}",
        session_id="s1",
        persist_dir=str(shared_dir),
        embed_model=model or minilm(),
    )


@pytest.fixture
def memory(shared_dir: Path) -> Any:
    memory = _user(shared_dir)
    yield memory
    memory.close()


def _rss_mb(kind: str = "VmRSS") -> float:
    """Resident memory in MB: ``VmRSS`` (all), ``RssAnon`` (heap) or ``RssFile`` (mapped files)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{kind}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"k": value}
    return value


# --------------------------------------------------------------------------------------------------
# precise errors for each kind of hostile value
# --------------------------------------------------------------------------------------------------


BAD_CALLS: list[tuple[str, Any, str]] = [
    ("content too long", lambda m: m.episodic.add("x" * (MAX_CONTENT_CHARS + 1)), "content"),
    ("10 MB content", lambda m: m.episodic.add("y" * 10_000_000), "content"),
    ("blank content", lambda m: m.episodic.add(" \n\t "), "content"),
    ("NUL in content", lambda m: m.episodic.add("a\x00b"), "content"),
    ("lone surrogate", lambda m: m.episodic.add("broken \ud800 text"), "content"),
    ("surrogate in query", lambda m: m.episodic.retrieve("q \udfff"), "query"),
    ("surrogate in metadata", lambda m: m.episodic.add("ok", metadata={"k": "\ud834"}), "metadata"),
    ("bytes content", lambda m: m.episodic.add(b"\xff\xfe invalid utf-8"), "item_or_text"),
    ("None content", lambda m: m.episodic.add(None), "item_or_text"),
    ("int content", lambda m: m.episodic.add(42), "item_or_text"),
    ("NaN importance", lambda m: m.episodic.add("ok", importance=math.nan), "importance"),
    ("inf importance", lambda m: m.episodic.add("ok", importance=math.inf), "importance"),
    ("-inf importance", lambda m: m.episodic.add("ok", importance=-math.inf), "importance"),
    ("importance 2", lambda m: m.episodic.add("ok", importance=2), "importance"),
    ("str importance", lambda m: m.episodic.add("ok", importance="0.5"), "importance"),
    ("bool importance", lambda m: m.episodic.add("ok", importance=True), "importance"),
    ("NaN timestamp", lambda m: m.episodic.add("ok", timestamp=math.nan), "timestamp"),
    ("bad timestamp", lambda m: m.episodic.add("ok", timestamp="yesterday-ish"), "timestamp"),
    ("huge timestamp", lambda m: m.episodic.add("ok", timestamp=1e300), "timestamp"),
    ("deep metadata", lambda m: m.episodic.add("ok", metadata=_nested(MAX_METADATA_DEPTH + 1)), "metadata"),
    ("very deep metadata", lambda m: m.episodic.add("ok", metadata=_nested(100_000)), "metadata"),
    ("NaN in metadata", lambda m: m.episodic.add("ok", metadata={"x": [1.0, math.nan]}), "metadata"),
    ("non-str key", lambda m: m.episodic.add("ok", metadata={1: "x"}), "metadata"),
    ("object in metadata", lambda m: m.episodic.add("ok", metadata={"x": object()}), "metadata"),
    ("huge metadata", lambda m: m.episodic.add("ok", metadata={"x": "z" * 70_000}), "metadata"),
    ("list metadata", lambda m: m.episodic.add("ok", metadata=[("a", 1)]), "metadata"),
    ("int session", lambda m: m.episodic.add("ok", session_id=7), "session_id"),
    ("limit str", lambda m: m.episodic.retrieve("q", limit="5"), "limit"),
    ("limit negative", lambda m: m.episodic.retrieve("q", limit=-1), "limit"),
    ("limit bool", lambda m: m.episodic.retrieve("q", limit=True), "limit"),
    ("unknown filter", lambda m: m.episodic.retrieve("q", colour="red"), "colour"),
    ("time_range shape", lambda m: m.episodic.retrieve("q", time_range=(1,)), "time_range"),
    ("memory_ids str", lambda m: m.episodic.retrieve("q", memory_ids="abc"), "memory_ids"),
    ("id int", lambda m: m.episodic.get(123), "memory_id"),
    ("id list", lambda m: m.episodic.remove(["a"]), "memory_id"),
    ("single item add_many", lambda m: m.episodic.add_many("just one string"), "items"),
    ("too many items", lambda m: m.episodic.add_many(["t"] * (MAX_BATCH_ITEMS + 1)), "items"),
    ("too many messages", lambda m: m.put_messages([ChatMessage(content="t")] * (MAX_BATCH_ITEMS + 1)), "messages"),
    ("not a message", lambda m: m.put_messages(["plain string"]), "messages[0]"),
    ("surrogate message", lambda m: m.put(ChatMessage(role=MessageRole.USER, content="x\ud800")), "content"),
    ("unknown strategy", lambda m: m.episodic.forget("everything"), "strategy"),
    ("fact surrogate", lambda m: m.semantic.add_fact("A\ud800", "is", "B"), "subject"),
    ("fact empty", lambda m: m.semantic.add_fact("", "is", "B"), "subject"),
    ("fact huge", lambda m: m.semantic.add_fact("A" * 200_000, "is", "B"), "subject"),
]


@pytest.mark.parametrize(("name", "call", "field"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_hostile_values_get_a_precise_error(memory: Any, name: str, call: Any, field: str) -> None:
    before = _rss_mb()
    with pytest.raises(MemoryValidationError) as caught:
        call(memory)
    assert field in caught.value.field, f"{name}: error names {caught.value.field!r}: {caught.value}"
    assert len(str(caught.value)) < 2000, "an error message must not echo a huge input"
    assert _rss_mb() - before < 300, "validation must not blow up memory"
    assert memory.episodic.get_stats()["count"] == 0  # nothing half-written


def test_accepted_extremes_round_trip(memory: Any) -> None:
    big = ("lorem ipsum dolor " * (MAX_CONTENT_CHARS // 18))[:MAX_CONTENT_CHARS]
    deep = _nested(MAX_METADATA_DEPTH - 2)
    ids = [
        memory.episodic.add(big, importance=0.0),
        memory.episodic.add("emoji 🧠 and CJK 记忆 and RTL שלום and combining é", importance=1.0, metadata=deep),
        memory.episodic.add("x", timestamp=0, metadata={"": "", "n": None, "b": False, "f": 1e308}),
        memory.episodic.add("zero-width\u200bjoined\u200dtext\ufeff", timestamp="2001-02-03T04:05:06+09:00"),
    ]
    stored = [memory.episodic.get(i) for i in ids]
    assert stored[0].content == big and stored[1].metadata == deep
    assert stored[2].metadata == {"": "", "n": None, "b": False, "f": 1e308}
    assert memory.episodic.retrieve("记忆", limit=5)
    assert memory.episodic.retrieve("lorem ipsum", limit=1)[0].id == ids[0]
    huge_query = "lorem " * (MAX_CONTENT_CHARS // 6)
    assert memory.episodic.retrieve(huge_query, limit=1)


def test_cyclic_metadata_is_refused(memory: Any) -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(MemoryValidationError, match="metadata"):
        memory.episodic.add("ok", metadata=cyclic)
    listed: list[Any] = []
    listed.append(listed)
    with pytest.raises(MemoryValidationError, match="metadata"):
        memory.episodic.add("ok", metadata={"l": listed})


def test_hostile_knowledge_base_input(memory: Any, tmp_path: Path) -> None:
    from llama_index_memory_hierarchy.knowledge import KnowledgeBase

    kb = KnowledgeBase.from_defaults("docs", user_id=memory.user_id, context=memory.context)
    try:
        for bad in (None, 42, b"bytes", "x\ud800"):
            with pytest.raises(MemoryHierarchyError):
                kb.add_text(bad, doc_id="d1")
        with pytest.raises(MemoryHierarchyError):
            kb.add_text("fine", doc_id=None)
        garbage = tmp_path / "garbage.pdf"
        garbage.write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 200)
        binary = tmp_path / "notes.md"
        binary.write_bytes(b"\xff\xfe\x00\x00 not utf-8 \xc3\x28 markdown")
        report = kb.add_documents([garbage, binary, tmp_path / "missing.txt"])
        assert {Path(f.source).name for f in report.failed} >= {"missing.txt"}
        assert kb.add_text("# Big\n\n" + "word " * 19_000, doc_id="big").ok
        with pytest.raises(MemoryValidationError):
            kb.add_text("word " * 50_000, doc_id="too-big")
        assert kb.as_retriever().retrieve("word")
    finally:
        kb.close()


def test_tools_answer_errors_as_text(memory: Any) -> None:
    from llama_index_memory_hierarchy.tools import MemoryToolSpec

    tools = MemoryToolSpec(memory)
    for result in (
        tools.remember("x" * (MAX_CONTENT_CHARS + 5)),
        tools.remember("ok", tier="nonsense"),
        tools.remember("ok", importance=math.nan),
        tools.recall("x\ud800"),
        tools.update_memory("not-an-id", content="x"),
        tools.forget("../../etc/passwd"),
    ):
        assert result.startswith("Error") or "No memory" in result, result
        assert len(result) < 2000


# --------------------------------------------------------------------------------------------------
# floods of tiny adds: bounded memory, consistent store
# --------------------------------------------------------------------------------------------------


def _flood(memory: HierarchicalMemory, total: int, batch: int, seconds: float) -> tuple[int, float, float, float]:
    """Add up to ``total`` tiny memories in batches within ``seconds``.

    Returns (added, heap growth MB, mapped-file growth MB, adds per second). The heap is what must stay
    bounded; mapped files grow with the data (qdrant-edge maps its segments).
    """
    memory.episodic.add_many([f"warm {i}" for i in range(batch)])
    anon, files, started, added = _rss_mb("RssAnon"), _rss_mb("RssFile"), time.monotonic(), 0
    while added < total and time.monotonic() - started < seconds:
        memory.episodic.add_many([f"t{added + i}" for i in range(batch)])
        added += batch
    rate = added / max(time.monotonic() - started, 1e-9)
    return added, _rss_mb("RssAnon") - anon, _rss_mb("RssFile") - files, rate


def test_many_tiny_adds(tmp_path: Path) -> None:
    memory = _user(tmp_path / "memory_data", hashing())
    try:
        added, grew, _, _ = _flood(memory, total=4000, batch=500, seconds=60)
        assert memory.episodic.get_stats()["count"] == added + 500
        assert grew < 100, f"heap grew {grew:.0f} MB for {added} tiny adds"
        assert_indexes_agree(
            read_sqlite(tmp_path / "memory_data"), memory.context.runtime.run(vector_ids(memory.context))
        )
    finally:
        memory.close()


@pytest.mark.slow
def test_very_many_tiny_adds(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    memory = HierarchicalMemory.from_defaults(
        user_id="flood", session_id="s1", persist_dir=str(folder), embed_model=hashing()
    )
    try:
        added, grew, mapped, rate = _flood(memory, total=1_000_000, batch=MAX_BATCH_ITEMS, seconds=300)
        assert memory.episodic.get_stats()["count"] == added + MAX_BATCH_ITEMS
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"tiny adds (slow): {added} in batches of {MAX_BATCH_ITEMS}, {rate:.0f}/s; heap +{grew:.0f} MB "
            f"({grew * 1024 / added:.2f} KB per add), mapped files +{mapped:.0f} MB, peak RSS {peak:.0f} MB"
        )
        assert grew * 1024 / added < 3, "the heap grows by more than 3 KB per stored memory"
        assert_indexes_agree(read_sqlite(folder), memory.context.runtime.run(vector_ids(memory.context)))
    finally:
        memory.close()


# --------------------------------------------------------------------------------------------------
# fuzzing the public API
# --------------------------------------------------------------------------------------------------

anything = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(alphabet=st.characters(), max_size=40),  # lone surrogates and controls included
        st.binary(max_size=20),
        st.sampled_from(["", " ", "\x00", "x" * 200_000, "2024-01-01", "00000000-0000-4000-8000-000000000000"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), children, max_size=3),
    ),
    max_leaves=6,
)


def _kwargs(value: Any) -> dict[str, Any]:
    return (
        {k: v for k, v in value.items() if isinstance(k, str) and k.isidentifier()} if isinstance(value, dict) else {}
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


CALLS = [
    ("episodic.add", lambda m, a, b, c: m.episodic.add(a, importance=b, metadata=c)),
    ("episodic.add_many", lambda m, a, b, c: m.episodic.add_many(a)),
    ("episodic.retrieve", lambda m, a, b, c: m.episodic.retrieve(a, limit=b)),
    ("episodic.retrieve filters", lambda m, a, b, c: m.episodic.retrieve("q", **{"session_id": a, "metadata": c})),
    ("episodic.get", lambda m, a, b, c: m.episodic.get(a)),
    ("episodic.update", lambda m, a, b, c: m.episodic.update(a, content=b, metadata=c)),
    ("episodic.remove", lambda m, a, b, c: m.episodic.remove(a)),
    ("episodic.forget", lambda m, a, b, c: m.episodic.forget(a, threshold=b)),
    ("episodic.timeline", lambda m, a, b, c: m.episodic.get_timeline(a, b, c)),
    ("semantic.add_fact", lambda m, a, b, c: m.semantic.add_fact(a, b, c)),
    ("semantic.add", lambda m, a, b, c: m.semantic.add(a, importance=b)),
    ("semantic.related", lambda m, a, b, c: m.semantic.get_related_entities(a, depth=b)),
    ("perceptual.add", lambda m, a, b, c: m.perceptual.add(a, metadata=c)),
    ("working.add", lambda m, a, b, c: m.working.add(a, importance=b)),
    ("put", lambda m, a, b, c: m.put(ChatMessage(role=MessageRole.USER, content=_text(a)))),
    ("put_messages", lambda m, a, b, c: m.put_messages(a)),
    ("get", lambda m, a, b, c: m.get(input=a)),
    # retrieve() itself belongs to LlamaIndex (a str or QueryBundle); ours are top_k, filters and the text
    ("as_retriever", lambda m, a, b, c: m.as_retriever(similarity_top_k=b, **_kwargs(c)).retrieve(_text(a))),
    ("tier retriever", lambda m, a, b, c: m.episodic.as_retriever(b, **_kwargs(c)).retrieve(_text(a))),
    ("manager.forget", lambda m, a, b, c: m.manager.forget(a, dry_run=True, threshold=b)),
    ("manager.pin", lambda m, a, b, c: m.manager.pin(a)),
]


FUZZED = {"calls": 0, "accepted": 0, "refused": 0}


@pytest.fixture(scope="module", autouse=True)
def fuzz_figures() -> Any:
    yield
    print(f"\nfuzz: {FUZZED} (refused = a precise MemoryHierarchyError; nothing else was raised)")


def _fuzz_once(memory: Any, call: Any, a: Any, b: Any, c: Any) -> None:
    """One call with arbitrary arguments: it works or raises a MemoryHierarchyError, nothing else."""
    name, function = call
    FUZZED["calls"] += 1
    try:
        function(memory, a, b, c)
        FUZZED["accepted"] += 1
    except MemoryHierarchyError as exc:
        FUZZED["refused"] += 1
        assert len(str(exc)) < 5000, f"{name}: error message of {len(str(exc))} characters"
    except Exception as exc:  # pragma: no cover - reported with the input that caused it
        raise AssertionError(f"{name}({a!r:.200}, {b!r:.200}, {c!r:.200}) raised {type(exc).__name__}: {exc}") from exc


@pytest.fixture(scope="module")
def fuzz_memory(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("fuzz") / "memory_data"
    memory = _user(folder, hashing())
    memory.episodic.add("a stable memory that fuzzing must not lose")
    yield memory
    assert next(i.content for i in memory.episodic.get_timeline()) == "a stable memory that fuzzing must not lose"
    assert_indexes_agree(read_sqlite(folder), memory.context.runtime.run(vector_ids(memory.context)))
    memory.close()


FUZZ_CHECKS = list(HealthCheck)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=FUZZ_CHECKS)
@given(call=st.sampled_from(CALLS), a=anything, b=anything, c=anything)
def test_fuzz_public_api(fuzz_memory: Any, call: Any, a: Any, b: Any, c: Any) -> None:
    _fuzz_once(fuzz_memory, call, a, b, c)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=FUZZ_CHECKS)
@given(call=st.sampled_from(CALLS), a=anything, b=anything, c=anything)
def test_fuzz_public_api_long(fuzz_memory: Any, call: Any, a: Any, b: Any, c: Any) -> None:
    _fuzz_once(fuzz_memory, call, a, b, c)


def test_unindexable_vectors_are_refused_before_commit(tmp_path: Path) -> None:
    """A caller-supplied vector the index could never take (all-zero, NaN, wrong dimension, wrong shape)
    is refused before anything is written; otherwise it would block the outbox and every later open."""
    import numpy as np

    from llama_index_memory_hierarchy.errors import EmbeddingDimensionError
    from llama_index_memory_hierarchy.types import MemoryItem

    folder = tmp_path / "memory_data"
    memory = _user(folder, hashing())
    runtime = memory.context.runtime
    try:
        memory.episodic.add("a good memory")
        for bad in (np.zeros(384, "f4"), np.full(384, np.nan, "f4"), np.ones(10, "f4"), np.ones((2, 384), "f4")):
            item = MemoryItem(content="supplied vector", user_id=memory.user_id)
            with pytest.raises((MemoryValidationError, EmbeddingDimensionError)):
                runtime.run(memory.episodic.aadd_items([item], embeddings=[bad]))
            memory.episodic.add("still writable")
        assert len(memory.episodic.get_timeline()) == 5
        assert_indexes_agree(read_sqlite(folder), runtime.run(vector_ids(memory.context)))
    finally:
        memory.close()
    again = HierarchicalMemory.from_defaults(user_id=memory.user_id, persist_dir=str(folder), embed_model=hashing())
    with again:  # and it opens again
        assert again.episodic.retrieve("good memory", limit=1)
