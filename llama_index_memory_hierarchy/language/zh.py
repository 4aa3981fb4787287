"""The Chinese table: pronouns, cue words and date patterns (the logic that reads them is language-neutral)."""

from __future__ import annotations

import re

# ------------------------------------------------------------------------------ pronouns
#: The speaker, singular ("我们" is plural: :data:`PLURAL` follows a pronoun that names more than one).
FIRST_PERSON = frozenset({"我"})
FIRST_PERSON_PLURAL = frozenset({"我们"})
#: The one spoken to, singular (plain and polite).
SECOND_PERSON = frozenset({"你", "您"})
THIRD_PERSON = frozenset({"他", "她"})
#: The plural suffix of a pronoun.
PLURAL = "们"

# ------------------------------------------------------------------------------ cue words
#: Words of acknowledgement and small talk ("好的，我记住了。", "嗯嗯").
ACKNOWLEDGEMENTS = frozenset(
    """好 好的 好吧 好嘞 好哒 嗯 嗯嗯 恩 哦 噢 喔 啊 呀 哈 哈哈 哈哈哈 呵呵 谢谢 谢 多谢 感谢 谢啦 收到 明白 明白了
    知道 知道了 了解 记住 记住了 记下 记下来 行 可以 没问题 问题 对 对的 是的 是 懂 懂了 没事 不客气 客气 再见
    拜拜 你好 嗨 晚安 早安 加油 当然 一定 好呀 好啊 棒 太好了 不错""".split()  # noqa: SIM905 (a word list reads better as text)
)
#: Words about the conversation itself (说, 告诉, 记得, 问) and where in it (之前, 刚才), as in English.
META_TALK = frozenset(
    """说 说过 讲 讲过 告诉 告诉过 提 提到 提过 提醒 聊 聊过 聊天 谈 谈过 问 问过 回答 解释 记得 记 记着 忘 忘了
    忘记 想 觉得 意思 之前 以前 刚才 刚刚 已经 上次 再 又 还 事 事情 东西 一下""".split()  # noqa: SIM905 (a word list reads better as text)
)
#: A request to recall ("你还记得...吗").
RECALL_REQUEST = r"[你您](?:还|是否|可)?(?:记得|记不记得|知道)"
#: Asking to be told or reminded ("告诉我你记得什么", "提醒我一下"): a request to recall.
RECALL_IMPERATIVE = r"^\W*请?(?:告诉|提醒)我"
#: Where the user had got to ("我学到哪了", "我们说到哪儿了"): talk about the conversation, as META_TALK.
PROGRESS = r"(?:学|做|说|聊|讲|看)到哪(?:里|儿)?|进度"
#: Words that ask for a time and name none ("哪一年", "几号"): read as no date ("一年" is not a year ago).
ASKED_TIME = re.compile(r"哪一?(?:个)?(?:天|年|月|周|星期|礼拜)|几(?:月|号|点|年)|什么时候|何时")
#: A question that asks for a time ("什么时候...？", "几号...？").
TEMPORAL_INTENT = r"什么时候|何时|哪一?天|哪一?年|哪个月|几月|几号|几点|多久|多长时间|什么日子"

# ------------------------------------------------------------------------------ dates
# dateparser reads relative and absolute expressions; numerals are written as digits first ("三天前" -> "3天前"),
# and month-day dates ("5月2日") parsed by their format.
DIGITS = {ch: i for i, ch in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
NUMBER = re.compile(r"[零〇一二两三四五六七八九十]+(?=\s*(?:个)?(?:天|日|周|星期|礼拜|月|年|号|小时))")
MONTH_DAY = re.compile(r"(?:((?:19|20)\d\d)\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
#: A character without which no Chinese time expression is read (dateparser is not asked).
TIME_CUE = re.compile(r"[年月日号周天昨今明前去上本这星期礼拜早晚]")

# The time words of the time predicates, as in the English table.
_NUMERALS = "一二两三四五六七八九十"
_COUNTED = r"\s*(?:个)?(?:天|周|星期|月|年|小时)"
TIME = r"昨天|今天|前天|刚才|上周|上个?月|去年|周末|星期[一二三四五六日天]|\d{1,2}\s*月\s*\d{1,2}\s*[日号]"
ANY_TIME = (
    r"明天|后天|最近|下周|本周|这周|下个?月|这个月|今年|明年|礼拜[一二三四五六日天]|[上下]午|早上|晚上"
    rf"|[0-9零〇{_NUMERALS}]+{_COUNTED}[前后以]|(?:19|20)\d\d\s*年"
)
EVENT_TIME = rf"昨晚|今早|上星期|前年|[0-9{_NUMERALS}]+{_COUNTED}前"
