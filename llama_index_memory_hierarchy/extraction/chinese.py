"""Chinese facts from clause patterns over jieba part-of-speech tags."""

from __future__ import annotations

import re
from typing import Any

from llama_index_memory_hierarchy.extraction.base import (
    ExtractedEntity,
    ExtractedFact,
    Extraction,
    make_fact,
    unique_facts,
)
from llama_index_memory_hierarchy.extraction.chinese_lexicon import (
    JIEBA_TYPES,
    ZH_ATTRIBUTES,
    ZH_CONDITIONS,
    ZH_CONTROL,
    ZH_DATE_WORDS,
    ZH_DIETS,
    ZH_FEELINGS,
    ZH_HAVE_ADVERBS,
    ZH_HEDGES,
    ZH_HELP,
    ZH_HOMETOWN,
    ZH_JOB,
    ZH_KIN,
    ZH_LANGUAGE,
    ZH_LIVE,
    ZH_MODIFIER_FLAGS,
    ZH_MOVE,
    ZH_NAMING,
    ZH_NEGATIONS,
    ZH_NO_LONGER,
    ZH_NOUNISH,
    ZH_PETS,
    ZH_PHRASE_ENDS,
    ZH_PRONOUNS,
    ZH_RELATIONS,
    ZH_REQUESTS,
    ZH_SEASONS,
    ZH_SKIP_FLAGS,
    ZH_SPEAK,
    ZH_STUDY,
    ZH_USER,
    ZH_VERB_OBJECTS,
    ZH_VERBS,
    ZH_WORK,
    posseg,
)
from llama_index_memory_hierarchy.extraction.relations import (
    NAME_PREDICATE,
    ORG_PREDICATES,
    PLACE_PREDICATES,
    USER_ENTITY,
    base_form,
    is_negative,
    negate_predicate,
    normalize_predicate,
)
from llama_index_memory_hierarchy.language import HAN_CHAR, THIRD_PERSON, split_sentences


def _verb_object(word: str, flag: str) -> bool:
    """ "喝酒", "弹钢琴": a relation verb and its object written as one word (not "学生", "打算")."""
    if word in ZH_VERBS or word in ZH_CONTROL or word in ZH_REQUESTS or word in ZH_RELATIONS or len(word) < 2:
        return False
    if word.startswith(ZH_HAVE_ADVERBS):  # "有点累", "有空": "a bit tired", "free", nothing owned
        return False
    return word[0] in ZH_VERBS and (flag.startswith("v") or len(word) > 2)


def _verbal(pair: tuple[str, str]) -> bool:
    word, flag = pair
    return flag.startswith("v") or word in ZH_VERBS or _verb_object(word, flag)


class _ChineseReader:
    """Clause patterns over jieba part-of-speech tags: subject, negation/modality, relation verb, object."""

    NAME = "jieba"

    def __init__(self) -> None:
        self.people: list[str] = []
        self.facts: list[ExtractedFact | None] = []
        self.entities: dict[str, ExtractedEntity] = {}
        #: The sentence speaks of 用户 in the third person: its 我 is the writer (an agent), not the user.
        self.reported = False

    def read(self, text: str) -> Extraction:
        for sentence in split_sentences(text, semicolons=True):
            if not HAN_CHAR.search(sentence) or self._skip_sentence(sentence):
                continue
            self.reported = any(user in sentence for user in ZH_USER - {"我"})
            subject: tuple[str, str] | None = None
            for clause in re.split(r"[，,：:。！!；;\n]+|但是|所以|而且|因为|不过", sentence):
                words = self._words(clause)
                if words:
                    subject = self._clause(words, subject)
        return Extraction(entities=list(self.entities.values()), facts=unique_facts(self.facts))

    @staticmethod
    def _skip_sentence(sentence: str) -> bool:
        stripped = sentence.strip().rstrip("。！!；;")
        return (
            "?" in sentence
            or "？" in sentence
            or stripped.endswith(("吗", "呢", "吧"))
            or any(c in sentence for c in ZH_CONDITIONS)
        )

    def _words(self, clause: str) -> list[tuple[str, str]]:
        words: list[tuple[str, str]] = []
        for pair in posseg().cut(clause.strip()):
            word, flag = pair.word, pair.flag
            if not word.strip():
                continue
            if len(word) > 1 and word[0] == "我" and flag != "r":  # "我会" tagged as one noun
                words += [("我", "r"), (word[1:], "v" if word[1:] in ZH_VERBS or word[1:] == "会" else flag)]
                continue
            if len(word) > 1 and word[0] in "不没" and (word[1:] in ZH_VERBS or word[1:] in ZH_LIVE):  # "不吃"
                words += [(word[0], "d"), (word[1:], "v")]
                continue
            if flag in {"nr", "nrt"} and len(word) == 1 and words and words[-1][0] in {"小", "老"}:  # "小王"
                word, flag = words.pop()[0] + word, "nr"
            if flag in {"nr", "nrt"} and len(word) == 2 and word[1] in ZH_VERBS and words and words[-1][0] in "小老":
                words += [(words.pop()[0] + word[0], "nr"), (word[1], "v")]  # "小刘修电脑", read as 小 + 刘修
                continue
            if flag in JIEBA_TYPES and len(word) > 1:
                self.entities.setdefault(word, ExtractedEntity(name=word, type=JIEBA_TYPES[flag]))
            if word in ZH_VERBS and not flag.startswith(("nr", "ns", "nt")):
                flag = "v"
            words.append((word, flag))
        return words

    # ------------------------------------------------------------------ pieces
    def _person(self, word: str, flag: str) -> tuple[str, str] | None:
        if word in ZH_USER:
            return None if word == "我" and self.reported else (USER_ENTITY, "PERSON")
        if word in THIRD_PERSON:
            return (self.people[-1], "PERSON") if len(set(self.people)) == 1 else None
        if flag in {"nr", "nrt", "nrfg"} and len(word) > 1:
            return word, "PERSON"
        if flag in {"nt", "nz", "ns"} and len(word) > 1:
            return word, JIEBA_TYPES[flag]
        return None

    def _subject(self, words: list[tuple[str, str]]) -> tuple[tuple[str, str] | None, int]:
        """The clause's subject and where its predicate starts; relation nouns on the way become facts."""
        if not words:
            return None, 0
        first = self._person(*words[0])
        if first is None:
            if words[0][0] in ZH_RELATIONS and len(words) > 1:  # "老板王五让我..." (whose boss is unknown)
                name = self._person(*words[1])
                if name is not None and name[0] != USER_ENTITY:
                    return self._note(name), 2
            return None, 0
        i = 1
        if first[0] == USER_ENTITY and i < len(words):
            j = i + 1 if words[i][0] == "的" else i
            if j < len(words) and words[j][0] in ZH_RELATIONS:
                if j + 1 < len(words) and (name := self._person(*words[j + 1])) is not None:
                    self._add(name, ZH_RELATIONS[words[j][0]], first)
                    return self._note(name), j + 2
                if j + 2 < len(words) and words[j + 1][0] in {"是", "叫"}:  # "用户的儿子叫小明"
                    name = self._person(*words[j + 2])
                    if name is not None and name[0] != USER_ENTITY and j + 3 == len(words):
                        self._add(self._note(name), ZH_RELATIONS[words[j][0]], first)
                return None, len(words)  # "我妹妹是护士": no name to state it about (see _kin)
        if first[1] == "PERSON" and first[0] != USER_ENTITY:
            self._note(first)
        return first, i

    def _note(self, person: tuple[str, str]) -> tuple[str, str]:
        if person[1] == "PERSON" and person[0] != USER_ENTITY:
            self.people.append(person[0])
        return person

    def _object(self, words: list[tuple[str, str]], start: int) -> tuple[tuple[str, str] | None, int]:
        """The noun phrase at ``start`` (quantifiers skipped, "的" kept inside): text, type, and its end.

        A phrase ends at a verb, including nominal verbs of work, study and living ("在谷歌工作")."""
        i = start
        while i < len(words) and words[i][1].startswith(ZH_SKIP_FLAGS) and words[i][0] != "的":
            i += 1
        if i < len(words) and words[i][0] == "我" and i + 1 < len(words) and words[i + 1][0] == "的":
            i += 2
        begin, end = i, i
        while end < len(words):
            word, flag = words[end]
            if word == "的" and end > begin and end + 1 < len(words):
                end += 1
                continue
            if word in ZH_PHRASE_ENDS:
                break
            last = end + 1 == len(words) or words[end + 1][1] == "x"
            if (
                (flag.startswith(ZH_NOUNISH) or flag in {"nr", "ns", "nt", "nz", "b", "a", "r"})
                and not (flag == "r" and word in ZH_PRONOUNS)
            ) or (word in ZH_SEASONS and last):
                end += 1
                continue
            break
        if end == begin and begin < len(words) and words[begin][1] == "a" and len(words[begin][0]) > 1:
            end = begin + 1  # a lone two-character word tagged as an adjective ("可乐", "微软")
        while end > begin + 1 and (words[end - 1][0] == "的" or words[end - 1][1] in {"a", "r", "b"}):
            end -= 1
        if words[end - 1][0] == "的" if end > begin else False:
            end -= 1
        if end == begin:
            return None, start
        text = "".join(w for w, _ in words[begin:end])
        flags = {f for _, f in words[begin:end]}
        kind = "CONCEPT"
        if end - begin == 1:
            kind = JIEBA_TYPES.get(words[begin][1], "CONCEPT")
        if text in {"东西", "事情", "事", "时间", "今天", "明天", "昨天"} or (
            flags <= {"t"} and text not in ZH_SEASONS
        ):
            return None, start
        return (text, kind), end

    def _add(self, subject: tuple[str, str] | None, predicate: str, obj: tuple[str, str] | None) -> None:
        if subject is None or obj is None:
            return
        canonical = normalize_predicate(predicate)
        subject_type, object_type = subject[1], obj[1]
        if canonical in PLACE_PREDICATES:
            object_type = "PLACE"
        elif canonical in ORG_PREDICATES:
            object_type = "ORG"
        self.facts.append(make_fact(subject[0], canonical, obj[0], 0.55, self.NAME, subject_type, object_type))

    # ------------------------------------------------------------------ clause
    def _clause(self, words: list[tuple[str, str]], inherited: tuple[str, str] | None) -> tuple[str, str] | None:
        subject, i = self._subject(words)
        if subject is None and self._pet_name(words):
            return None
        if subject is None:
            request = next((k for k, (w, _) in enumerate(words) if w in ZH_REQUESTS), None)
            if request is not None and request + 1 < len(words):  # "老板让我整理会议记录": whoever asks
                agent = self._person(*words[request + 1])
                if agent is not None:
                    self._predicate(agent, words, request + 2, negated=False, prefix="asked_to")
                return None
            kin = self._kin(words)
            if kin is not None:
                self._kin_clause(words, *kin)
                return None
            if i >= len(words) or words[0][0] in ZH_RELATIONS:
                return None
            subject, i = inherited, 0
            if subject is None:
                return None
        if words[0][0] in ZH_USER and len(words) > 2 and words[1][0] == "的" and words[2][0] in ZH_ATTRIBUTES:
            self._attribute(words[2][0], words[3:])
            return subject
        self._predicate(subject, words, i, negated=False, prefix=None)
        return subject

    def _pet_name(self, words: list[tuple[str, str]]) -> bool:
        """ "…养了一只猫，叫年糕": a clause of just "叫" and a name right after the user's pet."""
        last = self.facts[-1] if self.facts else None
        if len(words) != 2 or words[0][0] not in ZH_NAMING or last is None or last.predicate != "has":
            return False
        if last.subject != USER_ENTITY or last.object not in ZH_PETS or words[1][0] in ZH_PRONOUNS:
            return False
        name, flag = words[1]
        doubled = flag == "o" and len(name) == 2 and name[0] == name[1]  # jieba tags 咪咪 "o"
        if not (flag.startswith(("n", "nr", "nz")) or doubled) or name in ZH_PETS:
            return False
        self._add((words[1][0], "ENTITY"), f"{ZH_PETS[last.object]}_of", (USER_ENTITY, "PERSON"))
        return True

    @staticmethod
    def _kin(words: list[tuple[str, str]]) -> tuple[str, int] | None:
        """ "我妹妹…", "用户的女儿…", "妹妹…" (a bare kin word is the speaker's): the role, where the clause goes on."""
        j = 1 if words[0][0] in ZH_USER else 0
        j += 1 if j and j < len(words) and words[j][0] == "的" else 0
        if j >= len(words) - 1 or words[j][0] not in ZH_KIN:
            return None
        return ZH_KIN[words[j][0]], j + 1

    def _kin_clause(self, words: list[tuple[str, str]], role: str, start: int) -> None:
        """A relative without a name: the fact is the user's, its predicate prefixed with the role (not negated)."""
        mark = (f"kin:{role}", "PERSON")
        before = len(self.facts)
        self._predicate(mark, words, start, negated=False, prefix=None)
        found, self.facts = self.facts[before:], self.facts[:before]
        for fact in found:
            if fact is not None and fact.subject == mark[0] and not is_negative(fact.predicate):
                predicate = normalize_predicate(f"{role}_{fact.predicate}")
                self.facts.append(fact.model_copy(update={"subject": USER_ENTITY, "predicate": predicate}))

    @staticmethod
    def _date(words: list[tuple[str, str]], start: int) -> tuple[str, int] | None:
        """ "2019年5月3日出生": the date a birth is given with, and where 出生 is."""
        end = start
        while end < len(words) and (words[end][1] in {"m", "t", "mq"} or words[end][0] in ZH_DATE_WORDS):
            end += 1
        if end == start or end >= len(words) or words[end][0] not in {"出生", "生"}:
            return None
        date = "".join(w for w, _ in words[start:end])
        return (date, end) if re.search(r"\d|[〇一二三四五六七八九十]", date) else None

    def _attribute(self, noun: str, rest: list[tuple[str, str]]) -> None:
        """ "我的名字是张三" / "我的生日是五月五日"."""
        if not rest or rest[0][0] not in {"是", "叫"}:
            return
        value = "".join(w for w, _ in rest[1:]).strip()
        if value:
            kind = "PERSON" if ZH_ATTRIBUTES[noun] == NAME_PREDICATE else "CONCEPT"
            self._add((USER_ENTITY, "PERSON"), ZH_ATTRIBUTES[noun], (value, kind))

    def _predicate(
        self, subject: tuple[str, str], words: list[tuple[str, str]], i: int, *, negated: bool, prefix: str | None
    ) -> None:
        while i < len(words):
            word, flag = words[i]
            if word in ZH_HEDGES:
                return
            if word in ZH_NEGATIONS or word in ZH_NO_LONGER or (flag == "d" and word.endswith("不")):
                negated = True
            elif word == "不是":
                negated = True
                break
            elif word in ZH_CONTROL and prefix is None and i + 1 < len(words) and _verbal(words[i + 1]):
                prefix = ZH_CONTROL[word]
            elif word == "会" and i + 1 < len(words) and words[i + 1][1].startswith("v"):
                pass  # ability: "我会说法语" states the skill
            elif not (
                flag.startswith(ZH_MODIFIER_FLAGS)
                or word in {"已经", "还", "也", "都", "最", "一直", "现在"}
                or (flag == "r" and word.startswith("每"))
            ):
                break
            i += 1
        if i >= len(words):
            return
        birth = self._date(words, i + 1 if words[i][0] == "是" else i)
        if birth is not None and not negated and prefix is None:
            self._add(subject, "born_on", (birth[0], "CONCEPT"))
            return
        if prefix == "asked_to" and (words[i][1] == "d" or words[i][0] in ZH_FEELINGS):
            return  # "叫我很开心", "让我难过": a feeling caused, nobody asked to do anything
        if prefix == "asked_to" and words[i][0] in ZH_HELP and i + 1 < len(words) and _verbal(words[i + 1]):
            i += 1  # "请李娜帮忙订机票": the help is the booking
        if prefix == "asked_to" and words[i][0] == "去" and i + 1 < len(words) and words[i + 1][1] != "ns":
            return  # "让小王去买菜": the errand (jieba's noun 买菜), not a place to go to
        word, flag = words[i]
        rest = i + 1

        def relation(predicate: str) -> str:
            if prefix is not None:
                predicate = f"{prefix}_{base_form(predicate.split('_')[0]) or predicate}" + (
                    "_" + predicate.split("_", 1)[1] if "_" in predicate else ""
                )
            return negate_predicate(normalize_predicate(predicate)) if negated else predicate

        if negated and words[i - 1][0] in {"没有", "没"} and word not in ZH_VERBS and not flag.startswith("v"):
            obj = self._object(words, i)[0] or self._last_word(words, i, 1)  # "我没有车"
            self._add(subject, relation("has"), obj)
        elif word in {"是", "不是"}:
            self._copula(subject, words, rest, negated or word == "不是")
        elif word in {"叫", "名叫", "叫做"} and subject[0] == USER_ENTITY and not negated:
            obj, _ = self._object(words, rest)
            if obj is not None:
                self._add(subject, NAME_PREDICATE, (obj[0], "PERSON"))
        elif word in ZH_LIVE or word in ZH_MOVE:
            j = rest + 1 if rest < len(words) and words[rest][0] in {"在", "到"} else rest
            obj = self._object(words, j)[0] or (self._last_word(words, j, 2) if j > rest else None)
            if obj is not None and (word not in {"生活", "居住"} or j > rest):
                self._add(subject, relation("lives_in"), obj)
        elif word == "出生" and rest + 1 < len(words) and words[rest][0] == "在" and not negated:
            obj = self._object(words, rest + 1)[0] or self._last_word(words, rest + 1, 2)  # "我出生在西安"
            self._add(subject, "born_in", obj)
        elif word == "在":
            self._located(subject, words, rest, relation)
        elif word in ZH_HOMETOWN and rest < len(words) and words[rest][0] in {"在", "是"} and not negated:
            obj = self._object(words, rest + 1)[0] or self._last_word(words, rest + 1, 2)
            self._add(subject, "hometown", obj)
        elif word == "对":
            obj, end = self._object(words, rest)
            if obj is not None and end < len(words) and words[end][0] == "过敏":
                self._add(subject, relation("is_allergic_to"), obj)
        elif word in ZH_REQUESTS and rest < len(words) and not negated:
            agent = self._person(*words[rest])
            if agent is not None:
                self._predicate(agent, words, rest + 1, negated=False, prefix="asked_to")
        elif word == "把":  # "把每周的报表自动化": the object comes before its verb
            obj, end = self._object(words, rest)
            if obj is not None and end < len(words) and _verbal(words[end]):
                verb = words[end][0]
                self._add(subject, relation(ZH_VERBS.get(verb, verb)), obj)
        elif word == "给":
            target, end = self._object(words, rest)
            if target is None and rest < len(words):
                target, end = self._person(*words[rest]), rest + 1
            if target is not None and end < len(words) and words[end][0] in ZH_VERB_OBJECTS:
                self._add(subject, relation(ZH_VERB_OBJECTS[words[end][0]]), target)
        elif word in ZH_DIETS:
            self._add(subject, relation("is"), (ZH_DIETS[word], "CONCEPT"))
        elif word in ZH_JOB:
            obj = self._job(words, rest)
            if obj is not None:
                self._add(subject, relation("works_as"), obj)
        elif _verbal((word, flag)):
            self._verb(subject, words, i, relation)

    def _verb(self, subject: tuple[str, str], words: list[tuple[str, str]], i: int, relation: Any) -> None:
        word, _ = words[i]
        rest = i + 1
        if _verb_object(word, words[i][1]):  # "喝酒", "打篮球": verb + object
            predicate, obj = ZH_VERBS[word[0]], (word[1:], "CONCEPT")
            if word[1:] in ZH_VERBS:  # "爱看" + "电影": a liking whose object is the activity, 看电影
                activity, _ = self._object(words, rest)
                if activity is None:
                    return
                obj = (word[1:] + activity[0], "CONCEPT")
            self._add(subject, relation(predicate), obj)
            return
        preference = ZH_VERBS.get(word) in {"likes", "loves", "hates", "dislikes", "prefers"}
        if preference and rest < len(words) and words[rest][0] == "的":  # "我最喜欢的颜色是蓝色"
            copula = next((k for k in range(rest, len(words)) if words[k][0] == "是"), None)
            obj = self._object(words, copula + 1)[0] if copula is not None else None
            self._add(subject, relation(ZH_VERBS[word]), obj)
            return
        if preference and rest < len(words) and words[rest][1].startswith("v"):
            # "我喜欢打篮球": the activity is the object
            activity = "".join(w for w, _ in words[rest:]).strip("了的")
            if activity:
                self._add(subject, relation(ZH_VERBS[word]), (activity, "CONCEPT"))
            return
        if word not in ZH_VERBS and len(word) < 2:
            return
        while rest < len(words) and words[rest][1] in {"ul", "uz", "ug"}:
            rest += 1
        if word == "去" and rest < len(words) and words[rest - 1][0] == "过":
            predicate = "visited"
        else:
            predicate = ZH_VERBS.get(word, word)
        obj, _ = self._object(words, rest)
        if obj is None and predicate == "has":  # "我没有车": one character jieba tags a morpheme
            obj = self._last_word(words, rest, 1)
        if obj is not None and (predicate not in ZH_SPEAK or ZH_LANGUAGE.search(obj[0])):
            self._add(subject, relation(predicate), obj)

    def _copula(self, subject: tuple[str, str], words: list[tuple[str, str]], start: int, negated: bool) -> None:
        """ "我是张三" -> named; "李明是我的同事" -> colleague_of User; "我是一名工程师" -> is 工程师."""
        i = start
        while i < len(words) and words[i][1] in {"m", "q", "mq"}:
            i += 1
        if i >= len(words):
            return
        owner = self._person(*words[i])
        if owner is not None and i + 2 < len(words) and words[i + 1][0] == "的" and words[i + 2][0] in ZH_RELATIONS:
            relation = ZH_RELATIONS[words[i + 2][0]]
            self._add(subject, negate_predicate(relation) if negated else relation, owner)
            return
        if owner is not None and owner[1] == "PERSON" and i + 1 == len(words):
            if subject[0] == USER_ENTITY and not negated:
                self._add(subject, NAME_PREDICATE, owner)
            return
        obj, _ = self._object(words, i)
        if obj is not None:
            self._add(subject, "is_not" if negated else "is", obj)

    def _located(self, subject: tuple[str, str], words: list[tuple[str, str]], start: int, relation: Any) -> None:
        """ "在阿里巴巴工作" -> works_at; "在北京的谷歌工作" -> works_at 谷歌; "在北京生活" -> lives_in; "在X当Y"."""
        place, end = self._object(words, start)
        if place is None or end >= len(words):
            return
        if "的" in place[0] and end < len(words):
            place = (place[0].rsplit("的", 1)[1], place[1]) if place[0].rsplit("的", 1)[1] else place
        verb = words[end][0]
        if verb in ZH_WORK:
            self._add(subject, relation("works_at"), place)
        elif verb in ZH_STUDY:
            self._add(subject, relation("studies_at"), place)
        elif verb in {"生活", "居住", "住", "定居"}:
            self._add(subject, relation("lives_in"), place)
        elif verb in ZH_JOB:  # "在上海做会计": a job in a city; "在医院当护士": a job at a workplace
            job = self._job(words, end + 1)
            self._add(subject, relation("works_in" if place[1] == "PLACE" else "works_at"), place)
            if job is not None:
                self._add(subject, relation("works_as"), job)

    def _job(self, words: list[tuple[str, str]], start: int) -> tuple[str, str] | None:
        """What follows 做/当: a noun phrase, or one last word jieba tagged otherwise ("会计" as a verb)."""
        return self._object(words, start)[0] or self._last_word(words, start, 2)

    @staticmethod
    def _last_word(words: list[tuple[str, str]], start: int, shortest: int) -> tuple[str, str] | None:
        """The clause's last word at ``start`` when jieba mistagged it ("大连" as an adverb, "车" as a morpheme)."""
        if start != len(words) - 1:
            return None
        word, flag = words[start]
        if len(word) < shortest or not HAN_CHAR.fullmatch(word[0]) or flag.startswith(("u", "y", "e", "x", "p", "c")):
            return None
        return (word, "CONCEPT")


def jieba_extract(text: str) -> Extraction:
    """Chinese facts from one text (see :class:`_ChineseReader`)."""
    return _ChineseReader().read(text)
