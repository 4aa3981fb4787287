"""bench/extraction.py runs the issue-32 set through the LLM path (a scripted LLM stands in for a hosted one)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests" / "extraction")]

from extraction import ISSUE32, SETS, run  # noqa: E402
from extraction_set import llm_script, load  # noqa: E402
from test_extraction import ScriptedLLM  # noqa: E402

from llama_index_memory_hierarchy.extraction import LLMExtractor  # noqa: E402


async def test_the_bench_scores_the_llm_path_per_language_and_half(capsys) -> None:
    chosen = [s for s in SETS if s[0] == "issue32"]
    script = {k: v for _, _, folder in chosen for k, v in llm_script(folder=folder).items()}
    figures = await run("llm", LLMExtractor(ScriptedLLM(script=script)), False, chosen)
    printed = capsys.readouterr().out
    assert {(s, lang, part) for s, lang, part in figures} == {
        ("issue32", lang, part) for lang in ("en", "zh") for part in ("dev", "holdout", "fresh")
    }
    assert all(precision >= 0.95 and recall >= 0.9 for precision, recall in figures.values()), figures
    assert "nofact" in printed and "byname" in printed
    assert len(load("en", ISSUE32 / "holdout")) >= 75
