"""Text helpers shared by the stores: keyword tokens (what the keyword index sees) and token counts.

``keyword_tokens``/``index_terms``/``keyword_text`` come from :mod:`llama_index_memory_hierarchy.language`,
the one home of language-aware analysis: the single tokenizer behind both indexing and querying,
so the keyword index of every backend sees the same words (NFKC-normalised, case-folded Unicode
word runs, Chinese/Japanese runs segmented by ``jieba``, English words Snowball-stemmed).
Punctuation and symbols never become tokens, so user text cannot smuggle in query syntax.
"""

from __future__ import annotations

from llama_index_memory_hierarchy.language import index_terms, keyword_text, keyword_tokens

__all__ = ["count_tokens", "index_terms", "keyword_scope", "keyword_text", "keyword_tokens"]


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
