"""Language-aware text analysis, in one package: what the keyword index, the retrieval priors, the extractors and
the router read.

One table per language holds its words (:mod:`.en`, :mod:`.zh`: pronouns, cue words, date patterns); the modules
beside them read those tables the same way for every language, built on maintained libraries (each imported lazily,
on first use):

* :mod:`.scripts`: the one Han range; :func:`detect_language` (``"zh"``, ``"ja"``, ``"en"`` or ``"und"`` from
  Unicode script ranges, enough to tell Chinese from English, also in mixed text).
* :mod:`.tokens`: :func:`keyword_tokens`, the one tokenizer of the keyword index, for stored text and queries
  alike (NFKC, case-folded Unicode word runs, Chinese/Japanese runs segmented by ``jieba``); :func:`stem`
  (Snowball English via ``PyStemmer``, on English words only; Chinese words as they are) gives
  :func:`index_terms`, what the index stores and what its queries search; :func:`query_terms`, a question's
  content words (stop-words removed with the maintained lists that ``bm25s`` ships).
* :mod:`.sentences`: the one sentence splitter (:func:`split_sentences`), clauses and questions.
* :mod:`.parties`: the one pronoun list (:data:`FIRST_PERSON`, :data:`SECOND_PERSON`, ...) and the party of a
  chat a text speaks of (:func:`named_chat_party`, :func:`statements`); :func:`asks_to_recall` (a request to the
  assistant for what the user told it, naming no topic).
* :mod:`.dates`: :func:`extract_time_hints`, the dates and periods a text names, relative to an event time
  (Chinese through ``dateparser``: ``"上周"``, ``"5月2日"``, ``"三天前"``; English through the English table's
  patterns: ``"6 March, 2021"``, ``"last week"``, ``"in May"``), plus :func:`has_temporal_intent` (the question
  asks *when*) and :func:`has_time_expression` (a text mentions a time).
* :mod:`.names`: :func:`person_names` (spaCy's English NER, extra ``nlp``; jieba's part-of-speech tag ``nr`` for
  Chinese) and :func:`mentioned_names` (known names in a query: whole words in English, the characters in Chinese).

Changing what :func:`index_terms` returns changes the keyword index: bump :data:`ANALYZER_VERSION`, and existing
stores are told to run ``lmh reindex``.
"""

from llama_index_memory_hierarchy.language.dates import (
    TimeHint,
    extract_time_hints,
    has_temporal_intent,
    has_time_expression,
    mentions_event_time,
)
from llama_index_memory_hierarchy.language.names import mentioned_names, person_names
from llama_index_memory_hierarchy.language.parties import (
    FIRST_PERSON,
    FIRST_PERSON_PLURAL,
    SECOND_PERSON,
    THIRD_PERSON,
    asks_to_recall,
    named_chat_party,
    statements,
    without_self_statements,
)
from llama_index_memory_hierarchy.language.scripts import (
    HAN,
    HAN_CHAR,
    HAN_RUN,
    LATIN_CHAR,
    Language,
    detect_language,
    has_han,
)
from llama_index_memory_hierarchy.language.sentences import (
    asks,
    is_question,
    sentence_ends,
    split_clauses,
    split_sentences,
)
from llama_index_memory_hierarchy.language.tokens import (
    ACKNOWLEDGEMENTS,
    ANALYZER_VERSION,
    CONTENT_FREE_WORDS,
    content_word,
    evidence_terms,
    index_terms,
    keyword_text,
    keyword_tokens,
    query_stopwords,
    query_terms,
    stem,
    stemmed,
)

__all__ = [
    "ACKNOWLEDGEMENTS",
    "ANALYZER_VERSION",
    "CONTENT_FREE_WORDS",
    "FIRST_PERSON",
    "FIRST_PERSON_PLURAL",
    "HAN",
    "HAN_CHAR",
    "HAN_RUN",
    "LATIN_CHAR",
    "SECOND_PERSON",
    "THIRD_PERSON",
    "Language",
    "TimeHint",
    "asks",
    "asks_to_recall",
    "content_word",
    "detect_language",
    "evidence_terms",
    "extract_time_hints",
    "has_han",
    "has_temporal_intent",
    "has_time_expression",
    "index_terms",
    "is_question",
    "keyword_text",
    "keyword_tokens",
    "mentioned_names",
    "mentions_event_time",
    "named_chat_party",
    "person_names",
    "query_stopwords",
    "query_terms",
    "sentence_ends",
    "split_clauses",
    "split_sentences",
    "statements",
    "stem",
    "stemmed",
    "without_self_statements",
]
