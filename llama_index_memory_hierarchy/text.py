"""Text helpers shared by the stores: keyword tokens (what the keyword index sees) and token counts.

``keyword_tokens`` is the single tokenizer behind both indexing and querying, so the keyword
index of every backend sees the same words: NFKC-normalised, case-folded Unicode word runs,
with Chinese/Japanese runs segmented by ``jieba`` (imported lazily, only when such text shows up).
Punctuation and symbols never become tokens, so user text cannot smuggle in query syntax.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator

logger = logging.getLogger(__name__)

# Han ideographs (+ extensions, compatibility) and hiragana: segmented with jieba.
_HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_HIRAGANA = "\u3041-\u309f"
# Katakana (loanwords): kept as whole words; jieba's dictionary would split them into characters.
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
# Combining marks of common scripts, which Python's ``\w`` does not count as word characters but
# which belong inside words (Latin diacritics after NFKC leftovers, Hebrew, Arabic, Indic, Thai, Lao).
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"
    "\u0610-\u061a\u064b-\u065f\u0670\u0900-\u0963\u0966-\u0dff\u0e00-\u0eff"
)
_CJK = _HAN + _HIRAGANA
_TOKEN = re.compile(
    rf"(?P<cjk>[{_CJK}]+)|(?P<kana>[{_KATAKANA}]+)|(?P<word>(?:(?![{_CJK}{_KATAKANA}])(?:[^\W_]|[{_MARKS}]))+)"
)

_jieba_lock = threading.Lock()
_jieba_cut: Callable[[str], Iterator[str]] | None = None


def _cut_for_search() -> Callable[[str], Iterator[str]]:
    """jieba's search-mode segmenter, imported and initialised once, quietly."""
    global _jieba_cut
    if _jieba_cut is None:
        with _jieba_lock:
            if _jieba_cut is None:
                import jieba

                jieba.setLogLevel(logging.ERROR)
                jieba.initialize()
                _jieba_cut = jieba.cut_for_search
    return _jieba_cut


def keyword_tokens(text: str) -> list[str]:
    """Lower-case Unicode word tokens of ``text``; Chinese/Japanese runs segmented with jieba.

    Punctuation, symbols and whitespace are dropped. The same function tokenizes stored
    text and search text, so matching is consistent across keyword index backends.
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


def keyword_text(text: str) -> str:
    """The text the keyword index stores: :func:`index_terms` joined by single spaces."""
    return " ".join(index_terms(text))


def index_terms(text: str) -> list[str]:
    """Keyword tokens, lightly stemmed, as both the index and its queries use them.

    Stemming (``camping``/``camped`` -> ``camp``) lets a question and a memory meet on
    inflected words; measured on LoCoMo it adds about 2 points of recall.
    """
    from llama_index_memory_hierarchy.retrieval.pipeline import light_stem

    return [light_stem(token) for token in keyword_tokens(text)]


def count_tokens(text: str) -> int:
    """Number of LLM tokens in ``text`` with LlamaIndex's global tokenizer (``Settings.tokenizer``).

    The default is tiktoken's cl100k encoding, whose cache ships inside llama-index-core (offline).
    """
    if not text:
        return 0
    from llama_index.core.utils import get_tokenizer

    return len(get_tokenizer()(text))


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest head of ``text`` (cut at a character) within ``limit`` LLM tokens."""
    if count_tokens(text) <= limit:
        return text
    low, high = 0, len(text)  # binary search on characters: token counts grow with the prefix
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def keyword_scope(user_id: str, namespace: str) -> str:
    """One keyword-index token naming a user's namespace (hex, so no tokenizer splits it).

    Indexed in its own column, it lets full-text search intersect with one user's rows
    before ranking, instead of ranking every user's matches and filtering afterwards.
    """
    return "s" + f"{user_id}\x1f{namespace}".encode().hex()
