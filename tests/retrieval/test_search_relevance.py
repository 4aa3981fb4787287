"""The relevance floor and content-free turns (``retrieval/search.py``, ``ranking/settings.py``): an unrelated
query finds nothing (search, ``recall``, ``get()``), an explicit ``min_score`` replaces the floor, and no
content-free turn ranks first for a vague question, in English or Chinese. Every sentence is invented here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.messages import MEMORY_HEADER
from llama_index_memory_hierarchy.tools import MemoryToolSpec

INFORMATIVE = [
    "I moved to Lisbon last spring to work at a small bakery.",
    "My sister Priya is allergic to peanuts.",
    "I am training for a half marathon in October.",
    "我在杭州跟一位老师学做陶艺。",
    "我女儿今年九月开始上小学一年级。",
    "我们养了一只叫豆豆的灰猫。",
]
CONTENT_FREE = ["嗯嗯", "ok thanks", "好的，我记住了。", "Got it, sounds good!", "谢谢", "okay"]
#: Talk about the conversation itself: content-free too (``language.CONTENT_FREE_WORDS``), though it shares the
#: words of a vague question ("said", "记得").
META_TALK = ["Like I said before, remember?", "I told you that earlier.", "你还记得我说的吗？", "我之前跟你说过的。"]
VAGUE = [
    "What did I tell you earlier?",
    "Do you remember what I said?",
    "What do you know about me?",
    "Anything I mentioned before?",
    "Did you note that?",
    "Remind me what we talked about.",
    "What was that again?",
    "Tell me what you remember.",
    "Is there anything I should know?",
    "Got it?",
    "你记住了吗？",
    "我之前跟你说过什么？",
    "你还记得吗？",
    "我们聊过什么？",
    "你知道我的什么事？",
    "刚才我说了什么？",
    "提醒我一下。",
    "你明白了吗？",
    "有什么要注意的吗？",
    "好的吗？",
]
UNRELATED = ["zzzz qqq", "bees", "qwrtp xkcdv"]
#: Invented unrelated queries, 45 per language (``bench/floor.py`` measures them on larger archives).
UNRELATED_SET = json.loads((Path(__file__).parents[1] / "data" / "unrelated_queries.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory of informative and content-free turns, in an earlier session (so none is in get()'s history)."""
    path = tmp_path_factory.mktemp("relevance") / "memory_data"
    with HierarchicalMemory.from_defaults(user_id="dana", session_id="earlier", persist_dir=str(path)) as memory:
        for informative, free in zip(INFORMATIVE, CONTENT_FREE, strict=True):
            memory.put(ChatMessage(role="user", content=informative))
            memory.put(ChatMessage(role="assistant", content=free))
        for talk in META_TALK:
            memory.put(ChatMessage(role="user", content=talk))
    return path


@pytest.fixture
def memory(folder: Path) -> Iterator[HierarchicalMemory]:
    with HierarchicalMemory.from_defaults(user_id="dana", session_id="now", persist_dir=str(folder)) as opened:
        yield opened


def _memory_message(messages: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in messages if MEMORY_HEADER in (m.content or "")]


@pytest.mark.parametrize("query", UNRELATED)
def test_an_unrelated_query_finds_nothing_relevant(memory: HierarchicalMemory, query: str) -> None:
    assert memory.search(query, limit=5) == []
    assert memory.as_retriever(similarity_top_k=5).retrieve(query) == []
    assert "Nothing relevant" in MemoryToolSpec(memory).recall(query)
    assert _memory_message(memory.get(input=query)) == []  # no memory message at all


def test_a_relevant_memory_clears_the_floor(memory: HierarchicalMemory) -> None:
    for query, expected in [
        ("Who has a nut allergy?", INFORMATIVE[1]),
        ("Which race is she preparing for?", INFORMATIVE[2]),
        ("我女儿什么时候上学？", INFORMATIVE[4]),
        ("我们家的猫叫什么？", INFORMATIVE[5]),
    ]:
        items = memory.search(query, limit=3)
        assert items and items[0].content == expected, (query, [i.content for i in items])
    [message] = _memory_message(memory.get(input="Who has a nut allergy?"))
    assert INFORMATIVE[1] in message


def test_an_explicit_min_score_and_limit_replace_the_floor(memory: HierarchicalMemory) -> None:
    shown = memory.search("zzzz qqq", limit=3, min_score=0.0)
    assert 0 < len(shown) <= 3 and all(item.score >= 0.0 for item in shown)
    assert all(item.score >= 0.6 for item in memory.search("Who has a nut allergy?", limit=10, min_score=0.6))
    assert memory.search("zzzz qqq", limit=3, min_score=2.0) == []


@pytest.mark.parametrize("ranking", ["default", "no_floor"])
def test_no_content_free_turn_ranks_first_for_a_vague_question(memory: HierarchicalMemory, ranking: str) -> None:
    for query in VAGUE:
        items = memory.search(query, limit=5, ranking=ranking)
        contents = [item.content for item in items]
        if ranking == "no_floor":
            assert contents, query  # without the floor something is always shown
        free = [i for i, content in enumerate(contents) if content in CONTENT_FREE + META_TALK]
        informative = [i for i, content in enumerate(contents) if content not in CONTENT_FREE + META_TALK]
        assert not free or (informative and max(informative) < min(free)), (query, contents)
        assert ranking == "no_floor" or not free, (query, contents)  # the floor shows no acknowledgement


#: Requests to recall in general: they name no topic, yet ask for the user's past (``language.asks_to_recall``).
RECALL_REQUESTS = ["What did I tell you earlier?", "Do you remember how far I got?", "你还记得我说过什么吗？"]


@pytest.mark.parametrize("query", RECALL_REQUESTS)
def test_a_request_to_recall_shows_informative_memories_first(memory: HierarchicalMemory, query: str) -> None:
    """The floor lets informative memories through for it (search and get()), never an acknowledgement."""
    contents = [item.content for item in memory.search(query, limit=5)]
    assert contents and all(content in INFORMATIVE for content in contents), (query, contents)
    [message] = _memory_message(memory.get(input=query))
    assert not any(f'"{free}"' in message for free in CONTENT_FREE + META_TALK), message  # quoted, one a line
    assert sum(f'"{informative}"' in message for informative in INFORMATIVE) >= 3, message


def test_the_min_score_is_checked(memory: Any) -> None:
    from llama_index_memory_hierarchy.errors import MemoryValidationError

    with pytest.raises(MemoryValidationError) as raised:
        memory.search("bees", min_score="high")
    assert raised.value.field == "min_score"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_unrelated_query_set_finds_nothing(memory: HierarchicalMemory, language: str) -> None:
    """At least 95% of the set shows nothing (a query sharing a content word with a memory may show it)."""
    shown = {query: [i.content for i in memory.search(query, limit=5)] for query in UNRELATED_SET[language]}
    leaked = {query: contents for query, contents in shown.items() if contents}
    assert len(UNRELATED_SET[language]) >= 40
    assert len(leaked) <= 0.05 * len(shown), leaked
