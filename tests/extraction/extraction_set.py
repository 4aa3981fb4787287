"""The fact-extraction test set (``en.tsv``, ``zh.tsv``) and its scoring (tests and ``bench/extraction.py``).

Each line: ``kind<TAB>text<TAB>facts`` with facts ``subject|predicate|object`` separated by
``;`` (empty: the text states no fact). A predicted fact matches an expected one when the
subjects, predicates and objects are equal after normalisation (entity names as entity
resolution compares them, predicates as :func:`normalize_predicate` folds them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llama_index_memory_hierarchy.entity_resolution import normalize_name
from llama_index_memory_hierarchy.extraction import USER_ENTITY, Extraction, normalize_predicate

HERE = Path(__file__).resolve().parent
LANGUAGES = ("en", "zh")

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Example:
    kind: str
    text: str
    facts: frozenset[Triple]


def key(subject: str, predicate: str, obj: str) -> Triple:
    return (normalize_name(subject), normalize_predicate(predicate), normalize_name(obj))


def _rows(language: str, folder: Path) -> list[tuple[str, str, list[Triple]]]:
    """``(kind, text, facts as written)`` for each line of ``folder/<language>.tsv``."""
    rows = []
    for line in (folder / f"{language}.tsv").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, text, *rest = line.split("\t")
        facts = [
            tuple(part.strip() for part in fact.split("|"))
            for fact in (rest[0] if rest else "").split(";")
            if fact.strip()
        ]
        rows.append((kind, text, facts))
    return rows


def load(language: str, folder: Path = HERE) -> list[Example]:
    """The examples of one language (``folder/<language>.tsv``)."""
    return [
        Example(kind, text, frozenset(key(*fact) for fact in facts)) for kind, text, facts in _rows(language, folder)
    ]


def llm_script(languages: Sequence[str] = LANGUAGES, folder: Path = HERE) -> dict[str, dict]:
    """A scripted LLM's replies: each text's expected facts, the user named as a client names them ("the user", 用户).

    Keys are ``"Text:\\n<text>"``, found in a prompt by containment: a longer text comes first.
    """
    script = {}
    for language in languages:
        user = "the user" if language == "en" else "用户"
        expected = {text: facts for _, text, facts in _rows(language, folder)}
        for text in sorted(expected, key=len, reverse=True):
            triplets = [
                {"subject": user if subject == USER_ENTITY else subject, "predicate": predicate,
                 "object": user if obj == USER_ENTITY else obj}
                for subject, predicate, obj in expected[text]
            ]  # fmt: skip
            script[f"Text:\n{text}"] = {"triplets": triplets}
    return script


@dataclass
class Score:
    """Micro-averaged precision and recall, with the misses kept for reading."""

    predicted: int = 0
    expected: int = 0
    correct: int = 0
    wrong: list[tuple[str, Triple]] = field(default_factory=list)
    missed: list[tuple[str, Triple]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        return self.correct / self.expected if self.expected else 1.0


def score(examples: Sequence[Example], extractions: Sequence[Extraction]) -> Score:
    result = Score()
    for example, extraction in zip(examples, extractions, strict=True):
        predicted = {key(f.subject, f.predicate, f.object) for f in extraction.facts}
        result.predicted += len(predicted)
        result.expected += len(example.facts)
        result.correct += len(predicted & example.facts)
        result.wrong += [(example.text, f) for f in sorted(predicted - example.facts)]
        result.missed += [(example.text, f) for f in sorted(example.facts - predicted)]
    return result
