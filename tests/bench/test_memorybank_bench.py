"""The MemoryBank benchmark's loader, group metrics and command line, on a tiny dataset of its layout.

The real MemoryBank files are never copied here; these tests write two users of their own
(one with a stray-space key, as in the English file) in both languages.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import memorybank  # noqa: E402
from memorybank_data import group_recall_at, load_memorybank, score_groups  # noqa: E402

HISTORY = {
    "cn": {
        "张三": {
            "name": "张三",
            "history": {
                "2023-04-27": [
                    {"query": "你好，我叫张三，我在学Python。", "response": "你好张三，很高兴认识你。"},
                    {"query": "我喜欢吃辣的川菜。", "response": "好的，我记住了。"},
                ],
                "2023-04-28": [{"query": "我的经理李四让我写周报。", "response": "需要我帮你列提纲吗？"}],
            },
        }
    },
    "en": {
        " Sam ": {
            "name": "Sam",
            "history": {
                "2023-04-27": [
                    {"query": "Hi, I'm Sam and I'm learning Python.", "response": "Nice to meet you, Sam."},
                    {"query": "I love spicy Sichuan food.", "response": "Noted."},
                ],
                "2023-04-28": [{"query": "My manager Lee asked me for a weekly report.", "response": "Shall I help?"}],
            },
        }
    },
}
LABELS = {
    "cn": [
        {"user": "张三", "history_key": "张三", "question": "我的经理是谁？", "evidence": ["2023-04-28#0#q"]},
        {
            "user": "张三",
            "history_key": "张三",
            "question": "我喜欢吃什么菜，你怎么回答的？",
            "evidence": [],
            "evidence_groups": [["2023-04-27#1#q"], ["2023-04-27#1#r", "2023-05-09#0#r"]],
        },
    ],
    "en": [
        {"user": "Sam", "history_key": " Sam ", "question": "Who is my manager?", "evidence": ["2023-04-28#0#q"]},
        {
            "user": "Sam",
            "history_key": " Sam ",
            "question": "What food do I like, and what did you say?",
            "evidence": [],
            "evidence_groups": [["2023-04-27#1#q"], ["2023-04-27#1#r", "2023-05-09#0#r"]],
        },
    ],
}


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    for suffix in ("cn", "en"):
        (tmp_path / f"memorybank-{suffix}.json").write_text(json.dumps(HISTORY[suffix], ensure_ascii=False))
        (tmp_path / f"labels-{suffix}.json").write_text(json.dumps(LABELS[suffix], ensure_ascii=False))
    return tmp_path


def test_loader_turns_ids_and_groups(dataset: Path) -> None:
    (zh,) = load_memorybank(dataset, "zh")
    assert [t.dia_id for t in zh.turns] == [
        "2023-04-27#0#q",
        "2023-04-27#0#r",
        "2023-04-27#1#q",
        "2023-04-27#1#r",
        "2023-04-28#0#q",
        "2023-04-28#0#r",
    ]
    assert zh.turns[0].speaker == "张三" and zh.turns[1].speaker == "AI"
    assert zh.turns[4].session == 2 and zh.turns[4].session_date.isoformat() == "2023-04-28T12:00:00+00:00"
    assert zh.groups[1] == (("2023-04-27#1#q",), ("2023-04-27#1#r",))  # the id naming no turn is dropped
    assert zh.dropped_evidence == ["2023-05-09#0#r"]
    (en,) = load_memorybank(dataset, "en")
    assert en.sample_id == "Sam" and en.speakers == ("Sam", "AI")
    (short,) = load_memorybank(dataset, "en", days=1)
    assert len(short.turns) == 4 and [q.question for q in short.qa] == ["What food do I like, and what did you say?"]
    with pytest.raises(ValueError, match="unknown language"):
        load_memorybank(dataset, "fr")


def test_group_recall() -> None:
    groups = (("a",), ("b", "c"))
    assert group_recall_at(["c", "x"], groups, 1) == 0.5
    assert group_recall_at(["x", "a", "b", "c"], groups, 3) == 1.0
    scores = score_groups([(groups, ["c", "a"]), ((), ["a"])], [1, 2])
    assert scores["overall"]["recall@1"] == 0.5 and scores["overall"]["recall@2"] == 1.0
    assert scores["overall"]["mrr"] == 1.0 and scores["_meta"]["n_skipped"] == 1.0


def test_command_line_keyword_baseline_both_languages(dataset: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "mb.json"
    assert memorybank.main(["--data", str(dataset), "--systems", "bm25", "--plain", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "zh R@1/5/10" in printed and "en R@1/5/10" in printed
    payload = json.loads(out.read_text())
    for lang in ("zh", "en"):
        overall = payload["systems"]["bm25"][lang]["overall"]
        assert overall["n"] == 2 and overall["recall@1"] > 0  # jieba-segmented keywords find the manager
