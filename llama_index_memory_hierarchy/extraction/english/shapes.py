"""The shapes of an English clause that state a fact: verb and object, copula, attribute, adjective, possessive
subject, a relative without a name, a passive naming, relation nouns."""

from __future__ import annotations

from typing import Any

from llama_index_memory_hierarchy.extraction.base import CONFIDENCE_APPOSITION, ExtractedFact
from llama_index_memory_hierarchy.extraction.english.mentions import Mentions
from llama_index_memory_hierarchy.extraction.english.words import (
    ASPECT_VERBS,
    ATTRIBUTE_NOUNS,
    CONTROL_PREFIX,
    FUTURE,
    INTENSIFIERS,
    KIN_MARK,
    KIN_NOUNS,
    PET_NOUNS,
    PREFERENCE_VERBS,
    REPORTING_VERBS,
    REQUEST_VERBS,
    SKIP_ENTITY_TYPES,
    TEMPORAL_PREPS,
    TRANSIENT_ADJECTIVES,
)
from llama_index_memory_hierarchy.extraction.relations import (
    NAME_PREDICATE,
    RELATION_NOUNS,
    USER_ENTITY,
    negate_predicate,
    normalize_predicate,
    third_person,
)


class FactShapes(Mentions):
    """The facts each clause shape states (the clause's subject and polarity already read)."""

    def _kin(self, noun: Any) -> tuple[str, tuple[str, str]] | None:
        """ "my sister" (no name given): the relative's role and whose relative, or None."""
        role = KIN_NOUNS.get(noun.lower_)
        if role is None or noun.pos_ != "NOUN" or self._named_appos(noun) is not None:
            return None
        owner_token = next((c for c in noun.children if c.dep_ == "poss"), None)
        owner = self.named(owner_token) if owner_token is not None else None
        return (role, owner) if owner is not None else None

    def _misparsed_appos(self, name: Any) -> bool:
        """ "My cousin Mira lives ...", parsed as two subjects of "lives": the name is the relative's."""
        previous = self.doc[name.i - 1] if name.i > 0 else None
        return (
            previous is not None
            and name.pos_ == "PROPN"
            and previous.pos_ == "NOUN"
            and previous.dep_ == name.dep_ == "nsubj"
            and previous.head.i == name.head.i
        )

    def _kin_clause(self, verb: Any, noun: Any) -> list[ExtractedFact | None]:
        """ "My sister lives in Leeds" -> User sister_lives_in Leeds; "My son was born in 2015" -> son_born_on 2015.

        A relative without a name is no entity of its own: the fact is the owner's, its predicate
        prefixed with the role. Negated clauses yield nothing (the prefixed predicate could not say it).
        """
        kin = self._kin(noun)
        assert kin is not None
        role, owner = kin
        mark = (f"{KIN_MARK}{role}", "PERSON")
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
        kin = self._kin(subject_token) or self._pet(subject_token)
        if kin is None:
            return []
        role, owner = kin
        if role in PET_NOUNS:  # a pet is named, not a person
            return [self._make((name[0], "ENTITY"), f"{role}_of", owner)]
        self.people.append(name[0])
        return [self._make((name[0], "PERSON"), RELATION_NOUNS.get(role, f"{role}_of"), owner)]

    def _pet(self, noun: Any) -> tuple[str, tuple[str, str]] | None:
        """ "my cat", "the user's dog": the pet noun and whose pet, or None."""
        if noun.lemma_.lower() not in PET_NOUNS or noun.pos_ != "NOUN":
            return None
        owner_token = next((c for c in noun.children if c.dep_ == "poss"), None)
        owner = self.named(owner_token) if owner_token is not None else None
        return (noun.lemma_.lower(), owner) if owner is not None else None

    def _predicate_word(self, verb: Any, negated: bool, prefix: str | None) -> str:
        particle = "".join(f"_{c.lower_}" for c in verb.children if c.dep_ == "prt")
        past = verb.tag_ == "VBD" or any(c.dep_ == "aux" and c.lower_ == "did" for c in verb.children)
        passive = any(c.dep_ == "auxpass" for c in verb.children)
        future = any(c.dep_ == "aux" and c.lower_ in FUTURE for c in verb.children)
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
        if lemma in PREFERENCE_VERBS and not dobjs:  # "I love hiking", the gerund parsed as a noun
            dobjs = [c for c in verb.children if c.dep_ == "xcomp" and c.pos_ == "NOUN"]
        if lemma in PREFERENCE_VERBS and not dobjs and not xcomps:  # "I don't like cilantro at all": the
            dobjs = [  # object parsed as an adverb of the verb
                c for c in verb.children if c.dep_ in {"advmod", "npadvmod"} and c.pos_ == "NOUN" and c.i == verb.i + 1
            ]
        if lemma in ASPECT_VERBS and not xcomps:  # "I quit smoking cigarettes"
            xcomps = [c for c in dobjs if c.tag_ == "VBG"]
        out: list[ExtractedFact | None] = []
        if xcomps and prefix is None:
            xcomp = xcomps[0]
            if lemma in REQUEST_VERBS and dobjs:
                agent = self.named(dobjs[0])
                return self._verb(agent, xcomp, negated, "asked_to") if agent is not None else []
            if lemma in PREFERENCE_VERBS and xcomp.tag_ == "VBG":
                word = self._predicate_word(verb, negated, None)
                return [self._make(subject, word, self.thing(t)) for t in [xcomp, *self._conjuncts(xcomp)]]
            if lemma in ASPECT_VERBS and xcomp.tag_ == "VBG":
                return self._verb(subject, xcomp, negated or ASPECT_VERBS[lemma], None)
            if lemma in CONTROL_PREFIX or (lemma == "go" and verb.tag_ == "VBG"):
                control = "plans_to" if lemma == "go" else CONTROL_PREFIX[lemma]
                if lemma == "use" and verb.tag_ != "VBD":
                    return []
                return self._verb(subject, xcomp, negated, control)
            return []
        if lemma in REPORTING_VERBS and any(c.dep_ in {"ccomp", "xcomp"} for c in verb.children):
            return []
        if lemma == "stand" and negated and any(c.lower_ in {"ca", "can", "could"} for c in verb.children):
            # "I can't stand cilantro": a dislike (small models parse the object as an adverb)
            target = next((c for c in verb.rights if c.dep_ not in {"punct", "neg", "aux"}), None)
            return [self._make(subject, "dislikes", self.thing(target))] if target is not None else []
        if lemma in {"quit", "leave"} and verb.tag_ == "VBD" and not negated:
            jobs = [d for d in dobjs if d.lemma_ in {"job", "position", "role"}]
            if jobs:  # "I quit my job at Oracle" (the "at" on the job, or on the verb by small models)
                return self._employer(subject, jobs[0], True) or self._employer(subject, verb, True)
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
            if child.dep_ not in {"prep", "dative"} or child.dep_ == "dative" or child.lower_ in TEMPORAL_PREPS:
                continue
            pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
            following = self.ent_of.get(child.i + 1)
            if pobj is None and following is not None and following.label_ not in SKIP_ENTITY_TYPES:
                pobj = following.root  # "works at Acme Corp." parsed without a pobj
            if pobj is None:
                continue
            predicate = f"{word}_{child.lower_}"
            for target in [pobj, *self._conjuncts(pobj)]:
                born = normalize_predicate(predicate) in {"born_in", "born_on"}
                obj = self.thing(target, allow_dates=born)
                if obj is None or (born and target.pos_ != "PROPN" and target.i not in self.ent_of):
                    continue  # "born ..., in case you need it": a birth is in a place or on a date
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
                for conj in self._conjuncts(child):  # "I'm vegan and allergic to soy"
                    if conj.pos_ == "ADJ":
                        out.extend(self._adjective(subject, conj, negated))
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
            elif child.dep_ == "prep" and child.lower_ == "into":  # "I'm (not really) into bouldering"
                for pobj in child.children:
                    thing = self.thing(pobj) if pobj.dep_ == "pobj" else None
                    if thing is not None:
                        out.append(self._make(subject, "does_not_like" if negated else "likes", thing))
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
            objects = [self.thing(t, allow_dates=True) for p in targets for t in [p, *self._conjuncts(p)]]
            return [self._make(subject, relation, o) for o in objects]  # "winter" is tagged a date
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
        first = next(iter(sorted(attr.lefts, key=lambda t: t.i)), None)
        while first is not None and first.dep_ == "det":
            first = self.doc[first.i + 1]
        if obj is not None and first is not None and first.dep_ == "amod" and first.lower_ in INTENSIFIERS:
            rest = obj[0].split(" ", 1)  # "a huge coffee snob" is a coffee snob
            obj = (rest[1], obj[1]) if len(rest) == 2 and rest[0].lower() == first.lower_ else obj
        return [self._make(subject, "is_not" if negated else "is", obj)] if obj is not None else []

    def _adjective(self, subject: tuple[str, str], adj: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "allergic to peanuts" -> is_allergic_to peanuts; "vegetarian" -> is vegetarian; "34 years old" -> age 34."""
        lemma = adj.lower_
        if lemma == "old":
            number = [t for t in adj.subtree if t.like_num]
            return [self._make(subject, "age", (number[0].text, "CONCEPT"))] if number and not negated else []
        noun_read = adj.pos_ == "NOUN" and adj.dep_ == "acomp" and not any(c.dep_ == "det" for c in adj.children)
        if adj.pos_ not in {"ADJ", "VERB"} and not noun_read:  # "lactose intolerant", "intolerant" tagged a noun
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
        if lemma in TRANSIENT_ADJECTIVES or any(c.dep_ == "advmod" for c in adj.children):
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
            if owner[0] != USER_ENTITY or value.pos_ != "ADJ" or not self._unknown_title(value):
                return []
            self.user_names.add(value.text)  # "My name is Odile.": a first name the small model tags an adjective
            return [self._make(owner, NAME_PREDICATE, (value.text, "PERSON"))]
        favorite = [c for c in noun.children if c.dep_ == "amod" and c.lower_ in {"favorite", "favourite"}]
        if value.pos_ == "PROPN" and lemma not in ATTRIBUTE_NOUNS and not favorite:
            name = self.named(value)
            relation = RELATION_NOUNS.get(lemma, f"{lemma}_of")
            return [self._make(name, relation, owner)] if name is not None else []
        obj = self.thing(value, allow_dates=True) if value.pos_ != "ADJ" else (value.text, "CONCEPT")
        if obj is None:
            return []
        if favorite:
            return [self._make(owner, f"favorite_{lemma}", obj)]
        if lemma in ATTRIBUTE_NOUNS:
            if lemma == "age" and not value.like_num:
                return []
            if lemma == "name" and owner[0] == USER_ENTITY:
                self.user_names.add(obj[0])
            return [self._make(owner, ATTRIBUTE_NOUNS[lemma], obj)]
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
            if self._misparsed_appos(token):
                roles.append(self.doc[token.i - 1])
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
