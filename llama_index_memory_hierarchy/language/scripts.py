"""Writing systems: the one Han range of the package, and a text's language told by its script."""

from __future__ import annotations

import re
from typing import Literal

#: Han ideographs (+ extensions, compatibility, the iteration mark 々 and the zero 〇): the one Han range of the
#: package. Text in it is Chinese (or Japanese with kana) and is segmented with jieba.
HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
HIRAGANA = "\u3041-\u309f"
#: Katakana (loanwords): kept as whole words; jieba's dictionary would split them into characters.
KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
#: Combining marks of common scripts, which Python's ``\w`` does not count as word characters but which belong
#: inside words (Latin diacritics after NFKC leftovers, Hebrew, Arabic, Indic, Thai, Lao).
MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"
    "\u0610-\u061a\u064b-\u065f\u0670\u0900-\u0963\u0966-\u0dff\u0e00-\u0eff"
)
#: Scripts segmented into words by jieba.
CJK = HAN + HIRAGANA

#: One Han character.
HAN_CHAR = re.compile(f"[{HAN}]")
#: A run of Han characters.
HAN_RUN = re.compile(f"[{HAN}]+")
KANA_CHAR = re.compile(f"[{HIRAGANA}{KATAKANA}]")
LATIN_CHAR = re.compile(r"[A-Za-z\u00c0-\u024f]")
#: Where Han characters meet other letters or digits ("Bob周末" is "Bob" and "周末").
SCRIPT_BOUNDARY = re.compile(f"(?<=[{HAN}])(?=[^\\W_{HAN}])|(?<=[^\\W_{HAN}])(?=[{HAN}])")

Language = Literal["zh", "ja", "en", "und"]


def detect_language(text: str) -> Language:
    """The main language of ``text`` by script: ``"zh"``, ``"ja"``, ``"en"`` (Latin script) or ``"und"``.

    A Han character carries about as much as a short Latin word, so mixed text counts each
    Han character as three Latin letters: ``"我在学Python"`` is Chinese, ``"I love 川菜 a lot"``
    English. Kana make it Japanese.
    """
    if not text:
        return "und"
    if KANA_CHAR.search(text):
        return "ja"
    han = len(HAN_CHAR.findall(text))
    latin = len(LATIN_CHAR.findall(text))
    if not han and not latin:
        return "und"
    return "zh" if 3 * han >= latin else "en"


def has_han(text: str) -> bool:
    """Whether ``text`` holds any Han (Chinese) character."""
    return bool(HAN_CHAR.search(text))
