"""The LoCoMo benchmark's loader, metrics and command line, on a tiny synthetic file in its layout.

The real LoCoMo data is never copied here (licence); these tests write a two-session
conversation of their own and run ``bench/locomo.py`` on it end to end.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import locomo  # noqa: E402
from locomo_data import (  # noqa: E402
    Derived,
    hit_at,
    load_locomo,
    normalise_evidence,
    parse_session_date,
    recall_at,
    reciprocal_rank,
    reproduces,
    score_rankings,
)


def _sample() -> dict:
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob! I went hiking in the Alps yesterday."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Wow! What else is new?"},
                {
                    "speaker": "Ann",
                    "dia_id": "D1:3",
                    "text": "I adopted a puppy called Biscuit.",
                    "blip_caption": "a photo of a small brown dog",
                    "img_url": ["http://example.invalid/dog.jpg"],
                    "query": "puppy",
                },
            ],
            "session_2_date_time": "10:02 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "I started learning the violin last week."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Biscuit chewed my running shoes today."},
            ],
            "session_3_date_time": "9:00 am on 1 July, 2023",
            "session_3": [],
        },
        "qa": [
            {"question": "Where did Ann go hiking?", "answer": "the Alps", "evidence": ["D1:1"], "category": 4},
            {"question": "When did Bob start the violin?", "answer": "June 2023", "evidence": ["D2:01"], "category": 2},
            {
                "question": "What is the name of Ann's dog?",
                "answer": "Biscuit",
                "evidence": ["D1:3; D2:2"],
                "category": 1,
            },
            {"question": "What does Ann's dog chew?", "answer": "shoes", "evidence": ["D:2:2", "D9:9"], "category": 3},
            {"question": "What did Bob adopt?", "adversarial_answer": "a puppy", "evidence": ["D1:3"], "category": 5},
            {"question": "What is unknowable?", "answer": "x", "evidence": ["D"], "category": 4},
        ],
    }


@pytest.fixture
def data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LMH_BENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "locomo-mini.json"
    path.write_text(json.dumps([_sample()]))
    return path


def test_parse_session_date() -> None:
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_date("12:19 am on 4 January, 2024") == datetime(2024, 1, 4, 0, 19, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_session_date("sometime")


def test_normalise_evidence_repairs_and_drops() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    kept, dropped = normalise_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D", "D99:1", "D8:6"], known)
    assert kept == ["D8:6", "D9:17", "D11:26", "D30:5"]
    assert dropped == ["D", "D99:1"]


def test_loader(data_file: Path) -> None:
    (conv,) = load_locomo(data_file)
    assert conv.speakers == ("Ann", "Bob")
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conv.turns[2].text == "I adopted a puppy called Biscuit. [shares an image: a photo of a small brown dog]"
    assert conv.turns[3].session == 2 and conv.turns[3].session_date.month == 6
    assert conv.turns[3].session_date.tzinfo is UTC
    evidence = [qa.evidence for qa in conv.qa]
    assert evidence == [("D1:1",), ("D2:1",), ("D1:3", "D2:2"), ("D2:2",), ("D1:3",), ()]
    assert conv.qa[4].answer == "a puppy"
    assert conv.dropped_evidence == ["D9:9", "D"]


def test_metrics() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, ["b", "z"], 2) == 0.5
    assert hit_at(ranked, ["d"], 3) == 0.0 and hit_at(ranked, ["d"], 4) == 1.0
    assert reciprocal_rank(ranked, ["c", "d"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, ["z"]) == 0.0
    # a derived memory counts for the turns it reproduces; with by_sources for every turn it comes from
    derived = ["a", Derived(shown=("c",), sources=("b", "c")), "d"]
    assert recall_at(derived, ["c", "d"], 2) == 0.5 and hit_at(derived, ["c"], 2) == 1.0
    assert hit_at(derived, ["b"], 2) == 0.0 and hit_at(derived, ["b"], 2, by_sources=True) == 1.0
    assert reciprocal_rank(derived, ["c"]) == pytest.approx(1 / 2)


def test_a_derived_memory_counts_for_a_turn_whose_content_words_it_reproduces() -> None:
    turn = "I finally repaired the old sailboat with my uncle last weekend."
    assert reproduces("Dana repaired the old sailboat with her uncle.", turn)
    assert not reproduces("Dana spent the weekend with family.", turn)
    assert reproduces("用户和叔叔修好了旧帆船", "我和叔叔修好了旧帆船")
    assert not reproduces("anything", "ok!")  # a turn without content words is never reproduced


def test_score_rankings_by_category(data_file: Path) -> None:
    (conv,) = load_locomo(data_file)
    perfect = [(qa, list(qa.evidence)) for qa in conv.qa]
    scores = score_rankings(perfect, [1, 5])
    assert scores["overall"]["recall@5"] == 1.0
    assert scores["overall"]["n"] == 4  # categories 1-4 with evidence
    assert scores["5"]["n"] == 1 and "5" in scores
    assert scores["1"]["recall@1"] == 0.5  # two evidence turns, one slot
    assert scores["_meta"]["n_skipped"] == 1


def test_command_line_end_to_end(data_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "result.json"
    code = locomo.main(
        [
            "--data",
            str(data_file),
            "--systems",
            "bm25,fusion,pipeline,episodic,hierarchy",
            "--k",
            "1,3",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "pipeline" in printed and "hierarchy" in printed
    payload = json.loads(out.read_text())
    assert payload["k"] == [1, 3] and payload["questions"] == 6
    for name in ("bm25", "fusion", "pipeline", "episodic", "hierarchy"):
        system = payload["systems"][name]
        assert 0.0 <= system["overall"]["recall@3"] <= 1.0
        assert system["_timing"]["questions"] == 6
    # The easy single-hop question is answered by the pipeline.
    assert payload["systems"]["pipeline"]["4"]["hit@3"] == 1.0


def test_ablation_smoke(data_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "ablation.json"
    assert (
        locomo.main(["--data", str(data_file), "--systems", "bm25", "--ablation", "--plain", "--json", str(out)]) == 0
    )
    ablation = json.loads(out.read_text())["ablation"]
    assert set(ablation) >= {c.name for c in locomo.LADDER}


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        locomo.main(["--data", str(tmp_path / "absent.json")])
