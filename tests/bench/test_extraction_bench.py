"""bench/extraction.py runs the issue-32 set through the LLM path (a scripted LLM stands in for a hosted one)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests" / "extraction")]

from extraction import ISSUE32, SETS, run  # noqa: E402
from extraction_set import load  # noqa: E402
from test_extraction import ScriptedLLM  # noqa: E402

from llama_index_memory_hierarchy.extraction import LLMExtractor  # noqa: E402
from llama_index_memory_hierarchy.extraction.relations import USER_ENTITY  # noqa: E402


def script_of(folder: Path) -> dict[str, dict]:
    """The LLM's replies: each sentence's expected facts, the user written as a client would ("the user")."""
    script = {}
    for language in ("en", "zh"):
        user = "the user" if language == "en" else "用户"
        rows = [line.split("\t") for line in (folder / f"{language}.tsv").read_text("utf-8").splitlines()]
        texts = {row[1]: row[2] if len(row) > 2 else "" for row in rows if row and not row[0].startswith("#")}
        for text in sorted(texts, key=len, reverse=True):
            triplets = []
            for fact in filter(str.strip, texts[text].split(";")):
                subject, predicate, obj = (part.strip() for part in fact.split("|"))
                triplets.append(
                    {"subject": user if subject == USER_ENTITY else subject, "predicate": predicate,
                     "object": user if obj == USER_ENTITY else obj}
                )  # fmt: skip
            script[f"Text:\n{text}"] = {"triplets": triplets}
    return script


async def test_the_bench_scores_the_llm_path_per_language_and_half(capsys) -> None:
    chosen = [s for s in SETS if s[0] == "issue32"]
    script = {k: v for _, _, folder in chosen for k, v in script_of(folder).items()}
    figures = await run("llm", LLMExtractor(ScriptedLLM(script=script)), False, chosen)
    printed = capsys.readouterr().out
    assert {(s, lang, part) for s, lang, part in figures} == {
        ("issue32", lang, part) for lang in ("en", "zh") for part in ("dev", "holdout", "fresh")
    }
    assert all(precision >= 0.95 and recall >= 0.9 for precision, recall in figures.values()), figures
    assert "nofact" in printed and "byname" in printed
    assert len(load("en", ISSUE32 / "holdout")) >= 75
