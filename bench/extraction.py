"""Precision and recall of fact extraction on the test set in ``tests/extraction`` (English and Chinese).

Usage (from the repository root)::

    python bench/extraction.py                 # the offline extractor (spaCy / jieba)
    python bench/extraction.py --llm local     # also the bundled local LLM (slow on CPU)
    python bench/extraction.py --show-errors   # print wrong and missed facts
    python bench/extraction.py --part dev      # one part only (tune on dev, never on holdout)

Two sets per language: ``dev`` (``tests/extraction/<lang>.tsv``, looked at while the
extractor was built) and ``holdout`` (``tests/extraction/holdout/<lang>.tsv``, written
afterwards and never tuned on). A predicted fact is correct when subject, predicate and
object equal an expected one after normalisation (see ``tests/extraction/extraction_set.py``).
Each part is scored as a whole and per form (the ``kind`` column: first-person topics such as
``identity``, and the forms ``thirdperson`` "the user ...", ``byname`` (the user's own name given
in the text), ``compound``, ``negation``, ...).
Precision is what counts most: a wrong fact reaches the LLM as truth, a missed one only stays
an episodic memory.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "extraction")]

from extraction_set import HERE, LANGUAGES, load, score  # noqa: E402

from llama_index_memory_hierarchy.extraction import Extractor, LLMExtractor, OfflineExtractor  # noqa: E402

logger = logging.getLogger("bench.extraction")
SETS = (("dev", HERE), ("holdout", HERE / "holdout"))


async def run(name: str, extractor: Extractor, show_errors: bool, parts: Sequence[str]) -> None:
    for language, (part, folder) in [(lang, part) for lang in LANGUAGES for part in SETS if part[0] in parts]:
        examples = load(language, folder)
        start = time.perf_counter()
        extractions = await extractor.aextract_many([e.text for e in examples])
        seconds = time.perf_counter() - start
        result = score(examples, extractions)
        print(
            f"{name:<10} {language} {part:<8} sentences={len(examples):<4} expected={result.expected:<4} "
            f"predicted={result.predicted:<4} correct={result.correct:<4} precision={result.precision:.3f} "
            f"recall={result.recall:.3f}  ({seconds:.1f} s, {1000 * seconds / len(examples):.1f} ms/sentence)"
        )
        for kind in sorted({e.kind for e in examples}):
            chosen = [(e, x) for e, x in zip(examples, extractions, strict=True) if e.kind == kind]
            by_kind = score([e for e, _ in chosen], [x for _, x in chosen])
            print(
                f"{'':<14}{kind:<12} sentences={len(chosen):<4} expected={by_kind.expected:<4} "
                f"predicted={by_kind.predicted:<4} precision={by_kind.precision:.3f} recall={by_kind.recall:.3f}"
            )
        if show_errors:
            for text, fact in result.wrong:
                print(f"    wrong   {fact}  <- {text}")
            for text, fact in result.missed:
                print(f"    missed  {fact}  <- {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm", choices=["local"], help="also score an LLM extractor")
    parser.add_argument("--show-errors", action="store_true")
    parser.add_argument("--part", choices=[part for part, _ in SETS], action="append", help="only this part")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    parts = args.part or [part for part, _ in SETS]
    asyncio.run(run("offline", OfflineExtractor(), args.show_errors, parts))
    if args.llm == "local":
        from llama_index_memory_hierarchy.llms.local import LocalLLM

        extractor = LLMExtractor(LocalLLM.from_defaults())
        asyncio.run(run("llm-local", extractor, args.show_errors, parts))
        print(f"llm-local fell back to the offline extractor for {extractor.fallbacks} texts")


if __name__ == "__main__":
    main()
