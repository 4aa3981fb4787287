"""The offline extractor: spaCy for English (regular expressions without it), jieba for Chinese."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from llama_index_memory_hierarchy.extraction.base import LATIN, Extraction, Extractor, with_user_name
from llama_index_memory_hierarchy.extraction.chinese import jieba_extract
from llama_index_memory_hierarchy.extraction.chinese_lexicon import posseg
from llama_index_memory_hierarchy.extraction.claims import without_claims
from llama_index_memory_hierarchy.extraction.english import load_spacy, spacy_extract
from llama_index_memory_hierarchy.extraction.regex import caps_extract
from llama_index_memory_hierarchy.language import HAN_CHAR


def is_noun(word: str, texts: Sequence[str]) -> bool:
    """Whether ``word`` is used as a noun (not a stop word) in ``texts``: spaCy for English, jieba for Chinese.

    Without spaCy an English word is never a noun: a heuristic that cannot tell "keep" from
    "bouldering" says nothing.
    """
    if HAN_CHAR.search(word):
        return any(
            pair.word == word and pair.flag.startswith("n") and len(word) > 1
            for text in texts
            for pair in posseg().cut(text)
        )
    nlp = load_spacy()
    if nlp is None:
        return False
    for doc in nlp.pipe(texts):
        for token in doc:
            if (token.lower_ == word or token.lemma_.lower() == word) and token.pos_ in {"NOUN", "PROPN"}:
                return not token.is_stop
    return False


def noun_words(texts: Sequence[str]) -> set[str] | None:
    """Lower-case words used as nouns in ``texts`` (spaCy for English, jieba for Chinese), stop words left out.

    None when English text cannot be tagged (spaCy is missing): the caller cannot tell "went" from "guitar".
    """
    nouns: set[str] = set()
    latin = [t for t in texts if LATIN.search(t)]
    if latin:
        nlp = load_spacy()
        if nlp is None:
            return None
        for doc in nlp.pipe(latin, batch_size=64):
            nouns.update(t.lower_ for t in doc if t.pos_ in {"NOUN", "PROPN"} and not t.is_stop)
    for text in texts:
        if HAN_CHAR.search(text):
            nouns.update(p.word for p in posseg().cut(text) if p.flag.startswith("n") and len(p.word) > 1)
    return nouns


class OfflineExtractor(Extractor):
    """spaCy for English (regular expressions without it), jieba for Chinese; no network, no LLM."""

    def __init__(self, *, use_spacy: bool = True) -> None:
        self.use_spacy = use_spacy

    def extract_sync(self, texts: Sequence[str]) -> list[Extraction]:
        """Blocking extraction (call from a worker thread)."""
        latin = [i for i, t in enumerate(texts) if len(LATIN.findall(t)) > len(HAN_CHAR.findall(t))]
        results = [Extraction() for _ in texts]
        nlp = load_spacy() if self.use_spacy else None
        if latin:
            if nlp is not None:
                for i, extraction in zip(latin, spacy_extract(nlp, [texts[i] for i in latin]), strict=True):
                    results[i] = extraction
            else:
                for i in latin:
                    results[i] = caps_extract(texts[i])
        for i, text in enumerate(texts):
            if HAN_CHAR.search(text):
                results[i] = results[i].merge(jieba_extract(text))
        return [with_user_name(without_claims(result, text)) for result, text in zip(results, texts, strict=True)]

    async def aextract_many(self, texts: Sequence[str]) -> list[Extraction]:
        if not texts:
            return []
        return await asyncio.to_thread(self.extract_sync, list(texts))
