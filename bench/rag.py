"""Knowledge-base retrieval quality: plain hybrid search vs MQE vs HyDE vs MQE+HyDE.

The document set is ``bench/rag_data/docs`` (twelve short Markdown guides written for this
benchmark) and ``bench/rag_data/questions.json`` (49 questions, each with the file and
section that answers it: 36 paraphrases and 13 "hard" ones that avoid the section's own
words, where query expansion should matter most). Every question is asked in every mode through
``KnowledgeRetriever.aretrieve_with`` (the async path: the MQE and HyDE calls run
concurrently); a hit is a retrieved chunk of the right file whose heading path ends with
the right section.

The LLM is the configured one (``Settings.llm`` set in a wrapper script) or, with none, the
offline local LLM (``llms.resolve_llm``). For each query it prints the rank of the answer,
the LLM calls, and the LLM, search and total latency; then hit@1, hit@k, MRR, LLM calls per
query and latency percentiles per mode. Results go to ``bench/results/rag.json``.

Usage: ``python bench/rag.py`` (``--limit 8`` for a quick look, ``--modes plain`` without an
LLM, ``--answers 3`` to print a few grounded answers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
DATA = HERE / "rag_data"
MODES = {"plain": (0, False), "mqe": (None, False), "hyde": (0, True), "mqe+hyde": (None, True)}

logger = logging.getLogger("bench.rag")


def rank_of(nodes: list[Any], file_name: str, section: str) -> int | None:
    """1-based rank of the first chunk of ``file_name`` whose heading path ends with ``section``."""
    for rank, node in enumerate(nodes, start=1):
        meta = node.node.metadata
        headings = meta.get("headings") or []
        if meta.get("file_name") == file_name and headings and headings[-1] == section:
            return rank
    return None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100.0 * (len(ordered) - 1))))
    return ordered[index]


async def run_mode(retriever: Any, questions: list[dict], mode: str, mqe: int, top_k: int) -> dict[str, Any]:
    mqe_queries, hyde = MODES[mode]
    mqe_queries = mqe if mqe_queries is None else mqe_queries
    rows = []
    print(f"\n== {mode} (mqe_queries={mqe_queries}, hyde={hyde}, top_k={top_k})")
    print(f"{'#':>3} {'rank':>4} {'llm':>3} {'llm ms':>8} {'search ms':>9} {'total ms':>9}  question")
    for i, q in enumerate(questions, start=1):
        started = time.perf_counter()
        nodes = await retriever.aretrieve_with(
            q["question"], mqe_queries=mqe_queries, hyde=hyde, similarity_top_k=top_k
        )
        total = (time.perf_counter() - started) * 1000.0
        trace = retriever.last_trace
        rank = rank_of(nodes, q["file"], q["section"])
        row_hard = " (hard)" if q.get("hard") else ""
        row = {
            "question": q["question"],
            "rank": rank,
            "llm_calls": trace.llm_calls,
            "llm_ms": trace.llm_seconds * 1000.0,
            "search_ms": trace.search_seconds * 1000.0,
            "total_ms": total,
            "mqe_queries": trace.mqe_queries,
            "hyde_passage": trace.hyde_passage,
            "errors": trace.expansion_errors,
        }
        rows.append(row)
        shown = "-" if rank is None else str(rank)
        print(
            f"{i:>3} {shown:>4} {trace.llm_calls:>3} {row['llm_ms']:>8.0f} {row['search_ms']:>9.0f}"
            f" {total:>9.0f}  {q['question'][:60]}{row_hard}"
        )
        logger.debug("MQE: %s | HyDE: %s", trace.mqe_queries, (trace.hyde_passage or "")[:200])
    ranks = [r["rank"] for r in rows]
    totals = [r["total_ms"] for r in rows]
    hard = [r["rank"] for r, q in zip(rows, questions, strict=True) if q.get("hard")]
    return {
        "mode": mode,
        "mqe_queries": mqe_queries,
        "hyde": hyde,
        "questions": len(rows),
        "hit@1": sum(1 for r in ranks if r == 1) / len(rows),
        f"hit@{top_k}": sum(1 for r in ranks if r is not None) / len(rows),
        "mrr": sum(1.0 / r for r in ranks if r) / len(rows),
        "hard_questions": len(hard),
        f"hard_hit@{top_k}": sum(1 for r in hard if r is not None) / len(hard) if hard else float("nan"),
        "hard_mrr": sum(1.0 / r for r in hard if r) / len(hard) if hard else float("nan"),
        "llm_calls_per_query": statistics.mean(r["llm_calls"] for r in rows),
        "llm_ms_mean": statistics.mean(r["llm_ms"] for r in rows),
        "search_ms_mean": statistics.mean(r["search_ms"] for r in rows),
        "latency_ms_p50": percentile(totals, 50),
        "latency_ms_p95": percentile(totals, 95),
        "expansion_errors": sum(len(r["errors"]) for r in rows),
        "rows": rows,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="plain,mqe,hyde,mqe+hyde", help="comma-separated: " + ", ".join(MODES))
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--mqe", type=int, default=3, help="alternative queries MQE asks for")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
    parser.add_argument("--answers", type=int, default=0, help="also print N grounded answers (MQE+HyDE engine)")
    parser.add_argument("--json", default=str(HERE / "results" / "rag.json"))
    parser.add_argument(
        "--expansion-weight", type=float, default=1.0, help="RRF weight of MQE/HyDE lists (the query's lists weigh 1)"
    )
    parser.add_argument("--verbose", action="store_true", help="print each query's MQE queries and HyDE passage")
    parser.add_argument(
        "--llm-factory",
        default=None,
        help="module:function returning a LlamaIndex LLM to use (e.g. a hosted model); default: Settings.llm or local",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logger.setLevel(logging.DEBUG if args.verbose else logging.INFO)

    from llama_index_memory_hierarchy.knowledge import KnowledgeBase
    from llama_index_memory_hierarchy.llms import describe_llm, resolve_llm

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown mode(s) {unknown}; choose from {list(MODES)}")
    questions = json.loads((DATA / "questions.json").read_text())["questions"]
    if args.limit:
        questions = questions[: args.limit]

    llm = None
    if args.llm_factory:
        import importlib

        module, _, function = args.llm_factory.partition(":")
        llm = getattr(importlib.import_module(module), function)()
    elif any(m != "plain" for m in modes) or args.answers:
        llm = resolve_llm(None)
    if llm is None and any(m != "plain" for m in modes):
        raise SystemExit("MQE and HyDE need an LLM: set Settings.llm or install the 'local' extra; or --modes plain")
    label = describe_llm(llm) if llm is not None else "none"
    print(f"LLM: {label}")
    if llm is not None:
        started = time.perf_counter()
        await llm.acomplete("Say OK.")
        print(f"LLM warm-up (model load): {time.perf_counter() - started:.1f}s")

    with tempfile.TemporaryDirectory(prefix="lmh-rag-") as folder:
        kb = KnowledgeBase.from_defaults(namespace="bench", persist_dir=folder, user_id="bench", llm=llm)
        try:
            started = time.perf_counter()
            report = await kb.aadd_documents(DATA / "docs")
            print(f"Ingest: {report.summary()} (wall {time.perf_counter() - started:.1f}s, model load included)")
            retriever = kb.as_retriever(similarity_top_k=args.top_k, expansion_weight=args.expansion_weight)
            results = [await run_mode(retriever, questions, mode, args.mqe, args.top_k) for mode in modes]
            answers = []
            if args.answers and llm is not None:
                engine = kb.as_query_engine(llm=llm, mqe_queries=args.mqe, hyde=True, similarity_top_k=args.top_k)
                print("\n== grounded answers (MQE+HyDE engine)")
                for q in questions[: args.answers]:
                    started = time.perf_counter()
                    response = await engine.aquery(q["question"])
                    seconds = time.perf_counter() - started
                    cites = [c["citation"] for c in response.metadata["citations"]][:2]
                    print(f"Q: {q['question']}\nA: {str(response).strip()[:300]}\n   sources: {cites} ({seconds:.1f}s)")
                    answers.append({"question": q["question"], "answer": str(response), "seconds": seconds})
        finally:
            kb.close()

    k = args.top_k
    print(f"\n== summary: {len(questions)} questions, {report.chunks_written} chunks, LLM {label}")
    print(
        f"{'mode':<9} {'hit@1':>6} {f'hit@{k}':>6} {'MRR':>6} {'hard@k':>6} {'hardMRR':>7} {'LLM/q':>6}"
        f" {'LLM ms':>8} {'search ms':>9}"
        f" {'p50 ms':>8} {'p95 ms':>8} {'errors':>6}"
    )
    for r in results:
        print(
            f"{r['mode']:<9} {r['hit@1']:>6.2f} {r[f'hit@{k}']:>6.2f} {r['mrr']:>6.3f} {r[f'hard_hit@{k}']:>6.2f}"
            f" {r['hard_mrr']:>7.3f} {r['llm_calls_per_query']:>6.1f}"
            f" {r['llm_ms_mean']:>8.0f} {r['search_ms_mean']:>9.0f} {r['latency_ms_p50']:>8.0f}"
            f" {r['latency_ms_p95']:>8.0f} {r['expansion_errors']:>6}"
        )
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "llm": label,
                "top_k": k,
                "mqe": args.mqe,
                "chunks": report.chunks_written,
                "modes": results,
                "answers": answers,
            },
            indent=1,
            default=str,
        )
    )
    print(f"\nwrote {out}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
