"""English facts from spaCy's dependency parse and NER, clause by clause (precision first).

Modules, each importing only those before it: ``model`` (loading spaCy's pipeline), ``words`` (the word tables),
``mentions`` (what a token names), ``shapes`` (the fact each clause shape states), ``clauses`` (which clauses state
a fact, and :func:`spacy_extract`).
"""

from llama_index_memory_hierarchy.extraction.english.clauses import spacy_extract
from llama_index_memory_hierarchy.extraction.english.model import SPACY_MODELS, load_spacy

__all__ = ["SPACY_MODELS", "load_spacy", "spacy_extract"]
