"""The English table: pronouns, cue words and date patterns (the logic that reads them is language-neutral)."""

from __future__ import annotations

import calendar
import re

# ------------------------------------------------------------------------------ pronouns
#: The speaker, singular.
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})
#: The speaker with others.
FIRST_PERSON_PLURAL = frozenset({"we", "us", "our", "ours", "ourselves"})
#: The one spoken to, singular.
SECOND_PERSON = frozenset({"you", "your", "yours", "yourself"})
#: A third person (a man or a woman, not a thing).
THIRD_PERSON = frozenset({"he", "she", "him", "her"})

# ------------------------------------------------------------------------------ cue words
#: Words of acknowledgement and small talk ("ok thanks", "got it, sounds good").
ACKNOWLEDGEMENTS = frozenset(
    """ok okay okey k kk thanks thank thx ty cheers sure yes yeah yep yup yea no nope nah noted got gotcha
    understood understand see cool great nice good fine alright right sounds sound remember remembered
    hmm hm mm mhm uh um ah oh wow haha hahaha lol bye goodbye hello hi hey welcome np problem perfect awesome
    indeed exactly agree agreed true totally definitely course appreciate appreciated pleasure lot makes
    sense will""".split()  # noqa: SIM905 (a word list reads better as text)
)
#: Words about the conversation itself (saying, telling, remembering, knowing, asking) and where in it (earlier,
#: again; "like" as in "like I said"): a turn of nothing else and stop-words ("Like I said before, remember?")
#: talks about talk, not the world.
META_TALK = frozenset(
    """say says said saying tell tells told telling mention mentions mentioned mentioning talk talks talked talking
    speak spoke spoken discuss discussed discussing chat chatted ask asks asked asking answer answered explain
    explained recall recalled recalling remind reminded reminding forget forgot forgotten know knew known knowing
    think thought guess mean meant note told earlier before already again previously last time thing things stuff
    something anything everything like""".split()  # noqa: SIM905 (a word list reads better as text)
)
#: A request to recall ("do you remember ...").
RECALL_REQUEST = r"\b(?:do|did|can|could|would)?\s*you\s+(?:still\s+)?(?:remember|recall|know)\b"
#: Asking to be told or reminded ("Tell me what you remember.", "Remind me what we said."): a request to recall.
RECALL_IMPERATIVE = r"^\W*(?:please\s+)?(?:tell|remind)\s+me\b"
#: Where the user had got to ("how far I got", "where we left off"): talk about the conversation, as META_TALK.
PROGRESS = r"\bhow far (?:i|we)(?:'ve| have)? (?:got|gotten|come)\b|\bwhere (?:i|we) (?:left off|stopped|was|were)\b"
#: A question that asks for a time ("When ...?", "How long ...?").
TEMPORAL_INTENT = (
    r"^\s*when\b|\bwhen (?:did|does|do|is|was|were|will|has|have|had)\b|\bwhat (?:year|month|date|day|time|week)\b"
    r"|\bwhich (?:year|month|date|day|week)\b|\bhow long\b|\bhow many (?:days|weeks|months|years)\b"
    r"|\bsince when\b|\bhow (?:soon|recently|often)\b"
)

# ------------------------------------------------------------------------------ dates
# dateparser's English search reads "may" the verb and bare numbers as dates, so English keeps these patterns.
MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
#: A season's first month and its length in months.
SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}
NUMBER_WORDS = {
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

DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({MONTH_RE})\.?,?\s*{_YEAR}\b", re.I)
MONTH_DAY_YEAR = re.compile(rf"\b({MONTH_RE})\.?\s+(\d{{1,2}}){_ORD},?\s*{_YEAR}\b", re.I)
MONTH_YEAR = re.compile(rf"\b({MONTH_RE})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
SEASON_YEAR = re.compile(r"\b(spring|summer|autumn|fall|winter)\s+(?:of\s+)?((?:19|20)\d\d)\b", re.I)
ISO_DATE = re.compile(r"\b((?:19|20)\d\d)-(\d{1,2})-(\d{1,2})\b")
YEAR_ONLY = re.compile(rf"\b{_YEAR}\b")
MONTH_DAY = re.compile(rf"\b({MONTH_RE})\.?\s+(\d{{1,2}}){_ORD}\b(?!\s*[:.]\d)", re.I)
DAY_MONTH = re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({MONTH_RE})\b", re.I)
MONTH_ALONE = re.compile(rf"\b(?:in|during|on|of|since|until|by|early|mid|late|last|this)\s+({MONTH_RE})\b", re.I)
RELATIVE_DAY = re.compile(r"\b(today|tonight|this morning|this afternoon|this evening|yesterday|tomorrow)\b", re.I)
RELATIVE_UNIT = re.compile(r"\b(last|this|next|past)\s+(week|weekend|month|year)\b", re.I)
AGO = re.compile(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b", re.I)

# One vocabulary of time words for the time predicates: the words both read (TIME), then what only the broad one
# (any mention of a time, for ranking) or only the narrow one (an event's time, for routing) adds.
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_SEASON_WORDS = "summer|winter|spring|fall|autumn"
_THIS_PERIOD = "morning|afternoon|evening|week|weekend|month|year"
TIME = rf"yesterday|today|tonight|ago|this (?:{_THIS_PERIOD})"
ANY_TIME = (
    rf"tomorrow|recently|lately|last|next|this (?:{_SEASON_WORDS})|weekend|{_WEEKDAYS}|{MONTH_RE}|(?:19|20)\d\d"
    r"|since|until|soon|earlier|(?:a )?(?:few|couple of) (?:days|weeks|months|years)|\d+ (?:days|weeks|months|years)"
    r"|(?:day|week|month|year)s? (?:ago|before|after)"
)
EVENT_TIME = (
    rf"last (?:night|week|weekend|month|year|{_WEEKDAYS}|{_SEASON_WORDS})"
    r"|\d+ (?:days?|weeks?|months?|years?|hours?) ago"
    rf"|on (?:{_WEEKDAYS})|in (?:19|20)\d\d|(?:19|20)\d\d-\d\d-\d\d"
    r"|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]* \d{1,2}(?:st|nd|rd|th)?"
    r"|at \d{1,2}(?::\d\d)? ?(?:am|pm)?|earlier today|just now|when i was"
)
