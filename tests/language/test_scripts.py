"""Scripts (``language.scripts``): a text's language by its script."""

from __future__ import annotations

import pytest

from llama_index_memory_hierarchy import language as L


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我喜欢吃辣的川菜", "zh"),
        ("我在学Python", "zh"),
        ("My manager Lee asked me for a report", "en"),
        ("I love 川菜 and Sichuan pepper", "en"),
        ("カタカナとひらがな", "ja"),
        ("12345 !!", "und"),
        ("", "und"),
    ],
)
def test_detect_language_by_script(text: str, expected: str) -> None:
    assert L.detect_language(text) == expected
