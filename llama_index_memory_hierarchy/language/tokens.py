"""The keyword analysis: the one tokenizer of the keyword index, the English stemmer and a question's content words."""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from llama_index_memory_hierarchy.language import en, zh
from llama_index_memory_hierarchy.language.dates import has_time_expression
from llama_index_memory_hierarchy.language.scripts import CJK, KATAKANA, MARKS

CJK_CHAR = re.compile(f"[{CJK}]")

#: Version of the keyword analysis (:func:`index_terms`); stored with the record store.
#: 1: light English stemmer (before this module); 2: Snowball English stemmer; 3: ordinals as their numbers
#: ("29th" -> "29"), and a derived memory (a session summary) indexed without the turns before it, and no turn's
#: context (``EpisodicMemory.abuild_records``).
ANALYZER_VERSION = 3

_TOKEN = re.compile(
    rf"(?P<cjk>[{CJK}]+)|(?P<kana>[{KATAKANA}]+)|(?P<word>(?:(?![{CJK}{KATAKANA}])(?:[^\W_]|[{MARKS}]))+)"
)

#: Words of acknowledgement and small talk, English and Chinese: a turn of nothing else says nothing to remember
#: ("ok thanks", "got it, sounds good", "好的，我记住了。", "嗯嗯"), whatever words of a query it shares.
ACKNOWLEDGEMENTS = en.ACKNOWLEDGEMENTS | zh.ACKNOWLEDGEMENTS
#: What a content-free turn holds beside stop-words: acknowledgements and talk about the conversation itself
#: (``META_TALK``: "I told you that earlier.", "我之前跟你说过的。").
CONTENT_FREE_WORDS = ACKNOWLEDGEMENTS | en.META_TALK | zh.META_TALK

_jieba_lock = threading.Lock()
_jieba: Any = None


def jieba_module() -> Any:
    """jieba, imported and initialised once, quietly."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.ERROR)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def _cut_for_search() -> Callable[[str], Iterator[str]]:
    """jieba's search-mode segmenter (a long word also yields its shorter words)."""
    return jieba_module().cut_for_search


def keyword_tokens(text: str) -> list[str]:
    """Lower-case Unicode word tokens of ``text``; Chinese/Japanese runs segmented with jieba.

    Punctuation, symbols and whitespace are dropped, so user text cannot smuggle in query
    syntax. The same function tokenizes stored text and search text, so matching is
    consistent across keyword index backends.
    """
    if not text:
        return []
    normalised = unicodedata.normalize("NFKC", text).casefold()
    tokens: list[str] = []
    for match in _TOKEN.finditer(normalised):
        run = match.group("cjk")
        if run is None:
            tokens.append(match.group(0))
            continue
        for word in _cut_for_search()(run):
            word = word.strip()
            if word:
                tokens.append(word)
    return tokens


_stemmers = threading.local()  # PyStemmer objects are not safe to share between threads


def _english_stemmer() -> Any:
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        import Stemmer

        stemmer = _stemmers.english = Stemmer.Stemmer("english")
    return stemmer


#: An English ordinal number ("29th", "2nd"): indexed as its number, as dates are written ("29 April 2023").
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")


def _is_english_word(token: str) -> bool:
    """A token the English stemmer reads: ASCII letters only, longer than three (Chinese words never are)."""
    return len(token) > 3 and token.isascii() and token.isalpha()


def stem(token: str) -> str:
    """The Snowball (Porter 2) English stem of an English word, the number of an ordinal; any other token as it is.

    ``camping``/``camped``/``camps`` -> ``camp``, ``parties``/``party`` -> ``parti``, ``29th`` -> ``29``.
    Other tokens with digits, non-Latin words (Chinese, Cyrillic...) and words of three letters
    or fewer are kept unchanged. Apply it to stored text and queries alike.
    """
    if _is_english_word(token):
        return _english_stemmer().stemWord(token)
    ordinal = _ORDINAL.fullmatch(token) if token[:1].isdigit() else None
    return ordinal.group(1) if ordinal else token


def stemmed(tokens: Sequence[str]) -> list[str]:
    """:func:`stem` of each of ``tokens`` (from :func:`keyword_tokens`)."""
    if not tokens:
        return []
    stemmer = _english_stemmer()
    return [stemmer.stemWord(t) if _is_english_word(t) else stem(t) for t in tokens]  # as stem(), in one call


def index_terms(text: str) -> list[str]:
    """Keyword tokens, stemmed: what the keyword index stores for ``text`` and what its queries search."""
    return stemmed(keyword_tokens(text))


def keyword_text(text: str) -> str:
    """The text the keyword index stores: :func:`index_terms` joined by single spaces."""
    return " ".join(index_terms(text))


@lru_cache(maxsize=1)
def query_stopwords() -> frozenset[str]:
    """Words that carry no content in a question, English and Chinese (maintained lists shipped by ``bm25s``).

    English: NLTK's list (question words, auxiliaries, pronouns, determiners, prepositions),
    Chinese: bm25s's Chinese list (function words, pronouns, question particles). Removed from
    keyword queries only, never from stored text.
    """
    from bm25s.stopwords import STOPWORDS_CHINESE, STOPWORDS_EN_PLUS

    words = {w.casefold() for w in STOPWORDS_EN_PLUS} | set(STOPWORDS_CHINESE)
    # The tokenizer splits contractions: "didn't" -> "didn", "t"; the list has both halves.
    return frozenset(words)


def content_word(token: str) -> bool:
    """Whether a keyword token can say what a text is about (a recurring topic, say).

    Not a stop word (:func:`query_stopwords`), not small talk (the languages' :data:`ACKNOWLEDGEMENTS`:
    "lol", "haha", "好的"), not a time word ("today", "weekend", "今天": when something was, not what).
    """
    return token not in query_stopwords() and token not in ACKNOWLEDGEMENTS and not has_time_expression(token)


def query_terms(
    query: str,
    *,
    stopwords: Iterable[str] | None = None,
    tokenizer: Callable[[str], list[str]] = keyword_tokens,
) -> list[str]:
    """Content words of a question for a keyword search, unique, in order (not stemmed).

    ``"What did Odile paint?"`` gives ``["odile", "paint"]``; ``"我的经理是谁？"``
    gives ``["经理"]``. When every word is a stop-word the query's own tokens are returned,
    so a search never goes empty. ``tokenizer`` must be the one the keyword index uses.
    """
    stop = query_stopwords() if stopwords is None else frozenset(stopwords)
    tokens = tokenizer(query)
    seen: dict[str, None] = {}
    for token in tokens:
        if token not in stop and not _is_punctuation(token):
            seen.setdefault(token, None)
    return list(seen) or list(dict.fromkeys(tokens))


def _is_punctuation(token: str) -> bool:
    return all(unicodedata.category(ch)[0] in "PSZ" for ch in token)


#: jieba's part-of-speech tags of words that carry no topic (Peking University tag set): localisers (里, 上),
#: numerals and classifiers (一个), pronouns, prepositions, conjunctions, particles, adverbs, modal particles,
#: interjections, onomatopoeia, status words and punctuation.
_ZH_FUNCTION_TAGS = ("f", "m", "q", "r", "p", "c", "u", "d", "y", "e", "o", "z", "x", "w")


def evidence_terms(text: str) -> frozenset[str]:
    """The index terms of ``text``'s content words: what a memory must share with a query for the relevance
    floor to count the keyword match as evidence.

    The index terms (:func:`index_terms`) outside :func:`query_stopwords`, and for Chinese outside the words
    jieba's dictionary tags as function words (:data:`_ZH_FUNCTION_TAGS`): "罗塞塔石碑上写了什么" keeps 罗塞塔,
    石碑 and 写, not 上, which any "在车上" holds. A word the dictionary does not know counts as content.
    """
    stop = query_stopwords()
    terms = [t for t in index_terms(text) if t not in stop and not _is_punctuation(t)]
    if not any(CJK_CHAR.match(t) for t in terms):
        return frozenset(terms)
    import jieba.posseg

    jieba_module()
    tags = jieba.posseg.dt.word_tag_tab
    return frozenset(t for t in terms if not tags.get(t, "n").startswith(_ZH_FUNCTION_TAGS))
