"""Offline instruction extraction (procedural memory): precision and recall per language, dev and held-out.

    python bench/procedural.py            # every turn of bench/procedural_data.py
    python bench/procedural.py --smoke    # the first 10 turns of each part
    python bench/procedural.py --json     # the figures as JSON

An extracted rule is right when a rule of the same polarity is expected for that turn and the extracted
text holds the expected word; precision = right / extracted, recall = expected rules found / expected.
The extractor (``extraction.instructions.extract_instructions``) was tuned on the dev part only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from procedural_data import EN_DEV, EN_HELD_OUT, ZH_DEV, ZH_HELD_OUT, Entry

from llama_index_memory_hierarchy.extraction.instructions import extract_instructions

TARGET_PRECISION = 0.95
TARGET_RECALL = 0.85


def score(entries: list[Entry]) -> dict[str, object]:
    """Precision, recall and the turns that went wrong."""
    extracted = right = expected = found = 0
    errors: list[dict[str, object]] = []
    for turn, wanted in entries:
        rules = extract_instructions(turn)
        extracted += len(rules)
        expected += len(wanted)
        hits = set()
        for rule in rules:
            match = next(
                (
                    n
                    for n, (polarity, word) in enumerate(wanted)
                    if n not in hits and polarity == rule.polarity and word.lower() in rule.rule.lower()
                ),
                None,
            )
            if match is None:
                errors.append({"turn": turn, "extracted": rule.rule, "polarity": rule.polarity, "expected": wanted})
            else:
                hits.add(match)
                right += 1
        found += len(hits)
        if len(hits) < len(wanted):
            missed = [w for n, w in enumerate(wanted) if n not in hits]
            errors.append({"turn": turn, "missed": missed})
    return {
        "turns": len(entries),
        "expected_rules": expected,
        "extracted": extracted,
        "precision": right / extracted if extracted else 1.0,
        "recall": found / expected if expected else 1.0,
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the first 10 turns of each part")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    parts = {
        "en dev": EN_DEV,
        "en held-out": EN_HELD_OUT,
        "zh dev": ZH_DEV,
        "zh held-out": ZH_HELD_OUT,
    }
    if args.smoke:
        parts = {name: entries[:10] for name, entries in parts.items()}
    parts["en all"] = parts["en dev"] + parts["en held-out"]
    parts["zh all"] = parts["zh dev"] + parts["zh held-out"]
    results = {name: score(entries) for name, entries in parts.items()}
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=2))
    else:
        print(f"{'part':<13}{'turns':>6}{'rules':>7}{'found':>7}{'precision':>11}{'recall':>8}")
        for name, r in results.items():
            print(
                f"{name:<13}{r['turns']:>6}{r['expected_rules']:>7}{r['extracted']:>7}"
                f"{r['precision']:>11.3f}{r['recall']:>8.3f}"
            )
        for name, r in results.items():
            if "all" in name:
                continue
            for error in r["errors"]:
                print(f"  [{name}] {json.dumps(error, ensure_ascii=False)}")
    ok = all(
        r["precision"] >= TARGET_PRECISION and r["recall"] >= TARGET_RECALL
        for name, r in results.items()
        if "all" in name
    )
    return 0 if ok or args.smoke else 1


if __name__ == "__main__":
    raise SystemExit(main())
