"""Canonical relations: the user entity, predicate spellings folded onto one name, negation."""

from __future__ import annotations

import re

#: The entity first-person mentions resolve to.
USER_ENTITY = "User"
#: The relation between the user and their own name (its object names the user, see entity resolution).
NAME_PREDICATE = "named"

#: Predicate spellings folded onto one canonical name (so supersession sees one predicate).
PREDICATE_ALIASES: dict[str, str] = {
    "live_in": "lives_in",
    "reside_in": "lives_in",
    "resides_in": "lives_in",
    "live_at": "lives_in",
    "move_to": "lives_in",
    "moves_to": "lives_in",
    "moved_to": "lives_in",
    "relocated_to": "lives_in",
    "settled_in": "lives_in",
    "settle_in": "lives_in",
    "work_at": "works_at",
    "work_for": "works_at",
    "works_for": "works_at",
    "employed_by": "works_at",
    "employed_at": "works_at",
    "work_as": "works_as",
    "prefer": "prefers",
    "like": "likes",
    "love": "loves",
    "know": "knows",
    "marry": "married_to",
    "married": "married_to",
    "is_married_to": "married_to",
    "spouse_of": "spouse",
    "wife_of": "spouse",
    "husband_of": "spouse",
    "is_a": "is",
    "is_an": "is",
    "be": "is",
    "name": NAME_PREDICATE,
    "name_is": NAME_PREDICATE,
    "is_named": NAME_PREDICATE,
    "called": NAME_PREDICATE,
    "is_called": NAME_PREDICATE,
    "住在": "lives_in",
    "妻子_of": "spouse",
    "丈夫_of": "spouse",
    "工作于": "works_at",
}

#: British spellings of predicate words folded onto one ("favourite_band" is "favorite_band").
_BRITISH_SPELLINGS = {"favourite": "favorite", "neighbour": "neighbor", "colour": "color"}
_BRITISH = re.compile(rf"(?<![a-z])(?:{'|'.join(_BRITISH_SPELLINGS)})(?![a-z])")
_NEGATIVE_PREFIXES = ("does_not_", "is_not", "not_", "did_not_")


def normalize_predicate(predicate: str) -> str:
    """Canonical predicate: lower case, words joined by ``_``, common synonyms folded."""
    text = re.sub(r"[^\w]+", "_", predicate.strip().lower()).strip("_")
    text = _BRITISH.sub(lambda m: _BRITISH_SPELLINGS[m.group(0)], text)
    return PREDICATE_ALIASES.get(text, text) or "related_to"


def third_person(lemma: str) -> str:
    """The present third-person form of an English verb lemma ("live" -> "lives", "fly" -> "flies")."""
    irregular = {"be": "is", "have": "has", "do": "does", "go": "goes"}
    if lemma in irregular:
        return irregular[lemma]
    if re.search(r"(?:s|sh|ch|x|z|o)$", lemma):
        return lemma + "es"
    if re.search(r"[^aeiou]y$", lemma):
        return lemma[:-1] + "ies"
    return lemma + "s"


def base_form(verb: str) -> str | None:
    """The lemma of a present third-person form, or None when ``verb`` is not one."""
    if verb == "has":
        return "have"
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|zz|o)es$", verb):
        return verb[:-2]
    if verb.endswith("s") and not verb.endswith("ss") and len(verb) > 2:
        return verb[:-1]
    return None


def is_negative(predicate: str) -> bool:
    """Whether a canonical predicate states that something does not hold."""
    return predicate.startswith(_NEGATIVE_PREFIXES)


def negate_predicate(predicate: str) -> str:
    """The negative of a canonical predicate: likes -> does_not_like, is -> is_not, is_x_to -> is_not_x_to.

    A negative predicate is returned unchanged. Semantic memory uses this to let a fact and
    its negation end each other's validity ("I no longer work at Google").
    """
    if is_negative(predicate):
        return predicate
    if predicate == "is" or predicate.startswith("is_"):
        return "is_not" + predicate[2:]
    first, _, rest = predicate.partition("_")
    base = base_form(first) if first.isascii() else None
    if base is None:
        return "not_" + predicate
    return "does_not_" + base + (f"_{rest}" if rest else "")


#: Relation nouns folded onto one name ("my wife Anna" -> Anna spouse User).
RELATION_NOUNS = {"wife": "spouse", "husband": "spouse", "spouse": "spouse", "partner": "partner_of"}
#: Relations whose object is a place, and those whose object is an organisation (the object's entity type).
PLACE_PREDICATES = {"lives_in", "born_in", "comes_from", "lived_in", "hometown", "works_in"}
ORG_PREDICATES = {"works_at", "studies_at", "worked_at"}
