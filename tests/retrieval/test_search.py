"""The cross-tier search behind every read path: a fact, a turn and a perception each rank first for
the question they answer through get(), as_retriever(), the memory blocks, MemoryToolSpec.recall and
``lmh search``; the memory message repeats nothing; every ranked item explains its score."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.messages import BLOCK_HEADER, MEMORY_HEADER
from llama_index_memory_hierarchy.tools import MemoryToolSpec
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import run_lmh

ACK = "好的，我记住了。"
TURNS = [
    ("user", "I'm allergic to peanuts and shellfish, so never suggest dishes with them."),
    ("assistant", ACK),
    ("user", "We booked a cabin in the Alps for the winter holidays."),
    ("assistant", ACK),
    ("user", "My daughter starts piano lessons on Tuesday."),
    ("assistant", "ok"),
    ("user", "I walk to the office every morning."),
    ("assistant", "got it"),
    ("assistant", ACK),
]
PERCEPTION = "Photo of the Eiffel Tower at sunset, taken on our trip to Paris."

#: question -> (key of the memory that answers it, its tier)
QUESTIONS = {
    "What car does Alice drive?": ("car", MemoryType.SEMANTIC),
    "Where does Alice live?": ("home", MemoryType.SEMANTIC),
    "Which foods am I allergic to?": ("allergy", MemoryType.EPISODIC),
    "Show me the picture of the Eiffel Tower at sunset": ("photo", MemoryType.PERCEPTUAL),
}


@pytest.fixture(scope="module")
def embed_model() -> Any:
    from llama_index_memory_hierarchy.embeddings import resolve_embed_model

    return resolve_embed_model("default")


@pytest.fixture(scope="module")
def stocked(tmp_path_factory: pytest.TempPathFactory, embed_model: Any) -> tuple[Path, dict[str, str]]:
    """A folder holding alice's memories of every tier (closed again, so that ``lmh`` can open it)."""
    folder = tmp_path_factory.mktemp("search") / "memory_data"
    memory = HierarchicalMemory.from_defaults(
        user_id="alice", session_id="past", persist_dir=str(folder), embed_model=embed_model
    )
    try:
        memory.put_messages([ChatMessage(role=role, content=text) for role, text in TURNS])
        turns = memory.episodic.get_session("past")
        semantic = memory.semantic
        ids = {
            "allergy": next(t.id for t in turns if "peanuts" in t.content),
            "car": semantic.add_fact("Alice", "drives", "a red Tesla Model 3"),
            "home": semantic.add_fact("Alice", "lives_in", "Munich"),
            "sister": semantic.add_fact("Alice", "sister_of", "Beth"),
            "beth": semantic.add_fact("Beth", "lives_in", "Lisbon"),
            "photo": memory.perceptual.add(PERCEPTION),
        }
    finally:
        memory.close()
    return folder, ids


@pytest.fixture
def memory(stocked: tuple[Path, dict[str, str]], embed_model: Any) -> Iterator[HierarchicalMemory]:
    """alice in a new session: the stocked memories are all from earlier ones."""
    opened = HierarchicalMemory.from_defaults(
        user_id="alice", session_id="now", persist_dir=str(stocked[0]), embed_model=embed_model
    )
    yield opened
    opened.close()


def memory_lines(messages: list[ChatMessage], optional: bool = False) -> list[str]:
    """The memory lines of ``get()``'s memory message (none, with ``optional``, when it put none)."""
    found = [m.content or "" for m in messages if MEMORY_HEADER in (m.content or "")]
    if optional and not found:
        return []
    [content] = found
    return [line for line in content.split(MEMORY_HEADER, 1)[1].splitlines() if line.startswith("- [")]


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_answer_ranks_first_on_every_read_path(memory: HierarchicalMemory, stocked, question: str) -> None:
    key, tier = QUESTIONS[question]
    expected = stocked[1][key]
    item = memory.semantic.get(expected) or memory.episodic.get(expected) or memory.perceptual.get(expected)
    assert item is not None and item.memory_type is tier
    memory.working.add("Reminder: send the email to Bob about the invoice at 5pm.", importance=0.9)

    lines = memory_lines(memory.get(input=question))
    assert f"· {tier.value}" in lines[0] and item.content.split()[-1].rstrip(".") in lines[0]

    nodes = memory.as_retriever(similarity_top_k=3).retrieve(question)
    assert nodes[0].node.id_ == expected
    assert nodes[0].node.metadata["explanation"]["dense"] > 0
    assert "explanation" in nodes[0].node.excluded_llm_metadata_keys
    assert "explanation" in nodes[0].node.excluded_embed_metadata_keys

    block = next(b for b in memory.memory_blocks() if b.memory_types == [tier])
    text = asyncio.run(block.aget([ChatMessage(role="user", content=question)]))
    header, best, *_ = text.splitlines()
    assert header == BLOCK_HEADER and item.content.split()[-1].rstrip(".") in best  # data, then the best line

    recalled = MemoryToolSpec(memory).recall(question, limit=3)
    assert re.search(r"^1\. id=(\S+)", recalled, re.M).group(1) == expected

    assert memory.manager.retrieve_memories(question, limit=3)[0].id == expected


def test_lmh_search_ranks_and_explains(stocked) -> None:
    folder, ids = stocked
    common = ["--dir", str(folder), "--user", "alice"]
    found = run_lmh("search", "What car does Alice drive?", "--json", *common).json()
    first = found["results"][0]
    assert first["id"] == ids["car"] and first["tier"] == "semantic"
    assert first["explanation"]["dense"] > 0 and first["explanation"]["keyword"] > 0
    assert sum(first["explanation"].values()) == pytest.approx(first["score"], abs=1e-4)
    photo = run_lmh("search", "picture of the Eiffel Tower at sunset", "--json", *common).json()
    assert photo["results"][0]["id"] == ids["photo"]
    table = run_lmh("search", "Which foods am I allergic to?", "--explain", *common).ok().stdout
    assert "dense +" in table and "keyword +" in table


def test_memory_message_never_repeats_a_memory(stocked, embed_model: Any) -> None:
    memory = HierarchicalMemory.from_defaults(
        user_id="alice", session_id="now", persist_dir=str(stocked[0]), embed_model=embed_model, retrieval_top_k=8
    )
    try:
        memory.put(ChatMessage(role="user", content="My favourite tea is genmaicha from Kyoto."))
        for question in ["Did you note what I said?", "好的", "What did I tell you about the holidays?", "tea"]:
            lines = memory_lines(memory.get(input=question), optional=True)  # none when nothing is relevant
            bodies = [line.split("] ", 1)[1] for line in lines]
            assert len(bodies) == len(set(bodies)), bodies
            assert sum(ACK in body for body in bodies) <= 1
            assert "My favourite tea is genmaicha from Kyoto." not in bodies  # in the history already
            free = [i for i, body in enumerate(bodies) if body in {ACK, "ok", "got it"}]
            informative = [i for i, body in enumerate(bodies) if body not in {ACK, "ok", "got it"}]
            assert not free or not informative or max(informative) < min(free), bodies
        assert [i.content for i in memory.search("genmaicha tea", limit=10)].count(
            "My favourite tea is genmaicha from Kyoto."
        ) == 1  # in working and episodic memory under one id: one slot
    finally:
        memory.close()


def test_explanations_add_up_and_ranking_is_deterministic(memory: HierarchicalMemory) -> None:
    first = memory.search("Where does Alice live?", limit=5)
    assert first and all(item.explanation for item in first)
    for item in first:
        assert sum(item.explanation.values()) == pytest.approx(item.score, abs=1e-4)
    assert [i.score for i in first] == sorted((i.score for i in first), reverse=True)
    for _ in range(3):  # the same state and query: the same ranking (recency only moves with the clock)
        again = memory.search("Where does Alice live?", limit=5)
        assert [i.id for i in again] == [i.id for i in first]
        assert [i.score for i in again] == pytest.approx([i.score for i in first], abs=1e-3)
    stored = memory.semantic.get(first[0].id)
    assert stored is not None and stored.explanation is None  # never persisted


def test_get_embeds_its_input_once_and_first(memory: HierarchicalMemory) -> None:
    """``get()`` starts the model on its input before it reads anything (the search then finds the vector in
    flight), so one ``get()`` embeds one query; a repeated input is served from the query cache."""
    embeddings = memory.context.embeddings
    before = embeddings.cache_info()
    messages = memory.get(input="Which foods am I allergic to? (asked once)")
    assert any("peanuts" in line for line in memory_lines(messages))
    after = embeddings.cache_info()
    assert after["misses"] == before["misses"] + 1
    memory.get(input="Which foods am I allergic to? (asked once)")
    assert embeddings.cache_info()["misses"] == after["misses"]


def test_graph_is_one_signal_and_an_empty_tier_costs_nothing(memory: HierarchicalMemory, stocked) -> None:
    ids = stocked[1]
    top = memory.search("Where does Alice live?", limit=3, memory_types=["semantic"])
    assert top[0].id == ids["home"]
    # its weight is data (``ranking/fitted_weights.json``: 0 since held-out folds chose 0); at weight 1 it shows
    reached = memory.search("Where does Alice live?", limit=3, memory_types=["semantic"], ranking="unfitted")
    assert reached[0].id == ids["home"]
    assert reached[0].explanation.get("graph", 0) > 0  # reached from "Alice", as her sister fact is
    assert memory.search("Where does Alice live?", limit=3, memory_types=["working"]) == []


def test_the_answer_outranks_the_turn_after_it(make_memory) -> None:
    """The keyword text of a turn holds the turns before it: the reply after an answer matches the
    question's words as well as the answer does, but only the answer holds them itself."""
    memory = make_memory(user_id="bob", session_id="trip")
    memory.episodic.add_many(
        [
            MemoryItem(content="Which camera did you take to Iceland?", metadata={"speaker": "Ann"}),
            MemoryItem(content="I took my old Fujifilm X100 to Iceland.", metadata={"speaker": "Bob"}),
            MemoryItem(content="Lovely, the northern lights must have looked stunning.", metadata={"speaker": "Ann"}),
            MemoryItem(content="They did, we stayed up until three watching them.", metadata={"speaker": "Ann"}),
        ]
    )
    # all four ranked (no relevance floor): the reply owns none of the query's words, and its cosine alone does not
    # clear the floor (tests/retrieval/test_search_relevance.py); here its keyword column is what is checked
    ranked = memory.search("Fujifilm X100 camera Iceland", limit=4, ranking="no_floor")
    # the answer, then the question (it holds "camera" and "Iceland" itself), then the reply that only follows them
    assert [i.content for i in ranked[:2]] == [
        "I took my old Fujifilm X100 to Iceland.",
        "Which camera did you take to Iceland?",
    ]
    after = next(i for i in ranked if i.content.startswith("Lovely"))
    assert after.explanation["keyword"] < 0.7 * ranked[0].explanation["keyword"]  # 0.87 when context counts whole


#: Mixed-language pairs: (memory, question in the other language).
CROSS_LANGUAGE = [
    ("我对花生过敏，吃了会起疹子。", "What am I allergic to?"),
    ("我的经理李四让我每周五交周报。", "Who asks me for a weekly report?"),
    ("我们下个月去云南大理旅行。", "Where are we travelling next month?"),
    ("My daughter plays the violin in the school orchestra.", "我女儿演奏什么乐器？"),
    ("I bought a second-hand electric bike last spring.", "我去年春天买了什么？"),
    ("Our cat Mochi sleeps on the radiator all winter.", "我们的猫冬天睡在哪里？"),
]


def test_a_memory_in_one_language_is_found_by_a_question_in_the_other(make_memory) -> None:
    """The default embedding reads Chinese and English in one space: keyword search alone finds none of these."""
    memory = make_memory(user_id="mixed", session_id="s")
    memory.episodic.add_many([MemoryItem(content=text) for text, _ in CROSS_LANGUAGE])
    for text, question in CROSS_LANGUAGE:
        assert memory.search(question, limit=1)[0].content == text, question


#: A chat in which the assistant's question echoes the words of a later question to it:
#: (assistant's question, user's answer, what the assistant then suggested).
ECHOED_CHATS = [
    (
        "Cooking is such a rewarding hobby. Which cuisines do you like?",
        "I like Sichuan and Cantonese food best.",
        "Then try mapo tofu and char siu this weekend.",
    ),
    ("你周末喜欢做什么运动？", "我周末喜欢游泳和爬山。", "那可以试试去香山徒步。"),
]
#: (question, which of the three answers it) for each chat.
PARTY_QUESTIONS = [
    [("Which cuisines do I like?", 1), ("What did you suggest for the weekend?", 2)],
    [("我周末喜欢什么运动？", 1), ("你建议去哪里徒步？", 2)],
]


@pytest.mark.parametrize("chat, questions", list(zip(ECHOED_CHATS, PARTY_QUESTIONS, strict=True)))
def test_a_question_naming_one_party_of_the_chat_ranks_that_partys_words_first(
    make_memory, chat: tuple[str, str, str], questions: list[tuple[str, int]]
) -> None:
    """ "my"/"我" names the user as a name names a speaker: their answer outranks the assistant's question that
    only echoes the words of the question; "you"/"你" alone names the assistant."""
    memory = make_memory(user_id="li", session_id="chat")
    asked, answered, suggested = chat
    memory.put_messages(
        [
            ChatMessage(role="assistant", content=asked),
            ChatMessage(role="user", content=answered),
            ChatMessage(role="assistant", content=suggested),
        ]
    )
    for question, answer in questions:
        ranked = memory.search(question, limit=3)
        assert ranked[0].content == chat[answer], question
        assert ranked[0].explanation.get("entity", 0.0) > 0, question


def test_the_answer_to_a_question_owns_its_words(make_memory) -> None:
    """John's reply never says "doctor": the question before it does. Question and answer are one exchange, so the
    reply earns the question's words in full (more keyword credit than the question, which asserts nothing), not
    at the half a turn's context earns."""
    memory = make_memory(user_id="maria", session_id="visits")
    question, answer = (
        "What did the doctor say about your knee?",
        "A mild sprain: two weeks of rest, then physiotherapy.",
    )
    memory.episodic.add_many(
        [
            MemoryItem(content=question, session_id="s1", metadata={"speaker": "Maria"}),
            MemoryItem(content=answer, session_id="s1", metadata={"speaker": "John"}),
            MemoryItem(content="I recently bought new running shoes.", session_id="s2", metadata={"speaker": "John"}),
            MemoryItem(content="Nice, which brand?", session_id="s2", metadata={"speaker": "Maria"}),
        ]
    )
    ranked = {item.content: item for item in memory.search("What did the doctor recently say?", limit=4)}
    assert ranked[answer].explanation["keyword"] > ranked[question].explanation["keyword"]
    assert ranked[answer].score > ranked["I recently bought new running shoes."].score


def test_what_an_asker_says_of_itself_stays_its_own(make_memory) -> None:
    """ "我很喜欢爬山和骑车，你也喜欢户外活动吗？" states what the user likes before it asks: the reply owns the
    question's words, not the user's hiking, and the user's turn answers the later question about them."""
    memory = make_memory(user_id="ann", session_id="sport")
    statement = "太棒了，我很喜欢爬山、骑车和滑雪，你也喜欢户外活动吗？"
    reply = "我没有身体，不能去户外，但我可以为你提供户外活动的建议。"
    memory.put_messages(
        [
            ChatMessage(role="user", content=statement),
            ChatMessage(role="assistant", content=reply),
            ChatMessage(role="user", content="最近我在学习编程，你觉得难吗？"),
            ChatMessage(role="assistant", content="编程入门不难，多写多练就好。"),
        ]
    )
    ranked = {item.content: item for item in memory.search("我不喜欢爬山和骑车，对吗？", limit=4)}
    assert ranked[statement].explanation["keyword"] > ranked[reply].explanation["keyword"]
    assert ranked[statement].score > ranked[reply].score


def test_a_question_that_echoes_the_query_asserts_nothing(make_memory) -> None:
    """The turn asking "你周末一般喜欢做什么运动？" holds every word of the later question about it and answers
    none of it: its own keyword credit comes from what it states (nothing), and the answer after it ranks first."""
    memory = make_memory(user_id="li", session_id="sport")
    memory.episodic.add_many(
        [
            MemoryItem(content="你周末一般喜欢做什么运动？", metadata={"speaker": "Ann"}),
            MemoryItem(content="我喜欢游泳和爬山，天气好就去香山。", metadata={"speaker": "Bob"}),
        ]
    )
    # Bob named ("Bob周末": a Latin name against Han characters is a word of its own)
    assert memory.search("Bob周末喜欢做什么运动？", limit=1)[0].content == "我喜欢游泳和爬山，天气好就去香山。"
