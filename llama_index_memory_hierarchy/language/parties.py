"""The two parties of a chat, by pronoun: the one pronoun list of the package, and which party a text speaks of."""

from __future__ import annotations

import re
from typing import Literal

from llama_index_memory_hierarchy.language import en, zh
from llama_index_memory_hierarchy.language.scripts import SCRIPT_BOUNDARY
from llama_index_memory_hierarchy.language.sentences import asks, is_question, split_clauses, split_sentences
from llama_index_memory_hierarchy.language.tokens import CONTENT_FREE_WORDS, keyword_tokens, query_stopwords

#: The speaker, singular ("I", "me", "我"): the user when the user speaks.
FIRST_PERSON = en.FIRST_PERSON | zh.FIRST_PERSON
#: The speaker with others ("we", "our", "我们").
FIRST_PERSON_PLURAL = en.FIRST_PERSON_PLURAL | zh.FIRST_PERSON_PLURAL
#: The one spoken to, singular ("you", "你", "您").
SECOND_PERSON = en.SECOND_PERSON | zh.SECOND_PERSON
#: A third person ("he", "her", "他", "她").
THIRD_PERSON = en.THIRD_PERSON | zh.THIRD_PERSON

Party = Literal["user", "assistant"]


def _pronoun_pattern(english: frozenset[str], chinese: frozenset[str]) -> re.Pattern[str]:
    """Singular pronouns as whole English words or Chinese characters not followed by the plural suffix."""
    return re.compile(
        rf"\b(?:{'|'.join(sorted(english))})\b|[{''.join(sorted(chinese))}](?!{zh.PLURAL})", re.IGNORECASE
    )


#: Singular pronouns of the two parties of a chat: the asker (the user) and the one asked (the assistant).
#: Plurals ("we", "我们", "你们") name more than one party.
_PARTY_PRONOUNS: dict[Party, re.Pattern[str]] = {
    "user": _pronoun_pattern(en.FIRST_PERSON, zh.FIRST_PERSON),
    "assistant": _pronoun_pattern(en.SECOND_PERSON, zh.SECOND_PERSON),
}
#: A request to recall ("do you remember ...", "你还记得...吗"): it asks the assistant about what follows, so its
#: "you" is not the party the question is about.
_RECALL_REQUEST = re.compile(f"{en.RECALL_REQUEST}|{zh.RECALL_REQUEST}", re.IGNORECASE)
#: What asks for the conversation's past itself: a request to recall, where the user had got to.
_RECALL_CUE = re.compile(f"{en.RECALL_REQUEST}|{zh.RECALL_REQUEST}|{en.PROGRESS}|{zh.PROGRESS}", re.IGNORECASE)
_RECALL_IMPERATIVE = re.compile(f"{en.RECALL_IMPERATIVE}|{zh.RECALL_IMPERATIVE}", re.IGNORECASE)
_META_TALK = en.META_TALK | zh.META_TALK


def asks_to_recall(text: str) -> bool:
    """Whether ``text`` asks the assistant for what the user told it in general, naming no topic ("Do you remember
    how far I got?", "What did I tell you earlier?", "你还记得我说过什么吗？").

    Why: such a request shares no content with the memories it asks for, yet it is no unrelated query; the
    relevance floor shows the informative memories for it (``retrieval.floor``). It is a question or a request to
    be told or reminded, it holds a recall cue (talk about talk: ``META_TALK``, "do you remember", "how far I
    got") and no content word outside the content-free words: "Do you remember my sister's name?" names a topic,
    "Got it?" and "zzzz qqq" ask for nothing remembered.
    """
    if not (asks(text) or _RECALL_IMPERATIVE.search(text)):
        return False
    stop = query_stopwords()
    words = [w for w in keyword_tokens(_RECALL_CUE.sub(" ", text)) if w not in stop]
    cued = bool(_RECALL_CUE.search(text)) or any(w in _META_TALK for w in words)
    return cued and all(w in CONTENT_FREE_WORDS for w in words)


def named_chat_party(query: str) -> Party | None:
    """The party of a chat that ``query`` is about, by pronoun: ``"user"`` for "my"/"I"/"我", ``"assistant"``
    for "you"/"你"; None when it names neither (or only both at once: "we", "我们").

    Why: the pronouns of a question put to an assistant name people as names do. A question about its asker
    ("我最喜欢哪种花？") is answered by the user's own words before the assistant's replies, which often
    only echo the question; one about the assistant by what it said. A question naming both is about its
    subject, the first party of the last clause that names one ("Which book did you suggest to me?": the
    assistant; "I mentioned a museum. Do you remember what I saw?": the user, a request to recall set aside).
    """
    for clause in reversed(split_clauses(query)):
        if party := first_party(_RECALL_REQUEST.sub(" ", clause)):
            return party
    return None


def first_party(clause: str) -> Party | None:
    """The party of the first singular party pronoun in ``clause``: ``"user"`` for "I"/"我", ``"assistant"`` for
    "you"/"你"."""
    spaced = SCRIPT_BOUNDARY.sub(" ", clause.casefold())
    first = [(m.start(), party) for party, pattern in _PARTY_PRONOUNS.items() if (m := pattern.search(spaced))]
    return min(first)[1] if first else None


def statements(text: str) -> str:
    """What ``text`` states: its sentences that are not questions, and the clauses of a question in which
    its speaker first speaks of itself, joined by spaces.

    Why: a question asserts nothing. "Which films do you enjoy?" holds every word of the later
    question "which films do I enjoy?" and answers none of it; the turn after it does. Yet
    "我周末常去爬山，你也喜欢户外吗？" states what its speaker does before it asks.
    """
    return " ".join(clause for clause, asking, _ in _clauses(text) if not asking)


def without_self_statements(text: str) -> str:
    """``text`` without the clauses in which its speaker speaks of itself (its first party pronoun is "I"/"我").

    Why: a reply answers what it was asked and what was said of it ("Well done on the new job! How is it
    going?"), not what the asker says of itself ("I collect stamps, do you have a hobby?": the stamps are
    the asker's).
    """
    return " ".join(clause for clause, _, of_self in _clauses(text) if not of_self)


def _clauses(text: str) -> list[tuple[str, bool, bool]]:
    """The clauses of ``text``, each with whether it asks and whether its speaker speaks of itself in it.

    A question's last clause asks; so do its other clauses, except those whose first party is the speaker.
    """
    out = []
    for sentence in split_sentences(text):
        question = is_question(sentence)
        parts = split_clauses(sentence)
        for i, clause in enumerate(parts):
            of_self = first_party(clause) == "user"  # "I"/"我": its speaker
            out.append((clause, question and (i == len(parts) - 1 or not of_self), of_self))
    return out
