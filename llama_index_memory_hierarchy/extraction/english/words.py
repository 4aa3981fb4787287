"""The English word tables the reader consults: verbs, marks, nouns and adjectives with a role in a fact."""

from __future__ import annotations

import re

from llama_index_memory_hierarchy.extraction.relations import NAME_PREDICATE

SKIP_ENTITY_TYPES = {"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"}
#: Verbs whose object is asked to do their complement: the object is its agent.
REQUEST_VERBS = {
    "ask", "tell", "remind", "request", "instruct", "order", "want", "need", "invite", "encourage", "advise",
    "urge", "beg", "persuade", "expect", "assign", "get",
}  # fmt: skip
#: Same-subject complement verbs and the prefix their complement takes ("I want to learn X" -> wants_to_learn X).
CONTROL_PREFIX = {
    "want": "wants_to", "plan": "plans_to", "intend": "plans_to", "decide": "plans_to", "going": "plans_to",
    "hope": "hopes_to", "aim": "plans_to", "promise": "plans_to", "like": "likes_to", "love": "loves_to",
    "hate": "hates_to", "prefer": "prefers_to", "need": "needs_to", "learn": "learns_to", "use": "used_to",
}  # fmt: skip
#: Verbs whose gerund complement is their object ("I love hiking" -> loves hiking).
PREFERENCE_VERBS = {"like", "love", "enjoy", "hate", "prefer", "dislike", "adore", "detest", "mind"}
#: A gerund complement of these holds (start) or ends (stop) the complement's own relation.
ASPECT_VERBS = {"start": False, "begin": False, "continue": False, "keep": False, "stop": True, "quit": True}
HYPOTHETICAL_MODALS = {"would", "could", "might", "may", "should", "must", "ought", "shall"}
FUTURE = {"will", "'ll", "shall"}
HEDGES = {"maybe", "perhaps", "probably", "possibly", "hopefully", "supposedly", "apparently"}
#: Openers before an introduction ("hi, I'm Tariq").
GREETINGS = {"hi", "hello", "hey", "oh", "well", "so", "ok", "okay", "yes", "yeah"}
CONDITIONAL_MARKS = {"if", "unless", "whether"}
#: Verbs of saying and thinking: what follows them is reported or uncertain, not a fact.
REPORTING_VERBS = {
    "say", "think", "believe", "guess", "suppose", "feel", "hear", "wonder", "doubt", "claim", "imagine",
    "dream", "wish", "pretend", "hope", "tell", "ask", "know", "mean", "seem", "sound", "look",
}  # fmt: skip
#: Short nouns that are never worth a fact on their own.
VAGUE_OBJECTS = {
    "thing", "things", "stuff", "something", "anything", "everything", "nothing", "lot", "time", "way", "one",
    "bit", "kind", "sort", "today", "tomorrow", "yesterday", "tonight", "day", "week", "month", "year",
}  # fmt: skip
#: Head nouns that leave a whole noun phrase vague ("the backend stuff", "a few things").
VAGUE_HEADS = {"thing", "things", "stuff", "something", "anything", "everything", "nothing"}


#: Adjectives of passing states or opinions: "I'm tired" is small talk, not a fact about the user.
TRANSIENT_ADJECTIVES = {
    "happy", "sad", "tired", "busy", "sorry", "glad", "sure", "ready", "fine", "good", "great", "okay", "ok",
    "hungry", "thirsty", "late", "early", "sick", "ill", "bored", "excited", "nervous", "worried", "angry",
    "upset", "afraid", "curious", "free", "back", "home", "here", "there", "done", "right", "wrong", "able",
    "unable", "likely", "welcome", "alright", "cold", "hot", "awake", "asleep", "stressed", "confused", "lost",
    "nice", "bad", "cool", "amazing", "awesome", "interesting", "funny", "new", "available", "grateful",
    "thankful", "proud", "surprised", "impressed", "sleepy", "exhausted", "frustrated", "annoyed", "scared",
}  # fmt: skip
#: Attribute nouns of a possessive subject ("My birthday is May 5" -> User birthday May 5).
ATTRIBUTE_NOUNS = {
    "name": NAME_PREDICATE, "birthday": "birthday", "age": "age", "job": "works_as", "profession": "works_as",
    "occupation": "works_as", "hometown": "hometown", "nationality": "nationality", "email": "email",
    "phone": "phone", "major": "studies",
}  # fmt: skip
#: Relatives and close people a fact can be about without their name ("My sister lives in Leeds" ->
#: User sister_lives_in Leeds), spellings folded.
KIN_NOUNS = {
    "daughter": "daughter", "son": "son", "sister": "sister", "brother": "brother", "mother": "mother",
    "mom": "mother", "mum": "mother", "father": "father", "dad": "father", "parents": "parents", "wife": "wife",
    "husband": "husband", "partner": "partner", "grandmother": "grandmother", "grandfather": "grandfather",
    "aunt": "aunt", "uncle": "uncle", "cousin": "cousin", "kid": "kid", "kids": "children", "children": "children",
    "boyfriend": "boyfriend", "girlfriend": "girlfriend", "fiance": "fiance", "fiancee": "fiancee",
}  # fmt: skip
#: Pets a possessive can name ("The user's cat is called Miso" -> Miso cat_of User).
PET_NOUNS = {"cat", "dog", "kitten", "puppy", "parrot", "rabbit", "hamster", "horse", "tortoise", "budgie"}
#: Leading intensifiers of an identity noun, not part of it ("a huge coffee snob" is a coffee snob).
INTENSIFIERS = {"huge", "massive", "total", "complete", "absolute", "utter", "enormous", "giant", "mega"}
#: Identity and diet words a capitalised "I'm X." means (WordNet's lists lack some): never a name.
IDENTITY_WORDS = {
    "vegan", "vegetarian", "pescatarian", "diabetic", "coeliac", "celiac", "keto", "teetotal", "gluten-free",
}  # fmt: skip
#: Discourse openers that carry no content and mislead small parsers ("fwiw I'm a paramedic", "the thing you
#: should know about me is that ..."), and the
#: contraction "my name's" (parsed as a possessive): rewritten before parsing.
DISCOURSE_OPENER = re.compile(
    r"(^|[.!?;]\s+)(?:fwiw|btw|fyi|tbh|imo|just fyi|just so you know|for the record|for what it'?s worth"
    r"|(?:the|one)(?: main| big| only)? thing (?:you should|to) know about me is(?: that)?)"
    r"(?:\s*,\s*|\s+)(?=\w)",
    re.IGNORECASE,
)
#: A terse note's bare "User" as the sentence subject ("User prefers tea.", "User's sister: Ana."): the
#: determiner a memory client leaves out, put back so the note is about the user like "the user ...".
BARE_USER = re.compile(r"(^|[.!?;]\s+)User(?=['’]s\b|\s+[a-z])")
#: A note's "label: value" ("The user's sister: Ana.", "My job: nurse"): a possessive label, read as "is".
LABEL_VALUE = re.compile(
    r"(^|[.!?;]\s+)((?:the user['’]s|my)\s+[a-z]+(?:\s+[a-z]+)?)\s*:\s+(?=[^\s.!?;:])", re.IGNORECASE
)
#: "Call me Bram." / "You can call me Bea": the user gives the name they go by.
CALL_ME = re.compile(
    r"(^|[.!?;]\s+)(?i:(?:(?:please|just|you can|feel free to)\s+)*call me)\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)"
    r"(?=\s*(?:[.!?;,]|$))"
)
NAME_CONTRACTION = re.compile(r"\b(my|the user's|user's|his|her|their) name['’]s\b", re.IGNORECASE)
KIN_MARK = "kin:"
#: Marks of a clause that is no plain fact itself (time, result, concession) but leaves its main clause one.
SINGLE_CLAUSE_MARKS = {"when", "while", "before", "after", "until", "once", "as", "since", "so", "though", "although"}
#: Prepositions of time: "settled after a few moves" says when, not a second fact.
TEMPORAL_PREPS = {"after", "before", "during", "since", "until", "following"}
OBJECT_PREPS = {"of", "at", "for", "from", "in"}
CODE = re.compile(r"^[A-Za-z]+-?\d+[A-Za-z\d-]*$")
