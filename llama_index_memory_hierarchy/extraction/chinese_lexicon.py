"""The Chinese reader's lexicon: what each word states (relation verbs and nouns, kin, negations, hedges...),
kept apart from the clause patterns that read it, and the jieba tagger that knows its words."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from llama_index_memory_hierarchy.extraction.relations import NAME_PREDICATE
from llama_index_memory_hierarchy.language import FIRST_PERSON, FIRST_PERSON_PLURAL, SECOND_PERSON, THIRD_PERSON

JIEBA_TYPES = {"nr": "PERSON", "nrt": "PERSON", "nrfg": "PERSON", "ns": "PLACE", "nt": "ORG", "nz": "ENTITY"}
_jieba_ready = threading.Lock()
_jieba_pseg: Any = None

#: Chinese relation verbs and the canonical predicate each states (explicit data, as in English).
ZH_VERBS: dict[str, str] = {
    "喜欢": "likes", "喜爱": "likes", "爱": "loves", "热爱": "loves", "爱好": "likes", "讨厌": "dislikes",
    "恨": "hates", "偏爱": "prefers", "更喜欢": "prefers", "有": "has", "养": "has", "拥有": "has",
    "喝": "drinks", "吃": "eats", "说": "speaks", "讲": "speaks", "会说": "speaks", "学": "learns",
    "学习": "learns", "用": "uses", "使用": "uses", "开": "drives", "弹": "plays", "打": "plays", "踢": "plays",
    "玩": "plays", "读": "reads", "看": "watches", "写": "writes", "认识": "knows", "研究": "studies",
    "教": "teaches", "管理": "manages", "负责": "is_responsible_for", "养成": "has", "穿": "wears",
    "抽": "smokes", "听": "listens_to", "信仰": "believes_in", "支持": "supports", "关注": "follows",
    "做": "does", "修": "fixes", "修复": "fixes", "完成": "finishes", "准备": "prepares", "整理": "organizes",
    "自动化": "automates", "发": "sends", "联系": "contacts", "检查": "checks", "更新": "updates",
    "订": "books", "预订": "books", "买": "buys", "卖": "sells", "去": "goes_to", "访问": "visits",
    "参加": "attends", "骑": "rides", "练": "practices", "练习": "practices", "收集": "collects",
    "嫁给": "married_to", "娶": "married_to", "照顾": "takes_care_of", "经营": "runs", "创办": "founded",
    "打扫": "cleans", "收拾": "tidies", "清洗": "cleans",
}  # fmt: skip
#: Relatives a fact can be about without their name ("我妹妹住在成都" -> User sister_lives_in 成都).
ZH_KIN = {
    "妈妈": "mother", "母亲": "mother", "爸爸": "father", "父亲": "father", "父母": "parents", "哥哥": "brother",
    "弟弟": "brother", "姐姐": "sister", "妹妹": "sister", "儿子": "son", "女儿": "daughter", "妻子": "wife",
    "老婆": "wife", "太太": "wife", "丈夫": "husband", "老公": "husband", "孩子": "children", "爷爷": "grandfather",
    "奶奶": "grandmother", "外公": "grandfather", "外婆": "grandmother",
}  # fmt: skip
#: The user named in the third person (an MCP client or agent writes "用户住在北京").
ZH_USER = {"我", "用户", "该用户"}
#: Verbs of speaking state a language only when their object is one ("会说日语", not "说你好").
ZH_SPEAK = {"speaks"}
ZH_LANGUAGE = re.compile(r"(?:语|文|话)$")
ZH_DATE_WORDS = {"年", "月", "日", "号"}
#: Chinese relation nouns ("我妹妹小红" -> 小红 sister_of User).
ZH_RELATIONS: dict[str, str] = {
    "妻子": "spouse", "老婆": "spouse", "太太": "spouse", "丈夫": "spouse", "老公": "spouse", "爱人": "spouse",
    "妈妈": "mother_of", "母亲": "mother_of", "爸爸": "father_of", "父亲": "father_of", "哥哥": "brother_of",
    "弟弟": "brother_of", "姐姐": "sister_of", "妹妹": "sister_of", "儿子": "son_of", "女儿": "daughter_of",
    "同事": "colleague_of", "朋友": "friend_of", "好朋友": "friend_of", "老板": "boss_of", "经理": "manager_of",
    "领导": "boss_of", "上司": "boss_of", "老师": "teacher_of", "室友": "roommate_of", "男朋友": "boyfriend_of",
    "女朋友": "girlfriend_of", "邻居": "neighbor_of", "同学": "classmate_of", "医生": "doctor_of",
    "导师": "advisor_of", "客户": "client_of", "助理": "assistant_of", "表哥": "cousin_of", "表妹": "cousin_of",
    "堂哥": "cousin_of", "爷爷": "grandfather_of", "奶奶": "grandmother_of", "外婆": "grandmother_of",
    "外公": "grandfather_of", "孩子": "child_of", "未婚妻": "fiancee_of", "未婚夫": "fiance_of",
    "父母": "parent_of",
}  # fmt: skip
#: Words that begin with 有 without stating a possession (degree, time, availability).
ZH_HAVE_ADVERBS = ("有点", "有些", "有时", "有的", "有空", "有事", "有一点")
#: Nouns of the place one comes from ("我老家在长沙" -> hometown 长沙).
ZH_HOMETOWN = {"老家", "家乡", "故乡"}
ZH_ATTRIBUTES = {
    "名字": NAME_PREDICATE,
    "生日": "birthday",
    "职业": "works_as",
    "工作": "works_as",
    "家乡": "hometown",
}
ZH_NEGATIONS = {
    "不",
    "没",
    "没有",
    "从不",
    "从来不",
    "从没",
    "从没有",
    "从来没有",
    "不再",
    "再也不",
    "别",
    "未",
    "不会",
}
#: Verb-object compounds with the relation they state of their indirect object ("给客户发邮件" -> emails 客户).
ZH_VERB_OBJECTS = {
    "发邮件": "emails",
    "打电话": "calls",
    "写信": "writes_to",
    "发消息": "messages",
    "回复": "replies_to",
}
#: Diets jieba reads as one word ("我吃素": the user is vegetarian), and what each says the user is.
ZH_DIETS = {"吃素": "素食者", "吃斋": "素食者", "茹素": "素食者", "吃全素": "纯素食者"}
ZH_NO_LONGER = {"不再", "再也不", "已经不"}
ZH_HEDGES = {"可能", "也许", "大概", "好像", "或许", "估计", "似乎", "应该", "觉得", "认为", "猜", "听说"}
ZH_CONDITIONS = ("如果", "要是", "假如", "万一", "的话", "假设", "除非")
ZH_REQUESTS = {"让", "叫", "要求", "请", "吩咐", "嘱咐", "命令", "派", "安排", "交代", "托"}
ZH_CONTROL = {
    "想": "wants_to", "想要": "wants_to", "要": "plans_to", "打算": "plans_to", "计划": "plans_to",
    "准备": "plans_to", "希望": "hopes_to", "决定": "plans_to", "将": "plans_to", "将要": "plans_to",
}  # fmt: skip
ZH_WORK = {"工作", "上班", "任职", "实习", "就职"}
ZH_STUDY = {"读书", "上学", "读", "念书", "学习", "读大学", "上大学", "留学"}
ZH_LIVE = {"住在", "生活在", "定居在", "居住在", "住", "居住", "生活", "定居"}
ZH_MOVE = {"搬到", "搬去", "搬家到", "移居", "搬到了"}
ZH_JOB = {"当", "做", "担任", "从事"}
#: Fillers between a request and what is asked ("请李娜帮忙订机票").
ZH_HELP = {"帮忙", "帮", "帮我", "去"}
#: Pets a following "叫X" clause names ("我养了一只猫，叫年糕" -> 年糕 cat_of User), as the English path does.
ZH_PETS = {
    "猫": "cat", "小猫": "cat", "猫咪": "cat", "狗": "dog", "小狗": "dog", "狗狗": "dog", "兔子": "rabbit",
    "鹦鹉": "parrot", "仓鼠": "hamster", "乌龟": "tortoise",
}  # fmt: skip
ZH_NAMING = {"叫", "名叫", "叫做"}
#: What 让/叫 + person + one of these says is how they feel ("叫我很开心": makes me happy), never a request.
ZH_FEELINGS = {"开心", "高兴", "难过", "伤心", "生气", "失望", "感动", "担心", "害怕", "放心", "满意", "头疼", "着急"}
ZH_FEELINGS |= {"紧张", "兴奋", "快乐", "幸福", "郁闷", "烦", "痛苦", "舒服", "惊讶", "骄傲", "难受", "后悔", "崩溃"}
#: Seasons, tagged as time words by jieba: an object only where they end the clause ("我不喜欢冬天").
ZH_SEASONS = {"春天", "夏天", "秋天", "冬天", "春季", "夏季", "秋季", "冬季"}
ZH_PHRASE_ENDS = {*ZH_WORK, *ZH_STUDY, *ZH_LIVE, *ZH_JOB, *ZH_VERB_OBJECTS, "过敏", "出差", "旅游", "旅行"}
ZH_NOUNISH = ("n", "eng", "vn", "an", "j", "l")
#: Pronouns and demonstratives: never part of a noun phrase.
ZH_PRONOUNS = FIRST_PERSON | FIRST_PERSON_PLURAL | SECOND_PERSON | THIRD_PERSON | {"它", "这", "那", "这个", "那个"}
ZH_SKIP_FLAGS = ("ul", "uz", "ug", "m", "q", "mq", "u")
ZH_MODIFIER_FLAGS = ("d", "t", "f", "tg", "dg", "c")


def posseg() -> Any:
    """A private jieba POS tokenizer (its dictionary is not shared with other users of jieba)."""
    global _jieba_pseg
    if _jieba_pseg is None:
        with _jieba_ready:
            if _jieba_pseg is None:
                import jieba
                import jieba.posseg as pseg

                jieba.setLogLevel(logging.ERROR)
                tokenizer = jieba.Tokenizer()
                tokenizer.initialize()
                for word, tag in [*((w, "v") for w in ZH_VERBS), *((w, "n") for w in ZH_RELATIONS)]:
                    tokenizer.add_word(word, tag=tag)
                for word in ("过敏", "不再", "再也不", "已经不"):
                    tokenizer.add_word(word, tag="d" if word != "过敏" else "v")
                _jieba_pseg = pseg.POSTokenizer(tokenizer)
    return _jieba_pseg
