"""Retrieval quality on LoCoMo: the memory hierarchy against BM25, dense and fused baselines.

Usage (from the repository root)::

    python bench/locomo.py                                  # all systems, k = 5,10
    python bench/locomo.py --systems bm25,fusion,pipeline --json out.json
    python bench/locomo.py --ablation                       # one row per technique
    python bench/locomo.py --smoke                          # CI: 2 conversations, few questions

For each question, every system ranks the turns of its conversation; we score
recall@k (share of the evidence turns in the top k), hit@k and MRR, per category
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; "overall" = 1-4; 5,
adversarial, apart), plus ingestion throughput and query latency (p50/p95).

The data file is read by path and never copied (CC BY-NC 4.0). Nothing a system does
reads a question's category, evidence or answer: see ``bench/locomo_retrievers.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO)]

from embed_cache import CachedEmbedder, as_llama_embedding  # noqa: E402
from locomo_data import (  # noqa: E402
    CATEGORY_NAMES,
    QA,
    Conversation,
    Derived,
    Slot,
    Turn,
    load_locomo,
    reproduces,
    score_rankings,
)
from locomo_retrievers import (  # noqa: E402
    BM25Baseline,
    DenseBaseline,
    FusionBaseline,
    PipelineConfig,
    PipelineRetriever,
    Retriever,
)

logger = logging.getLogger("bench.locomo")

DEFAULT_DATA = REPO.parent / "shared" / "benchmarks" / "locomo-dev" / "locomo-dev.json"
ALL_SYSTEMS = ("bm25", "dense", "fusion", "pipeline", "episodic", "hierarchy")

#: The pipeline recipe measured as "pipeline" (see docs/benchmarks.md).
BEST = PipelineConfig(name="pipeline")

#: Cumulative ladder from a plain hybrid to the full pipeline: what each technique adds.
LADDER: list[PipelineConfig] = [
    BEST.but(
        "L0 bm25+dense, rrf",
        stemmer="none",
        query_stopwords=False,
        context_before=0,
        fusion="rrf",
        entity=0.0,
        time=0.0,
        temporal=0.0,
    ),
    BEST.but(
        "L1 + stemming, question-word removal", context_before=0, fusion="rrf", entity=0.0, time=0.0, temporal=0.0
    ),
    BEST.but("L2 + 2 previous turns in keyword text", fusion="rrf", entity=0.0, time=0.0, temporal=0.0),
    BEST.but("L3 + score fusion (not rrf)", entity=0.0, time=0.0, temporal=0.0),
    BEST.but("L4 + speaker/entity prior", time=0.0, temporal=0.0),
    BEST.but("L5 + time hints in the question", temporal=0.0),
    BEST.but("L6 + 'when?' intent prior (= pipeline)"),
]

#: One change at a time from the full pipeline.
VARIANTS: list[PipelineConfig] = [
    BEST.but("keyword search by SQLite FTS5 (as the record store)", keyword_backend="fts5"),
    BEST.but("- stemming", stemmer="none"),
    BEST.but("snowball stemmer (PyStemmer)", stemmer="snowball"),
    BEST.but("- question-word removal", query_stopwords=False),
    BEST.but("- context (turn alone)", context_before=0),
    BEST.but("context: 1 before", context_before=1),
    BEST.but("context: 1 before, 1 after", context_before=1, context_after=1),
    BEST.but("context: 2 before, 1 after", context_before=2, context_after=1),
    BEST.but("- date in keyword text", date_in_text=False),
    BEST.but("- speaker in text", speaker_in_text=False),
    BEST.but("- dense", w_dense_turn=0.0),
    BEST.but("- keyword", w_bm25_context=0.0),
    BEST.but("dense weight 0.5", w_dense_turn=0.5),
    BEST.but("+ dense over context (1 before) 0.5", w_dense_context=0.5),
    BEST.but("+ keyword over turn alone 0.3", w_bm25_turn=0.3),
    BEST.but("rrf instead of score fusion", fusion="rrf"),
    BEST.but("- entity prior", entity=0.0),
    BEST.but("entity prior 0.5", entity=0.5),
    BEST.but("- time-hint prior", time=0.0),
    BEST.but("- 'when?' prior", temporal=0.0),
    BEST.but("+ session-level boost 0.2", session_boost=0.2),
    BEST.but("+ neighbour smoothing 0.3", neighbour_smoothing=0.3),
    BEST.but("candidates per signal 100", depth=100),
    BEST.but("candidates per signal 20", depth=20),
]


# ---------------------------------------------------------------------------- the library system
class HierarchySystem:
    """The library's episodic tier alone: one fresh ``HierarchicalMemory`` per conversation, turns as episodic memories.

    Each turn is stored with its session date as event time and ``speaker``/``dia_id`` (and
    ``role``, user or assistant, in a chat with an assistant, as ``HierarchicalMemory.put`` records it)
    in metadata (content: the turn's text, with the image caption). Results are mapped
    back to turns through ``dia_id``.
    """

    name = "episodic"

    def __init__(self, root: Path, embedder: CachedEmbedder | None = None) -> None:
        self.root = root
        self._memory: Any = None
        self._count = 0
        # with the benchmark's cache, the library embeds through it (same model, same vectors)
        self._embed_model = as_llama_embedding(embedder) if embedder is not None and embedder.use_cache else None

    def index(self, turns: Sequence[Turn]) -> None:
        from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
        from llama_index_memory_hierarchy.types import MemoryItem

        self.close()
        self._count += 1
        user = f"{self.name}-{self._count}"
        self._memory = HierarchicalMemory.from_defaults(
            user_id=user, session_id="locomo", persist_dir=str(self.root / user), embed_model=self._embed_model
        )
        items = [
            MemoryItem.create(
                content=t.text,
                user_id=user,
                session_id=f"s{t.session}",
                timestamp=t.session_date,
                metadata={"speaker": t.speaker, "dia_id": t.dia_id} | ({"role": t.role} if t.role else {}),
            )
            for t in turns
        ]
        self._memory.episodic.add_many(items)

    def search(self, query: str, k: int) -> list[Slot]:
        items = self._memory.episodic.retrieve(query, limit=k)
        return [str(item.metadata.get("dia_id")) for item in items]

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None


class WholeHierarchySystem(HierarchySystem):
    """The whole hierarchy, as a new user would run it: the turns as episodic memories, each session
    consolidated offline (``manager.consolidate(session_id=...)``: facts, summaries), then searched
    through ``memory.as_retriever(similarity_top_k=k)``: k is the number of memories shown. A derived memory
    counts for the turns of its ``source_ids`` whose content words it reproduces at least half of
    (``locomo_data.reproduces``); the scores counted for every id of its ``source_ids`` come beside them."""

    name = "hierarchy"

    def index(self, turns: Sequence[Turn]) -> None:
        super().index(turns)
        for session in dict.fromkeys(f"s{t.session}" for t in turns):
            self._memory.manager.consolidate(session_id=session)
        self._dia = {
            item.id: (str(item.metadata.get("dia_id")), item.content)
            for item in self._memory.episodic.get_timeline()
            if item.metadata.get("dia_id")
        }

    def search(self, query: str, k: int) -> list[Slot]:
        nodes = self._memory.as_retriever(similarity_top_k=k).retrieve(query)
        return [self.slot(node.node.metadata, node.node.get_content()) for node in nodes]

    def slot(self, metadata: dict[str, Any], text: str) -> Slot:
        """What one memory shown stands for: its turn, or the source turns a derived memory reproduces."""
        if metadata.get("dia_id"):
            return str(metadata["dia_id"])
        sources = [self._dia[s] for s in metadata.get("source_ids") or [] if s in self._dia]
        shown = tuple(dia for dia, turn in sources if reproduces(text, turn))
        return Derived(shown=shown, sources=tuple(dia for dia, _ in sources))


def share_library_model(name: str) -> None:
    """Load the library's embedding ``name`` once for every ``HierarchicalMemory`` (via ``Settings.embed_model``)."""
    from llama_index.core import Settings

    from llama_index_memory_hierarchy.embeddings import resolve_embed_model

    Settings.embed_model = resolve_embed_model(name)


# ---------------------------------------------------------------------------- running
def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def sample_questions(qa: Sequence[QA], limit: int | None) -> list[QA]:
    """All questions, or ``limit`` of them spread evenly over the list (so every category shows up)."""
    if limit is None or limit >= len(qa):
        return list(qa)
    step = len(qa) / limit
    return [qa[int(i * step)] for i in range(limit)]


def run_system(
    system: Retriever,
    conversations: Sequence[Conversation],
    ks: Sequence[int],
    questions_per_conversation: int | None = None,
) -> dict[str, Any]:
    """Index each conversation, ask its questions, and score; timings included."""
    depth = max(ks)
    results: list[tuple[QA, list[Slot]]] = []
    index_seconds = 0.0
    turns_indexed = 0
    latencies: list[float] = []
    for conv in conversations:
        start = time.perf_counter()
        system.index(conv.turns)
        index_seconds += time.perf_counter() - start
        turns_indexed += len(conv.turns)
        qa_items = sample_questions(conv.qa, questions_per_conversation)
        for qa in qa_items:
            start = time.perf_counter()
            ranked = system.search(qa.question, depth)
            latencies.append(time.perf_counter() - start)
            results.append((qa, ranked))
    close: Callable[[], None] | None = getattr(system, "close", None)
    if close is not None:
        close()
    scores = score_rankings(results, ks)
    if any(isinstance(slot, Derived) for _, ranked in results for slot in ranked):
        scores[BY_SOURCES] = score_rankings(results, ks, by_sources=True)
    scores["_timing"] = timing(turns_indexed, index_seconds, latencies)
    return scores


#: Key of a system's scores with a derived memory counted for every turn of its ``source_ids``.
BY_SOURCES = "_by_sources"


def with_lenient_rows(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The results plus, under each system that showed derived memories, a row of its scores counted by sources."""
    out: dict[str, dict[str, Any]] = {}
    for name, scores in results.items():
        out[name] = scores
        if BY_SOURCES in scores:
            out[f"{name} (derived: every source id)"] = scores[BY_SOURCES]
    return out


def timing(turns_indexed: int, index_seconds: float, latencies: Sequence[float]) -> dict[str, float]:
    """Ingest rate and query latency percentiles of one system's run, as the tables print them."""
    return {
        "turns": float(turns_indexed),
        "ingest_turns_per_s": turns_indexed / index_seconds if index_seconds else 0.0,
        "query_p50_ms": percentile(latencies, 50) * 1000,
        "query_p95_ms": percentile(latencies, 95) * 1000,
        "questions": float(len(latencies)),
    }


def make_system(name: str, embedder: CachedEmbedder, workdir: Path) -> Retriever:
    if name == "bm25":
        return BM25Baseline()
    if name == "dense":
        return DenseBaseline(embedder)
    if name == "fusion":
        return FusionBaseline(embedder)
    if name == "pipeline":
        return PipelineRetriever(BEST, embedder)
    if name == "episodic":
        return HierarchySystem(workdir, embedder)
    if name == "hierarchy":
        return WholeHierarchySystem(workdir, embedder)
    raise SystemExit(f"unknown system {name!r}; choose from {', '.join(ALL_SYSTEMS)}")


# ---------------------------------------------------------------------------- output
COLUMNS = ("overall", "1", "2", "3", "4", "5")


def table_rows(results: dict[str, dict[str, Any]], ks: Sequence[int]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: recall@k per category, hit@k and MRR overall, throughput, latency."""
    header = ["system"]
    for column in COLUMNS:
        label = "overall(1-4)" if column == "overall" else f"{column} {CATEGORY_NAMES[int(column)]}"
        header.append(f"{label} R@" + "/".join(str(k) for k in ks))
    header += [f"hit@{ks[0]}", "MRR", "ingest turns/s", "query p50/p95 ms"]
    rows = []
    for name, res in results.items():
        row = [name]
        for column in COLUMNS:
            cell = res.get(column)
            row.append("-" if cell is None else "/".join(f"{cell[f'recall@{k}']:.3f}" for k in ks))
        overall = res.get("overall", {})
        timing = res.get("_timing", {})
        row += [
            f"{overall.get(f'hit@{ks[0]}', 0):.3f}",
            f"{overall.get('mrr', 0):.3f}",
            f"{timing.get('ingest_turns_per_s', 0):.0f}",
            f"{timing.get('query_p50_ms', 0):.1f}/{timing.get('query_p95_ms', 0):.1f}",
        ]
        rows.append(row)
    return header, rows


def print_table(title: str, results: dict[str, dict[str, Any]], ks: Sequence[int], plain: bool = False) -> None:
    render_table(title, *table_rows(results, ks), plain=plain)


def render_table(title: str, header: list[str], rows: list[list[str]], plain: bool = False) -> None:
    """Print a table with rich (plain text with ``plain`` or without rich); the first column is left-aligned."""
    try:
        if plain:
            raise ImportError
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for column in header:
            table.add_column(column, justify="left" if column == "system" else "right")
        for row in rows:
            table.add_row(*row)
        Console(width=max(160, sum(len(h) for h in header) + 3 * len(header))).print(table)
    except ImportError:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        print(title)
        print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        print("-+-".join("-" * w for w in widths))
        for row in rows:
            print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print()


def has_module(name: str) -> bool:
    """Whether an optional module can be imported."""
    import importlib.util

    return importlib.util.find_spec(name) is not None


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: %(default)s)")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--questions", type=int, default=None, help="only N questions per conversation, evenly spread")
    parser.add_argument("--k", default="5,10", help="cut-offs, comma-separated (default: %(default)s)")
    parser.add_argument("--systems", default=",".join(ALL_SYSTEMS), help="comma-separated: %(default)s")
    parser.add_argument(
        "--model", default=None, help="embedding of every system: a library embed_model name (default: the library's)"
    )
    parser.add_argument("--ablation", action="store_true", help="also run the pipeline ablation (ladder + variants)")
    parser.add_argument("--smoke", action="store_true", help="CI smoke run: 2 conversations, 10 questions each")
    parser.add_argument("--no-cache", action="store_true", help="embed without the on-disk cache (honest timings)")
    parser.add_argument("--json", type=Path, default=None, help="write all figures to this JSON file")
    parser.add_argument("--plain", action="store_true", help="plain-text table instead of rich")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("bm25s", "sentence_transformers", "transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    if args.smoke:
        args.conversations = args.conversations or 2
        args.questions = args.questions or 10
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    if not ks or ks[0] < 1:
        parser.error("--k needs positive integers")
    if not args.data.exists():
        parser.error(f"LoCoMo data not found at {args.data} (see the dataset's SOURCE.md; pass --data)")
    conversations = load_locomo(args.data, args.conversations)
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    embedder = CachedEmbedder(use_cache=not args.no_cache, library_model=args.model or "default")
    n_turns = sum(len(c.turns) for c in conversations)
    n_questions = sum(len(c.qa) if args.questions is None else min(args.questions, len(c.qa)) for c in conversations)
    print(f"LoCoMo: {len(conversations)} conversations, {n_turns} turns, {n_questions} questions; k={ks}\n")

    if {"episodic", "hierarchy"} & set(names):
        share_library_model(args.model or "default")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="lmh-locomo-") as workdir:
        for name in names:
            system = make_system(name, embedder, Path(workdir))
            results[name] = run_system(system, conversations, ks, args.questions)
            logger.info("%s done", name)
    print_table("LoCoMo retrieval (recall@k per category)", with_lenient_rows(results), ks, args.plain)

    ablation: dict[str, dict[str, Any]] = {}
    if args.ablation:
        for config in [*LADDER, *VARIANTS]:
            if config.stemmer == "snowball" and not has_module("Stemmer"):
                logger.warning("skipping %r: PyStemmer is not installed", config.name)
                continue
            ablation[config.name] = run_system(PipelineRetriever(config, embedder), conversations, ks, args.questions)
        print_table("Pipeline ablation (recall@k per category)", ablation, ks, args.plain)

    if args.json:
        payload = {
            "data": str(args.data),
            "conversations": len(conversations),
            "turns": n_turns,
            "questions": n_questions,
            "k": ks,
            "embeddings_cached": not args.no_cache,
            "model": args.model or "default",
            "machine": machine(),
            "pipeline_config": asdict(BEST),
            "systems": results,
            "ablation": {
                c.name: {"config": asdict(c), "scores": ablation[c.name]}
                for c in [*LADDER, *VARIANTS]
                if c.name in ablation
            },
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
