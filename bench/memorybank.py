"""Retrieval quality on MemoryBank, Chinese and English side by side, with the systems of ``bench/locomo.py``.

Usage (from the repository root)::

    python bench/memorybank.py                               # all systems, both languages, k = 1,5,10
    python bench/memorybank.py --systems bm25,episodic --langs zh
    python bench/memorybank.py --smoke                       # CI: 2 users, 3 days, 4 questions each

Each user's ten days of chat are one conversation (one memory per user or assistant turn,
the day as event time); each probing question ranks that user's turns and is scored
against its evidence turns: recall@k (an ``evidence_groups`` group counts once any of its
turns is found), hit@k and MRR, plus ingestion throughput and query latency (p50/p95).

Systems: ``bm25`` (bm25s over the library's keyword tokens, so Chinese is segmented by
jieba; English stopwords removed), ``dense`` (cosine of the bundled MiniLM embeddings),
``pipeline`` (the recipe of ``ranking/pipeline.py`` as ``bench/locomo.py`` runs it),
``episodic`` (the library's episodic tier alone: ``bench/locomo.py``'s ``HierarchySystem``)
and ``hierarchy`` (the whole hierarchy as ``bench/locomo.py``'s ``WholeHierarchySystem`` runs it: each
day consolidated offline, then ``HierarchicalMemory.as_retriever``; k memories shown; a derived memory counts for
the source turns it reproduces at least half the content words of, and, in a second row, for every source id).

The data is read by path from ``../shared/benchmarks/memorybank-dev/`` and never copied.
Nothing a system does reads a question's evidence or answer.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from embed_cache import CachedEmbedder  # noqa: E402
from locomo import (  # noqa: E402
    BY_SOURCES,
    machine,
    make_system,
    render_table,
    sample_questions,
    share_library_model,
    timing,
)
from locomo_data import Derived, Slot, Turn  # noqa: E402
from locomo_retrievers import _BM25, Retriever, top_n  # noqa: E402
from memorybank_data import LANGUAGES, MemoryBankConversation, load_memorybank, score_groups  # noqa: E402

logger = logging.getLogger("bench.memorybank")

DEFAULT_DATA = HERE.parent.parent / "shared" / "benchmarks" / "memorybank-dev"
ALL_SYSTEMS = ("bm25", "dense", "pipeline", "episodic", "hierarchy")


class KeywordBM25:
    """BM25 (bm25s) over the library's keyword tokens: jieba words for Chinese, English stopwords removed.

    bm25s's own tokenizer keeps a whole run of Chinese characters as one token, which
    makes plain BM25 meaningless for Chinese; this baseline segments both languages alike.
    """

    name = "bm25"

    def __init__(self, depth: int = 100) -> None:
        from bm25s.stopwords import STOPWORDS_EN

        from llama_index_memory_hierarchy.text import keyword_tokens

        self.depth = depth
        self._stop = frozenset(STOPWORDS_EN)
        self._tokens = keyword_tokens

    def _terms(self, text: str) -> list[str]:
        return [t for t in self._tokens(text) if t not in self._stop]

    def index(self, turns: Sequence[Turn]) -> None:
        self._ids = [t.dia_id for t in turns]
        self._model = _BM25([self._terms(f"{t.speaker}: {t.text}") for t in turns])

    def search(self, query: str, k: int) -> list[str]:
        return [self._ids[i] for i in top_n(self._model.scores(self._terms(query)), min(k, self.depth))]


#: Cross-language runs: memories in the first language, questions in the second.
CROSS = {"zh<-en": ("zh", "en"), "en<-zh": ("en", "zh")}


def cross_language(data: dict[str, list[MemoryBankConversation]]) -> dict[str, list[MemoryBankConversation]]:
    """Each user's memories in one language and questions in the other (the i-th labels of both are one question).

    A question keeps the evidence of its memories' language (the two histories are parallel).
    """
    from dataclasses import replace

    if set(data) != {"zh", "en"}:
        raise SystemExit("--cross needs both languages (--langs zh,en)")
    out = {}
    for name, (memories, questions) in CROSS.items():
        convs = []
        for conv, other in zip(data[memories], data[questions], strict=True):
            qa = [replace(q, question=o.question) for q, o in zip(conv.qa, other.qa, strict=True)]
            convs.append(replace(conv, qa=qa, language=name))
        out[name] = convs
    return out


def build_system(name: str, embedder: CachedEmbedder, workdir: Path) -> Retriever:
    """A MemoryBank system by name: the keyword baseline and the hierarchy here, the rest from ``bench/locomo.py``."""
    if name == "bm25":
        return KeywordBM25()
    if name in ("dense", "pipeline", "episodic", "hierarchy"):
        return make_system(name, embedder, workdir)
    raise SystemExit(f"unknown system {name!r}; choose from {', '.join(ALL_SYSTEMS)}")


def run_system(
    system: Retriever,
    conversations: Sequence[MemoryBankConversation],
    ks: Sequence[int],
    questions_per_user: int | None = None,
) -> dict[str, Any]:
    """Index each user's turns, ask their questions, score by evidence group; timings included."""
    depth = max(ks)
    results: list[tuple[tuple[tuple[str, ...], ...], list[Slot]]] = []
    index_seconds = 0.0
    turns_indexed = 0
    latencies: list[float] = []
    for conv in conversations:
        start = time.perf_counter()
        system.index(conv.turns)
        index_seconds += time.perf_counter() - start
        turns_indexed += len(conv.turns)
        groups = dict(zip((id(q) for q in conv.qa), conv.groups, strict=True))
        for qa in sample_questions(conv.qa, questions_per_user):
            start = time.perf_counter()
            ranked = system.search(qa.question, depth)
            latencies.append(time.perf_counter() - start)
            results.append((groups[id(qa)], ranked))
    close: Callable[[], None] | None = getattr(system, "close", None)
    if close is not None:
        close()
    scores = score_groups(results, ks)
    if any(isinstance(slot, Derived) for _, ranked in results for slot in ranked):
        scores[BY_SOURCES] = score_groups(results, ks, by_sources=True)
    scores["_timing"] = timing(turns_indexed, index_seconds, latencies)
    return scores


def table_rows(
    results: dict[str, dict[str, dict[str, Any]]], langs: Sequence[str], ks: Sequence[int]
) -> tuple[list[str], list[list[str]]]:
    """Header and rows: per language recall@k, hit@5-ish (first k > 1), MRR, ingest and latency."""
    hit_k = next((k for k in ks if k > 1), ks[0])
    header = ["system"]
    for lang in langs:
        header += [f"{lang} R@" + "/".join(map(str, ks)), f"{lang} hit@{hit_k}", f"{lang} MRR"]
    for lang in langs:
        header += [f"{lang} ingest turns/s", f"{lang} query p50/p95 ms"]
    rows = []
    for name, by_lang in results.items():
        row = [name]
        for lang in langs:
            overall = by_lang.get(lang, {}).get("overall")
            if overall is None:
                row += ["-", "-", "-"]
                continue
            row += [
                "/".join(f"{overall[f'recall@{k}']:.3f}" for k in ks),
                f"{overall[f'hit@{hit_k}']:.3f}",
                f"{overall['mrr']:.3f}",
            ]
        for lang in langs:
            timing = by_lang.get(lang, {}).get("_timing", {})
            row += [
                f"{timing.get('ingest_turns_per_s', 0):.0f}",
                f"{timing.get('query_p50_ms', 0):.1f}/{timing.get('query_p95_ms', 0):.1f}",
            ]
        rows.append(row)
    return header, rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="dataset folder (default: %(default)s)")
    parser.add_argument("--langs", default="zh,en", help="comma-separated: zh, en (default: %(default)s)")
    parser.add_argument("--users", type=int, default=None, help="only the first N users")
    parser.add_argument("--days", type=int, default=None, help="only the first N days of each user")
    parser.add_argument("--questions", type=int, default=None, help="only N questions per user, evenly spread")
    parser.add_argument("--k", default="1,5,10", help="cut-offs, comma-separated (default: %(default)s)")
    parser.add_argument("--systems", default=",".join(ALL_SYSTEMS), help="comma-separated: %(default)s")
    parser.add_argument(
        "--model", default=None, help="embedding of every system: a library embed_model name (default: the library's)"
    )
    parser.add_argument(
        "--cross", action="store_true", help="mixed languages: ask each user's questions in the other language"
    )
    parser.add_argument("--smoke", action="store_true", help="CI smoke run: 2 users, 3 days, 4 questions each")
    parser.add_argument("--no-cache", action="store_true", help="embed without the on-disk cache (honest timings)")
    parser.add_argument("--json", type=Path, default=None, help="write all figures to this JSON file")
    parser.add_argument("--plain", action="store_true", help="plain-text table instead of rich")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    if args.smoke:
        args.users = args.users or 2
        args.days = args.days or 3
        args.questions = args.questions or 4
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    if not ks or ks[0] < 1:
        parser.error("--k needs positive integers")
    langs = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
    if unknown := [lang for lang in langs if lang not in LANGUAGES]:
        parser.error(f"unknown language(s) {unknown}; choose from {', '.join(LANGUAGES)}")
    if not args.data.is_dir():
        parser.error(f"MemoryBank data not found at {args.data} (see the dataset's SOURCE.md; pass --data)")
    data = {lang: load_memorybank(args.data, lang, args.users, args.days) for lang in langs}
    if args.cross:
        data, langs = cross_language(data), list(CROSS)
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    embedder = CachedEmbedder(use_cache=not args.no_cache, library_model=args.model or "default")
    for lang, convs in data.items():
        n_questions = sum(len(sample_questions(c.qa, args.questions)) for c in convs)
        turns = sum(len(c.turns) for c in convs)
        print(f"MemoryBank {lang}: {len(convs)} users, {turns} turns, {n_questions} questions")
    print(f"k={ks}\n")

    if {"episodic", "hierarchy"} & set(names):
        share_library_model(args.model or "default")
    results: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="lmh-memorybank-") as workdir:
        for name in names:
            for lang in langs:
                system = build_system(name, embedder, Path(workdir) / name / lang)
                results.setdefault(name, {})[lang] = run_system(system, data[lang], ks, args.questions)
    shown = dict(results)
    for name, by_lang in results.items():  # a second row where derived memories count for every source id
        if any(BY_SOURCES in scores for scores in by_lang.values()):
            shown[f"{name} (derived: every source id)"] = {
                lang: scores.get(BY_SOURCES, {}) | {"_timing": scores.get("_timing", {})}
                for lang, scores in by_lang.items()
            }
    render_table("MemoryBank retrieval (recall@k by evidence group)", *table_rows(shown, langs, ks), plain=args.plain)

    if args.json:
        payload = {
            "data": str(args.data),
            "users": {lang: [c.sample_id for c in convs] for lang, convs in data.items()},
            "k": ks,
            "embeddings_cached": not args.no_cache,
            "model": args.model or "default",
            "machine": machine(),
            "systems": results,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
