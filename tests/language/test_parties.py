"""The parties of a chat (``language.parties``): the one pronoun list and the party a text speaks of."""

from __future__ import annotations

import pytest

from llama_index_memory_hierarchy import language as L


@pytest.mark.parametrize(
    "question, party",
    [
        ("What kind of tea do I drink?", "user"),
        ("What's my favourite scene?", "user"),
        ("我最喜欢哪种花？", "user"),
        ("Which books did you recommend?", "assistant"),
        ("您建议去哪里徒步？", "assistant"),
        # both parties: the subject of the last clause naming one, a request to recall set aside
        ("Which film did you suggest to me?", "assistant"),
        ("你给我推荐了哪本书？", "assistant"),
        ("我曾经和你分享过一部电影，它的名字是？", "user"),
        ("On May 4th, I asked you about a gift. Which present did you suggest to me?", "assistant"),
        ("I mentioned a museum. Do you remember what exhibition I saw?", "user"),
        ("你还记得我当时买了什么花吗？", "user"),
        ("你之前给我推荐过几部电影，你还记得是哪几部吗？", "assistant"),
        ("Do you remember our trip?", None),
        ("What topics did we talk about?", None),  # plurals name more than one party
        ("我们聊了哪些话题？", None),
        ("你们那里冷吗？", None),
        ("Where does Alice live?", None),
    ],
)
def test_named_chat_party_is_the_party_a_question_is_about_by_pronoun(question: str, party: str | None) -> None:
    assert L.named_chat_party(question) == party


def test_statements_are_the_sentences_that_are_not_questions() -> None:
    assert L.statements("Gardening is a calm hobby. Which plants do you grow?") == "Gardening is a calm hobby."
    assert L.statements("今天很累。你有什么放松的方法吗？") == "今天很累。"
    assert L.statements("Did you see it? Yes, twice.") == "Yes, twice."
    assert L.statements("你喜欢哪种茶呢？") == ""


def test_a_question_states_the_clauses_in_which_its_speaker_speaks_of_itself() -> None:
    assert L.statements("那太好了，我很喜欢爬山和骑车，你也喜欢户外吗？") == "我很喜欢爬山和骑车，"
    assert L.statements("I love chess, do you?") == "I love chess,"
    assert L.statements("If you had to choose, which would you pick?") == ""  # its "you" is the one asked
    assert L.statements("What should I pack?") == ""  # the last clause of a question asks, whoever it names


def test_without_self_statements_drops_what_a_speaker_says_of_itself() -> None:
    assert L.without_self_statements("那太好了，我很喜欢爬山，你也喜欢户外吗？") == "那太好了， 你也喜欢户外吗？"
    assert L.without_self_statements("I went to a pottery class. What about you?") == "What about you?"
    said_of_the_other = "Congrats on your promotion! How did it feel?"
    assert L.without_self_statements(said_of_the_other) == said_of_the_other


def test_one_han_range_and_one_pronoun_list_for_both_languages() -> None:
    assert all(L.HAN_CHAR.match(ch) for ch in "汉々〇𠀀")  # an extension-B character too
    assert {"i", "me", "我"} <= L.FIRST_PERSON and {"you", "你", "您"} <= L.SECOND_PERSON
    assert {"she", "他"} <= L.THIRD_PERSON and "我们" in L.FIRST_PERSON_PLURAL
    assert L.named_chat_party("您还记得我养的猫叫什么吗？") == "user"
    assert L.named_chat_party("你们周末去哪里了？") is None  # a plural names more than one party


@pytest.mark.parametrize(
    "text",
    [
        "Do you remember how far I got?",
        "What did I tell you earlier?",
        "Tell me what you remember.",
        "What do you know about me?",
        "你还记得我说过什么吗？",
        "我之前跟你说过什么？",
        "提醒我一下。",
        "我学到哪了？",
    ],
)
def test_a_request_to_recall_in_general(text: str) -> None:
    assert L.asks_to_recall(text)


@pytest.mark.parametrize(
    "text",
    [
        "zzzz qqq",
        "What's the capital of Peru?",
        "Do you know the capital of Peru?",  # a recall cue, but a topic: the floor judges it as any query
        "Do you remember my sister's name?",
        "Remind me to buy milk.",
        "I told you that earlier.",  # a statement, not a request
        "Got it?",  # no recall cue
        "你知道秘鲁的首都是哪里吗？",
    ],
)
def test_not_a_request_to_recall_in_general(text: str) -> None:
    assert not L.asks_to_recall(text)
