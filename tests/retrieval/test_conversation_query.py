"""``get()`` reads what the conversation is about: the recent turns' topic, and not what it already showed."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.llms import ChatMessage, MessageRole

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.ranking.settings import RankingSettings
from llama_index_memory_hierarchy.retrieval.conversation_query import (
    ShownEarlier,
    recent_turns,
    topic_vector,
)

PAST_EN = [
    "I start the new job at the Northport shipyard on Monday, it is sixty kilometres from our flat.",
    "We adopted a kitten called Miso.",
    "My sister's wedding is planned for May.",
    "I repainted the spare bedroom a pale green.",
    "Grandpa taught me to play chess on Sunday.",
]
PAST_ZH = [
    "下周一去城北港口上班，离家很远。",
    "我们领养了一只叫年年的小猫。",
    "我妹妹的婚礼定在五月。",
    "我把客房刷成了淡绿色。",
    "周日爷爷教我下象棋。",
]


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def shown(messages: list[ChatMessage]) -> str:
    """The memory section of what ``get()`` returned ("" when it shows none)."""
    return "\n".join(str(m.content) for m in messages if m.role == MessageRole.SYSTEM)


def remember(make_memory, past: list[str]) -> None:
    """Each of ``past`` told in an earlier session of its own."""
    for n, text in enumerate(past):
        make_memory(session_id=f"past-{n}").put(user(text))


def test_small_talk_about_a_long_commute_brings_up_the_far_away_job(make_memory) -> None:
    remember(make_memory, PAST_EN)
    memory = make_memory(session_id="now")
    last = "two hours behind the wheel again today, I'm wiped out"
    memory.put_messages([user("the motorway was a car park this morning"), assistant("Oh no."), user(last)])
    context = shown(memory.get(input=last))
    assert PAST_EN[0] in context  # no word in common with the dialogue
    assert context.index(PAST_EN[0]) == min(context.find(p) for p in PAST_EN if p in context)


def test_small_talk_about_a_long_commute_brings_up_the_far_away_job_in_chinese(make_memory) -> None:
    remember(make_memory, PAST_ZH)
    memory = make_memory(session_id="now")
    last = "今天又在路上开了两个小时，累瘫了"
    memory.put_messages([user("早上高速堵成了停车场"), assistant("哎呀。"), user(last)])
    context = shown(memory.get(input=last))
    assert PAST_ZH[0] in context
    assert context.index(PAST_ZH[0]) == min(context.find(p) for p in PAST_ZH if p in context)


def test_the_earlier_turns_say_what_a_vague_last_turn_is_about(make_memory) -> None:
    remember(make_memory, PAST_EN)
    memory = make_memory(session_id="now", ranking="input_only")
    dialogue = [
        user("two hours behind the wheel on the motorway this morning"),
        assistant("Oh no."),
        user("wiped out."),
    ]
    memory.put_messages(dialogue)
    alone = shown(memory.get(input="wiped out."))
    memory = make_memory(session_id="now")
    context = shown(memory.get(input="wiped out."))
    assert PAST_EN[0] in context
    assert context.index(PAST_EN[0]) == min(context.find(p) for p in PAST_EN if p in context)
    assert PAST_EN[0] not in alone or alone.index(PAST_EN[0]) > min(alone.find(p) for p in PAST_EN if p in alone)


def test_a_memory_shown_for_an_earlier_turn_is_not_shown_again_unless_asked(make_memory) -> None:
    remember(make_memory, PAST_EN)
    memory = make_memory(session_id="now")
    first = "two hours behind the wheel again today, I'm wiped out"
    memory.put_messages([user("the motorway was a car park this morning"), assistant("Oh no."), user(first)])
    assert PAST_EN[0] in shown(memory.get(input=first))
    assert PAST_EN[0] in shown(memory.get(input=first))  # the same turn (an agent's next step) sees it still
    later = "and tomorrow it will be the same drive all over again"
    memory.put_messages([assistant("That sounds draining."), user(later)])
    assert PAST_EN[0] not in shown(memory.get(input=later))
    asked = "where was that job I took with the long drive?"
    memory.put_messages([assistant("Hang in there."), user(asked)])
    assert PAST_EN[0] in shown(memory.get(input=asked))


def test_a_question_searches_the_input_alone_by_default() -> None:
    settings = RankingSettings.preset("default")
    turns = ["the motorway was a car park", "two hours behind the wheel"]
    assert recent_turns(turns, "when did I start the new job?", settings) == []
    assert recent_turns(["hey", *turns, "so tired"], "so tired", settings) == turns  # a greeting says nothing
    assert recent_turns(turns, "so tired", RankingSettings.preset("input_only")) == []


def test_the_topic_vector_keeps_the_input_first_and_weighs_newer_turns_more() -> None:
    axes = np.eye(3, dtype=np.float32)
    mixed = topic_vector(axes[0], [axes[1], axes[2]], 0.4)
    assert np.isclose(np.linalg.norm(mixed), 1.0)
    assert mixed[0] > mixed[2] > mixed[1] > 0
    assert np.array_equal(topic_vector(axes[0], [axes[1]], 0.0), axes[0])


def test_the_turn_decay_is_a_setting() -> None:
    axes = np.eye(4, dtype=np.float32)
    even = topic_vector(axes[0], [axes[1], axes[2]], 0.5, decay=1.0)
    assert np.isclose(even[1], even[2])  # no decay: the turns weigh alike
    assert np.isclose(np.linalg.norm(even), 1.0)


def test_shown_earlier_holds_back_other_inputs_only_and_nothing_for_a_question() -> None:
    earlier = ShownEarlier()
    earlier.record("the motorway again", ["a", "b"])
    assert earlier.held_back("the motorway again") == frozenset()
    assert earlier.held_back("same tomorrow") == {"a", "b"}
    assert earlier.held_back("what job was that?") == frozenset()


def test_conversation_must_be_a_list_of_texts(make_memory) -> None:
    memory = make_memory()
    with pytest.raises(MemoryValidationError, match="conversation"):
        memory.search("the motorway", conversation="not a list")
