"""Language-aware text analysis, in one place: what the keyword index, the retrieval priors and the router read.

Everything that depends on the language of a text lives here, built on maintained libraries
(each imported lazily, on first use):

* :func:`detect_language`: ``"zh"``, ``"ja"``, ``"en"`` or ``"und"`` from Unicode script
  ranges (enough to tell Chinese from English, also in mixed text).
* :func:`keyword_tokens`: the one tokenizer of the keyword index, for stored text and
  queries alike: NFKC, case-folded Unicode word runs, Chinese/Japanese runs segmented by
  ``jieba``. :func:`stem` (Snowball English via ``PyStemmer``; Chinese words as they are)
  gives :func:`index_terms`, what the index stores and what its queries search.
* :func:`query_terms`: a question's content words: stop-words removed with the maintained
  lists that ``bm25s`` ships (NLTK's English list, a Chinese list).
* :func:`extract_time_hints`: the dates and periods a text names, relative to an event
  time: Chinese through ``dateparser`` (``"上周"``, ``"5月2日"``, ``"三天前"``, ``"昨天晚上"``),
  English through this module's patterns (``"8 May, 2023"``, ``"last week"``, ``"in May"``),
  plus :func:`has_temporal_intent` (the question asks *when*) and :func:`has_time_expression`
  (a text mentions a time), in both languages.
* :func:`person_names`: people named in a text: spaCy's English NER (``en_core_web_sm``,
  extra ``nlp``) and jieba's part-of-speech tag ``nr`` for Chinese; :func:`mentioned_names`
  matches known names in a query (whole words in English, the characters in Chinese).

Changing what :func:`index_terms` returns changes the keyword index: bump
:data:`ANALYZER_VERSION`, and existing stores are told to run ``lmh reindex``.
"""

from __future__ import annotations

import calendar
import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Literal

from llama_index_memory_hierarchy.types import as_utc

logger = logging.getLogger(__name__)

#: Version of the keyword analysis (:func:`index_terms`); stored with the record store.
#: 1: light English stemmer (before this module); 2: Snowball English stemmer; 3: ordinals as their numbers
#: ("29th" -> "29"), and a derived memory (a session summary) indexed without the turns before it, and no turn's
#: context (``EpisodicMemory.abuild_records``).
ANALYZER_VERSION = 3

# ------------------------------------------------------------------------------ scripts
# Han ideographs (+ extensions, compatibility) and hiragana: segmented with jieba.
_HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_HIRAGANA = "\u3041-\u309f"
# Katakana (loanwords): kept as whole words; jieba's dictionary would split them into characters.
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
# Combining marks of common scripts, which Python's ``\w`` does not count as word characters but
# which belong inside words (Latin diacritics after NFKC leftovers, Hebrew, Arabic, Indic, Thai, Lao).
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"
    "\u0610-\u061a\u064b-\u065f\u0670\u0900-\u0963\u0966-\u0dff\u0e00-\u0eff"
)
_CJK = _HAN + _HIRAGANA
_TOKEN = re.compile(
    rf"(?P<cjk>[{_CJK}]+)|(?P<kana>[{_KATAKANA}]+)|(?P<word>(?:(?![{_CJK}{_KATAKANA}])(?:[^\W_]|[{_MARKS}]))+)"
)
_HAN_CHAR = re.compile(f"[{_HAN}]")
_KANA_CHAR = re.compile(f"[{_HIRAGANA}{_KATAKANA}]")
_LATIN_CHAR = re.compile(r"[A-Za-z\u00c0-\u024f]")

Language = Literal["zh", "ja", "en", "und"]


def detect_language(text: str) -> Language:
    """The main language of ``text`` by script: ``"zh"``, ``"ja"``, ``"en"`` (Latin script) or ``"und"``.

    A Han character carries about as much as a short Latin word, so mixed text counts each
    Han character as three Latin letters: ``"我在学Python"`` is Chinese, ``"I love 川菜 a lot"``
    English. Kana make it Japanese.
    """
    if not text:
        return "und"
    if _KANA_CHAR.search(text):
        return "ja"
    han = len(_HAN_CHAR.findall(text))
    latin = len(_LATIN_CHAR.findall(text))
    if not han and not latin:
        return "und"
    return "zh" if 3 * han >= latin else "en"


def has_han(text: str) -> bool:
    """Whether ``text`` holds any Han (Chinese) character."""
    return bool(_HAN_CHAR.search(text))


# ------------------------------------------------------------------------------ tokens
_jieba_lock = threading.Lock()
_jieba: Any = None


def _jieba_module() -> Any:
    """jieba, imported and initialised once, quietly."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.ERROR)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def _cut_for_search() -> Callable[[str], Iterator[str]]:
    """jieba's search-mode segmenter (a long word also yields its shorter words)."""
    return _jieba_module().cut_for_search


def keyword_tokens(text: str) -> list[str]:
    """Lower-case Unicode word tokens of ``text``; Chinese/Japanese runs segmented with jieba.

    Punctuation, symbols and whitespace are dropped, so user text cannot smuggle in query
    syntax. The same function tokenizes stored text and search text, so matching is
    consistent across keyword index backends.
    """
    if not text:
        return []
    normalised = unicodedata.normalize("NFKC", text).casefold()
    tokens: list[str] = []
    for match in _TOKEN.finditer(normalised):
        run = match.group("cjk")
        if run is None:
            tokens.append(match.group(0))
            continue
        for word in _cut_for_search()(run):
            word = word.strip()
            if word:
                tokens.append(word)
    return tokens


_stemmers = threading.local()  # PyStemmer objects are not safe to share between threads


def _english_stemmer() -> Any:
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        import Stemmer

        stemmer = _stemmers.english = Stemmer.Stemmer("english")
    return stemmer


#: An English ordinal number ("29th", "2nd"): indexed as its number, as dates are written ("29 April 2023").
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")


def stem(token: str) -> str:
    """The Snowball (Porter 2) English stem of a Latin-letter token, the number of an ordinal; any other token as it is.

    ``camping``/``camped``/``camps`` -> ``camp``, ``parties``/``party`` -> ``parti``, ``29th`` -> ``29``.
    Other tokens with digits, non-Latin words (Chinese, Cyrillic...) and words of three letters
    or fewer are kept unchanged. Apply it to stored text and queries alike.
    """
    if len(token) <= 3 or not token.isascii() or not token.isalpha():
        ordinal = _ORDINAL.fullmatch(token) if token[:1].isdigit() else None
        return ordinal.group(1) if ordinal else token
    return _english_stemmer().stemWord(token)


# After . ! ? a space ends a sentence; after Chinese 。！？ nothing need follow (no spaces between words).
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+")
_QUESTION_END = re.compile(r"[?？][\s\"'”’）)]*$")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after . ! ? and 。！？, and at line breaks), stripped, non-empty."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def statements(text: str) -> str:
    """What ``text`` states: its sentences that are not questions, and the clauses of a question in which
    its speaker first speaks of itself, joined by spaces.

    Why: a question asserts nothing. "Which cuisines do you like?" holds every word of the later
    question "which cuisines do I like?" and answers none of it; the turn after it does. Yet
    "我很喜欢打羽毛球，你也喜欢运动吗？" states what its speaker likes before it asks.
    """
    return " ".join(clause for clause, asking, _ in _clauses(text) if not asking)


def without_self_statements(text: str) -> str:
    """``text`` without the clauses in which its speaker speaks of itself (its first party pronoun is "I"/"我").

    Why: a reply answers what it was asked and what was said of it ("Congrats on the new studio! How does
    it feel?"), not what the asker says of itself ("I love badminton, do you like sports?": the badminton
    is the asker's).
    """
    return " ".join(clause for clause, _, of_self in _clauses(text) if not of_self)


def _clauses(text: str) -> list[tuple[str, bool, bool]]:
    """The clauses of ``text``, each with whether it asks and whether its speaker speaks of itself in it.

    A question's last clause asks; so do its other clauses, except those whose first party is the speaker.
    """
    out = []
    for sentence in split_sentences(text):
        question = bool(_QUESTION_END.search(sentence))
        parts = [c for c in _CLAUSE_END.split(sentence) if c.strip()]
        for i, clause in enumerate(parts):
            of_self = _first_party(clause) == "user"  # "I"/"我": its speaker
            out.append((clause, question and (i == len(parts) - 1 or not of_self), of_self))
    return out


def asks(text: str) -> bool:
    """Whether ``text`` asks a question (one of its sentences is one): the turn after it may be the answer."""
    return any(_QUESTION_END.search(s) for s in split_sentences(text))


def index_terms(text: str) -> list[str]:
    """Keyword tokens, stemmed: what the keyword index stores for ``text`` and what its queries search."""
    return stemmed(keyword_tokens(text))


def stemmed(tokens: Sequence[str]) -> list[str]:
    """:func:`stem` of each of ``tokens`` (from :func:`keyword_tokens`)."""
    if not tokens:
        return []
    stemmer = _english_stemmer()
    return [
        stemmer.stemWord(t) if len(t) > 3 and t.isascii() and t.isalpha() else stem(t)  # as stem(), in one call
        for t in tokens
    ]


def keyword_text(text: str) -> str:
    """The text the keyword index stores: :func:`index_terms` joined by single spaces."""
    return " ".join(index_terms(text))


@lru_cache(maxsize=1)
def query_stopwords() -> frozenset[str]:
    """Words that carry no content in a question, English and Chinese (maintained lists shipped by ``bm25s``).

    English: NLTK's list (question words, auxiliaries, pronouns, determiners, prepositions),
    Chinese: bm25s's Chinese list (function words, pronouns, question particles). Removed from
    keyword queries only, never from stored text.
    """
    from bm25s.stopwords import STOPWORDS_CHINESE, STOPWORDS_EN_PLUS

    words = {w.casefold() for w in STOPWORDS_EN_PLUS} | set(STOPWORDS_CHINESE)
    # The tokenizer splits contractions: "didn't" -> "didn", "t"; the list has both halves.
    return frozenset(words)


#: Words of acknowledgement and small talk, English and Chinese: a turn of nothing else says nothing to remember
#: ("ok thanks", "got it, sounds good", "好的，我记住了。", "嗯嗯"), whatever words of a query it shares.
ACKNOWLEDGEMENTS = frozenset(
    """ok okay okey k kk thanks thank thx ty cheers sure yes yeah yep yup yea no nope nah noted got gotcha
    understood understand see cool great nice good fine alright right sounds sound remember remembered
    hmm hm mm mhm uh um ah oh wow haha hahaha lol bye goodbye hello hi hey welcome np problem perfect awesome
    indeed exactly agree agreed true totally definitely course appreciate appreciated pleasure lot makes
    sense will""".split()  # noqa: SIM905 (a word list reads better as text)
) | frozenset(
    """好 好的 好吧 好嘞 好哒 嗯 嗯嗯 恩 哦 噢 喔 啊 呀 哈 哈哈 哈哈哈 呵呵 谢谢 谢 多谢 感谢 谢啦 收到 明白 明白了
    知道 知道了 了解 记住 记住了 记下 记下来 行 可以 没问题 问题 对 对的 是的 是 懂 懂了 没事 不客气 客气 再见
    拜拜 你好 嗨 晚安 早安 加油 当然 一定 好呀 好啊 棒 太好了 不错""".split()  # noqa: SIM905
)


def query_terms(
    query: str,
    *,
    stopwords: Iterable[str] | None = None,
    tokenizer: Callable[[str], list[str]] = keyword_tokens,
) -> list[str]:
    """Content words of a question for a keyword search, unique, in order (not stemmed).

    ``"What did Odile paint?"`` gives ``["odile", "paint"]``; ``"我的经理是谁？"``
    gives ``["经理"]``. When every word is a stop-word the query's own tokens are returned,
    so a search never goes empty. ``tokenizer`` must be the one the keyword index uses.
    """
    stop = query_stopwords() if stopwords is None else frozenset(stopwords)
    tokens = tokenizer(query)
    seen: dict[str, None] = {}
    for token in tokens:
        if token not in stop and not _is_punctuation(token):
            seen.setdefault(token, None)
    return list(seen) or list(dict.fromkeys(tokens))


def _is_punctuation(token: str) -> bool:
    return all(unicodedata.category(ch)[0] in "PSZ" for ch in token)


# ------------------------------------------------------------------------------ time
@dataclass(frozen=True)
class TimeHint:
    """A time a text refers to: the interval ``[start, end)`` and how precise it is.

    ``yearless``: the text named no year ("5月2日", "on May 2nd", "in April"); ``start`` is then
    the latest such day or month not after the reference time, and :meth:`in_year` the same day
    or month of another year: a memory of that day in any year answers it.
    """

    start: datetime
    end: datetime
    granularity: Literal["day", "week", "month", "season", "year"]
    text: str = field(default="", compare=False)
    yearless: bool = False

    def in_year(self, year: int) -> TimeHint | None:
        """The same day or month in ``year`` (None for 29 February in a common year)."""
        try:
            start = self.start.replace(year=year)
        except ValueError:
            return None
        return replace(self, start=start, end=start + (self.end - self.start))


def _utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=timezone.utc)


def _month_span(year: int, month: int, count: int = 1) -> tuple[datetime, datetime]:
    start = _utc(year, month, 1)
    end_month = month + count
    end = _utc(year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1)
    return start, end


def _latest_year(now: datetime, month: int, day: int = 1) -> int:
    """The year of the latest ``month``/``day`` not after ``now`` (whether that day exists or not)."""
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _latest_day(now: datetime, month: int, day: int) -> datetime | None:
    """The latest ``month``/``day`` not after ``now`` (29 February: of the last leap year); None if no such day."""
    year = _latest_year(now, month, day)
    for back in range(8):
        if (found := _safe_day(year - back, month, day)) is not None:
            return found
    return None


def _safe_day(year: int, month: int, day: int) -> datetime | None:
    try:
        return _utc(year, month, day)
    except ValueError:
        return None


# English dates (dateparser's English search reads "may" the verb and bare numbers as dates,
# so English keeps these patterns, which know LoCoMo-style dates and relative periods).
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "few": 3,
    "couple of": 2,
    "several": 4,
}
_NUM = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|a few|couple of|a couple of|several)"

_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH_RE})\.?,?\s*{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}}){_ORD},?\s*{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
_SEASON_YEAR = re.compile(r"\b(spring|summer|autumn|fall|winter)\s+(?:of\s+)?((?:19|20)\d\d)\b", re.I)
_ISO_DATE = re.compile(r"\b((?:19|20)\d\d)-(\d{1,2})-(\d{1,2})\b")
_YEAR_ONLY = re.compile(rf"\b{_YEAR}\b")
_MONTH_DAY = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}}){_ORD}\b(?!\s*[:.]\d)", re.I)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH_RE})\b", re.I)
_MONTH_ALONE = re.compile(rf"\b(?:in|during|on|of|since|until|by|early|mid|late|last|this)\s+({_MONTH_RE})\b", re.I)
_RELATIVE_DAY = re.compile(r"\b(today|tonight|this morning|this afternoon|this evening|yesterday|tomorrow)\b", re.I)
_RELATIVE_UNIT = re.compile(r"\b(last|this|next|past)\s+(week|weekend|month|year)\b", re.I)
_AGO = re.compile(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b", re.I)


def _english_time_hints(query: str, now: datetime | None) -> list[TimeHint]:
    hints: list[TimeHint] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match[str]) -> bool:
        a, b = match.span()
        return all(b <= s or a >= e for s, e in taken)

    def add(match: re.Match[str], start: datetime | None, end: datetime | None, granularity: Any) -> None:
        taken.append(match.span())  # an impossible date (30 February) is still not a year
        if start is None or end is None:
            return
        hints.append(TimeHint(start, end, granularity, match.group(0)))

    for m in _ISO_DATE.finditer(query):
        day = _safe_day(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in _DAY_MONTH_YEAR.finditer(query):
        if free(m):
            day = _safe_day(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))
            add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in _MONTH_DAY_YEAR.finditer(query):
        if free(m):
            day = _safe_day(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)))
            add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in _MONTH_YEAR.finditer(query):
        if free(m):
            add(m, *_month_span(int(m.group(2)), _MONTHS[m.group(1).lower()]), "month")
    for m in _SEASON_YEAR.finditer(query):
        if free(m):
            first, count = _SEASONS[m.group(1).lower()]
            add(m, *_month_span(int(m.group(2)), first, count), "season")
    for m in _YEAR_ONLY.finditer(query):
        if free(m):
            year = int(m.group(1))
            add(m, _utc(year, 1, 1), _utc(year + 1, 1, 1), "year")
    if now is None:
        return hints
    for pattern, month_group, day_group in ((_MONTH_DAY, 1, 2), (_DAY_MONTH, 2, 1)):
        for m in pattern.finditer(query):
            if free(m) and not (m.group(month_group).lower() == "may" and m.group(month_group).islower()):
                day = _latest_day(now, _MONTHS[m.group(month_group).lower()], int(m.group(day_group)))
                taken.append(m.span())
                if day is not None:
                    hints.append(TimeHint(day, day + timedelta(days=1), "day", m.group(0), yearless=True))
    for m in _MONTH_ALONE.finditer(query):
        if free(m) and not (m.group(1).lower() == "may" and not m.group(0)[0].isalpha()):
            month = _MONTHS[m.group(1).lower()]
            taken.append(m.span())
            start, end = _month_span(_latest_year(now, month), month)
            hints.append(TimeHint(start, end, "month", m.group(0), yearless=True))
    today = _utc(now.year, now.month, now.day)
    for m in _RELATIVE_DAY.finditer(query):
        if free(m):
            word = m.group(1).lower()
            offset = -1 if word == "yesterday" else 1 if word == "tomorrow" else 0
            day = today + timedelta(days=offset)
            add(m, day, day + timedelta(days=1), "day")
    for m in _RELATIVE_UNIT.finditer(query):
        if not free(m):
            continue
        which, unit = m.group(1).lower(), m.group(2).lower()
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
        if unit in ("week", "weekend"):
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            if unit == "weekend":
                add(m, monday + timedelta(days=5), monday + timedelta(days=7), "day")
            else:
                add(m, monday, monday + timedelta(days=7), "week")
        elif unit == "month":
            index = now.year * 12 + now.month - 1 + step
            add(m, *_month_span(index // 12, index % 12 + 1), "month")
        else:
            year = now.year + step
            add(m, _utc(year, 1, 1), _utc(year + 1, 1, 1), "year")
    for m in _AGO.finditer(query):
        if not free(m):
            continue
        amount = _NUMBER_WORDS.get(m.group(1).lower().removeprefix("a ").strip())
        if amount is None:
            amount = int(m.group(1)) if m.group(1).isdigit() else 1
        unit = m.group(2).lower()
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * amount
        centre = today - timedelta(days=days)
        spread = timedelta(days=max(1, days // 7))
        add(m, centre - spread, centre + spread, unit)
    return hints


# Chinese: dateparser reads relative and absolute expressions; numerals are written as digits
# first ("三天前" -> "3天前"), and month-day dates ("5月2日") parsed by their format.
_ZH_DIGITS = {ch: i for i, ch in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
_ZH_NUMBER = re.compile(r"[零〇一二两三四五六七八九十]+(?=\s*(?:个)?(?:天|日|周|星期|礼拜|月|年|号|小时))")
_ZH_MONTH_DAY = re.compile(r"(?:((?:19|20)\d\d)\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ZH_TIME_CUE = re.compile(r"[年月日号周天昨今明前去上本这星期礼拜早晚]")


def _zh_number(text: str) -> str:
    """A Chinese numeral up to 99 as digits: ``"三"`` -> ``"3"``, ``"十二"`` -> ``"12"``, ``"二十"`` -> ``"20"``."""
    if "十" not in text:
        return "".join(str(_ZH_DIGITS[ch]) for ch in text)
    tens, _, ones = text.partition("十")
    return str((_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0))


def _span_hint(moment: datetime, period: str, text: str) -> TimeHint:
    """The interval of a parsed moment at dateparser's precision (``period``)."""
    day = _utc(moment.year, moment.month, moment.day)
    if period == "week":
        monday = day - timedelta(days=day.weekday())
        return TimeHint(monday, monday + timedelta(days=7), "week", text)
    if period == "month":
        return TimeHint(*_month_span(moment.year, moment.month), "month", text)
    if period == "year":
        return TimeHint(_utc(moment.year, 1, 1), _utc(moment.year + 1, 1, 1), "year", text)
    return TimeHint(day, day + timedelta(days=1), "day", text)


@lru_cache(maxsize=1)
def _zh_date_parser() -> Any:
    from dateparser.date import DateDataParser

    return DateDataParser(languages=["zh"], settings={"PREFER_DATES_FROM": "past"})


def _chinese_time_hints(query: str, now: datetime | None) -> list[TimeHint]:
    hints: list[TimeHint] = []
    text = _ZH_NUMBER.sub(lambda m: _zh_number(m.group(0)), query)
    for m in _ZH_MONTH_DAY.finditer(text):
        year = int(m.group(1)) if m.group(1) else None
        month, day_number = int(m.group(2)), int(m.group(3))
        yearless = year is None
        if year is None and now is None:
            continue
        day = _latest_day(now, month, day_number) if year is None else _safe_day(year, month, day_number)
        if day is not None:
            hints.append(TimeHint(day, day + timedelta(days=1), "day", m.group(0), yearless=yearless))
    text = _ZH_MONTH_DAY.sub(" ", text)
    if now is None or not _ZH_TIME_CUE.search(text):
        return hints
    from dateparser.search import search_dates

    base = as_utc(now).replace(tzinfo=None)
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past", "REQUIRE_PARTS": []}
    try:
        found = search_dates(text, languages=["zh"], settings=settings) or []
    except Exception:  # dateparser's search raises on some odd inputs: no hint then
        logger.debug("dateparser failed on %r", text, exc_info=True)
        found = []
    for span, moment in found:
        span = span.strip()
        if span.isdigit():  # a bare number is not a date
            continue
        # search_dates gives the moment (relative to ``base``); the parser tells its precision.
        period = getattr(_zh_date_parser().get_date_data(span), "period", None) or "day"
        hints.append(_span_hint(moment, period, span))
    return hints


def extract_time_hints(text: str, now: datetime | None = None) -> list[TimeHint]:
    """Dates and periods named in ``text``, as UTC intervals, relative to ``now`` (the event or query time).

    English: absolute dates (``"8 May, 2023"``, ``"October 13, 2023"``, ``"2023-05-08"``),
    months (``"May 2023"``; ``"in May"`` = the latest May not after ``now``), seasons,
    years, and relative to ``now`` ``today``/``yesterday``, ``last week``/``this month`` and
    ``N days ago``. Chinese (via ``dateparser``): ``"5月2日"``, ``"2023年5月2日"``, ``"上周"``,
    ``"上个月"``, ``"去年"``, ``"三天前"``, ``"昨天晚上"``... Relative expressions are ignored
    when ``now`` is None. Overlapping English matches are reported once (the most precise wins).
    """
    if not text:
        return []
    now = as_utc(now) if now is not None else None
    hints = _english_time_hints(text, now)
    if has_han(text):
        hints += _chinese_time_hints(text, now)
    hints.sort(key=lambda h: h.start)
    return hints


_TEMPORAL_INTENT = re.compile(
    r"^\s*when\b|\bwhen (?:did|does|do|is|was|were|will|has|have|had)\b|\bwhat (?:year|month|date|day|time|week)\b"
    r"|\bwhich (?:year|month|date|day|week)\b|\bhow long\b|\bhow many (?:days|weeks|months|years)\b"
    r"|\bsince when\b|\bhow (?:soon|recently|often)\b"
    r"|什么时候|何时|哪一?天|哪一?年|哪个月|几月|几号|几点|多久|多长时间|什么日子",
    re.I,
)
# One vocabulary of time words for the two predicates below: the words both read, then what only the
# broad one (any mention of a time, for ranking) or only the narrow one (an event's time, for routing) adds.
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_SEASON_WORDS = "summer|winter|spring|fall|autumn"
_THIS_PERIOD = "morning|afternoon|evening|week|weekend|month|year"
_ZH_NUMERALS = "一二两三四五六七八九十"
_ZH_COUNTED = r"\s*(?:个)?(?:天|周|星期|月|年|小时)"
_EN_TIME = rf"yesterday|today|tonight|ago|this (?:{_THIS_PERIOD})"
_ZH_TIME = r"昨天|今天|前天|刚才|上周|上个?月|去年|周末|星期[一二三四五六日天]|\d{1,2}\s*月\s*\d{1,2}\s*[日号]"
_EN_ANY_TIME = (
    rf"tomorrow|recently|lately|last|next|this (?:{_SEASON_WORDS})|weekend|{_WEEKDAYS}|{_MONTH_RE}|(?:19|20)\d\d"
    r"|since|until|soon|earlier|(?:a )?(?:few|couple of) (?:days|weeks|months|years)|\d+ (?:days|weeks|months|years)"
    r"|(?:day|week|month|year)s? (?:ago|before|after)"
)
_ZH_ANY_TIME = (
    r"明天|后天|最近|下周|本周|这周|下个?月|这个月|今年|明年|礼拜[一二三四五六日天]|[上下]午|早上|晚上"
    rf"|[0-9零〇{_ZH_NUMERALS}]+{_ZH_COUNTED}[前后以]|(?:19|20)\d\d\s*年"
)
_EN_EVENT_TIME = (
    rf"last (?:night|week|weekend|month|year|{_WEEKDAYS}|{_SEASON_WORDS})"
    r"|\d+ (?:days?|weeks?|months?|years?|hours?) ago"
    rf"|on (?:{_WEEKDAYS})|in (?:19|20)\d\d|(?:19|20)\d\d-\d\d-\d\d"
    r"|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]* \d{1,2}(?:st|nd|rd|th)?"
    r"|at \d{1,2}(?::\d\d)? ?(?:am|pm)?|earlier today|just now|when i was"
)
_ZH_EVENT_TIME = rf"昨晚|今早|上星期|前年|[0-9{_ZH_NUMERALS}]+{_ZH_COUNTED}前"

#: Any mention of a time (``yesterday``, ``last``, ``in May``, ``2022``, ``since``, ``昨天``, ``5月2日``).
_TIME_EXPRESSION = re.compile(rf"\b(?:{_EN_TIME}|{_EN_ANY_TIME})\b|{_ZH_TIME}|{_ZH_ANY_TIME}", re.I)
#: Time expressions that mark an *event* ("yesterday", "last week", "on Monday", "in 2019",
#: "3 days ago", "昨天", "上周", "三天前"): narrower than :func:`has_time_expression` (no bare
#: "last" or "since"), for telling an event from a durable fact.
_EVENT_TIME = re.compile(rf"\b(?:{_EN_TIME}|{_EN_EVENT_TIME})\b|{_ZH_TIME}|{_ZH_EVENT_TIME}", re.I)


def mentions_event_time(text: str) -> bool:
    """Whether ``text`` places something at a time, as events are told (``"yesterday I met..."``, ``"上周..."``)."""
    return bool(_EVENT_TIME.search(text))


def has_temporal_intent(query: str) -> bool:
    """Whether the question asks for a time (``When ...?``, ``How long ...?``, ``什么时候...？``, ``几号...？``)."""
    return bool(_TEMPORAL_INTENT.search(query))


def has_time_expression(text: str) -> bool:
    """Whether ``text`` mentions a time (``yesterday``, ``last week``, ``in May``, ``2022``, ``昨天``, ``5月2日``)."""
    return bool(_TIME_EXPRESSION.search(text))


# ------------------------------------------------------------------------------ names
#: Where Han characters meet other letters or digits ("Bob周末" is "Bob" and "周末").
_SCRIPT_BOUNDARY = re.compile(f"(?<=[{_HAN}])(?=[^\\W_{_HAN}])|(?<=[^\\W_{_HAN}])(?=[{_HAN}])")


def _words(text: str) -> list[str]:
    """Case-folded word runs (no segmentation), split where Han characters meet others: the units English
    names are matched on."""
    return re.findall(r"[^\W_]+", _SCRIPT_BOUNDARY.sub(" ", text.casefold()))


def mentioned_names(query: str, names: Iterable[str]) -> set[str]:
    """The ``names`` (speakers, people) that ``query`` mentions.

    A Latin-script name must appear as whole words, case-insensitive (a possessive,
    ``"Caroline's"``, counts; a name inside another word does not). A Chinese name has no
    word boundaries to lean on: its characters must appear in the query (``"张三"`` in
    ``"张三喜欢什么？"``); one-character names are ignored.
    """
    words = set(_words(query))
    found = set()
    folded = query.casefold()
    for name in names:
        if not name:
            continue
        if has_han(name):
            compact = re.sub(r"\s+", "", name.casefold())
            if len(compact) >= 2 and compact in folded:
                found.add(name)
            continue
        parts = _words(name)
        if parts and all(p in words for p in parts):
            found.add(name)
    return found


#: Singular pronouns of the two parties of a chat: the asker (the user) and the one asked (the assistant).
#: Plurals ("we", "我们", "你们") name more than one party.
_PARTY_PRONOUNS = {
    "user": re.compile(r"\b(?:i|me|my|mine|myself)\b|我(?!们)", re.IGNORECASE),
    "assistant": re.compile(r"\b(?:you|your|yours|yourself)\b|[你您](?!们)", re.IGNORECASE),
}
#: A request to recall ("do you remember ...", "你还记得...吗"): it asks the assistant about what follows, so its
#: "you" is not the party the question is about.
_RECALL_REQUEST = re.compile(
    r"\b(?:do|did|can|could|would)?\s*you\s+(?:still\s+)?(?:remember|recall|know)\b|[你您](?:还|是否|可)?(?:记得|记不记得|知道)",
    re.IGNORECASE,
)
#: Where clauses end: at sentences' ends and commas, semicolons and colons.
_CLAUSE_END = re.compile(r"(?<=[.!?。！？,，;；:：])\s*|\n+")


def named_chat_party(query: str) -> Literal["user", "assistant"] | None:
    """The party of a chat that ``query`` is about, by pronoun: ``"user"`` for "my"/"I"/"我", ``"assistant"``
    for "you"/"你"; None when it names neither (or only both at once: "we", "我们").

    Why: the pronouns of a question put to an assistant name people as names do. A question about its asker
    ("我最喜欢他的什么歌？") is answered by the user's own words before the assistant's replies, which often
    only echo the question; one about the assistant by what it said. A question naming both is about its
    subject, the first party of the last clause that names one ("Which book did you suggest to me?": the
    assistant; "I mentioned a museum. Do you remember what I saw?": the user, a request to recall set aside).
    """
    for clause in reversed(_CLAUSE_END.split(query)):
        if party := _first_party(_RECALL_REQUEST.sub(" ", clause)):
            return party
    return None


def _first_party(clause: str) -> Literal["user", "assistant"] | None:
    """The party of the first singular party pronoun in ``clause``: ``"user"`` for "I"/"我", ``"assistant"`` for
    "you"/"你"."""
    spaced = _SCRIPT_BOUNDARY.sub(" ", clause.casefold())
    first = [(m.start(), party) for party, pattern in _PARTY_PRONOUNS.items() if (m := pattern.search(spaced))]
    return min(first)[1] if first else None  # type: ignore[return-value]


@lru_cache(maxsize=1)
def _spacy_english() -> Any:
    """spaCy's small English pipeline with only what NER needs, or None when it is not installed."""
    try:
        import spacy
    except ImportError:
        return None
    from llama_index_memory_hierarchy.extraction import SPACY_MODELS

    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=["lemmatizer", "parser", "attribute_ruler"])
        except OSError:
            continue
    logger.info("no English spaCy model is installed (extra 'nlp'): English names come from no NER")
    return None


def person_names(text: str) -> list[str]:
    """People named in ``text``, in order, unique: spaCy NER (``PERSON``) for English, jieba's ``nr`` for Chinese.

    ``"我的经理李四让我写周报"`` gives ``["李四"]``; ``"Caroline met Mel in Paris"`` gives
    ``["Caroline", "Mel"]`` when spaCy's ``en_core_web_sm`` is installed (extra ``nlp``).
    """
    found: dict[str, None] = {}
    if has_han(text):
        import jieba.posseg

        _jieba_module()
        for word, flag in jieba.posseg.cut(text):
            if flag == "nr" and len(word) >= 2:
                found.setdefault(word, None)
    if _LATIN_CHAR.search(text):
        nlp = _spacy_english()
        if nlp is not None:
            for ent in nlp(text).ents:
                if ent.label_ == "PERSON":
                    found.setdefault(ent.text.strip(), None)
    return list(found)
