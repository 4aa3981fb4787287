"""Conversation compression: older turns fold into a running summary in the system message, the
history stays within its budget, raw turns stay in episodic memory, the summary persists."""

from __future__ import annotations

from lifecycle_llm import SUMMARY, ScriptedLLM
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from llama_index_memory_hierarchy.lifecycle.compression import (
    SUMMARY_HEADER,
    extractive_lines,
    extractive_summary,
    fit_tokens,
)
from llama_index_memory_hierarchy.messages import message_text, quote
from llama_index_memory_hierarchy.text import count_tokens

FILLER = [
    "What should I cook tonight? Something with the vegetables in the fridge.",
    "You could make a stir fry with the peppers and the broccoli.",
    "Good idea. How long should the rice cook for?",
    "About eighteen minutes for white rice, covered, on low heat.",
]


def turns(n: int) -> list[ChatMessage]:
    out = [
        ChatMessage(role="user", content="Important: I am allergic to peanuts, never suggest them."),
        ChatMessage(role="assistant", content="Understood, no peanuts."),
    ]
    for i in range(n):
        text = FILLER[i % len(FILLER)]
        out.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"{text} (turn {i})"))
    return out


def tokens_of(messages: list[ChatMessage]) -> int:
    return sum(count_tokens(message_text(m)) for m in messages)


def test_history_folds_into_a_running_summary_within_budget(memory_factory) -> None:
    limit, memory_limit = 160, 120
    memory = memory_factory(chat_history_token_limit=limit, memory_context_token_limit=memory_limit)
    sent = turns(30)
    for position, message in enumerate(sent):
        memory.put(message)
        messages = memory.get()
        assert tokens_of(messages) <= limit + memory_limit, position
        history = [m for m in messages if m.role != MessageRole.SYSTEM]
        assert tokens_of(history) <= limit
        assert history[-1].content == message.content
    system = next(m for m in messages if m.role == MessageRole.SYSTEM)  # after the latest user message
    assert system.content.split("\n\n")[1].startswith(f"<summary>\n{SUMMARY_HEADER}\n")  # the first section
    summary = memory.manager.session_summary()
    assert summary and "allergic to peanuts" in summary  # the important early turn survives the folds
    assert quote(summary) in system.content  # quoted as data
    # nothing lost: every raw turn is still in episodic memory and in get_all()
    assert memory.episodic.get_stats()["count"] == len(sent)
    assert [m.content for m in memory.get_all()] == [m.content for m in sent]


def test_the_summary_persists_for_the_session(memory_factory) -> None:
    first = memory_factory(chat_history_token_limit=120)
    first.put_messages(turns(16))
    first.get()
    summary = first.manager.session_summary()
    assert summary
    first.close()
    again = memory_factory(chat_history_token_limit=120)
    assert again.manager.session_summary() == summary
    system = [m for m in again.get() if m.role == MessageRole.SYSTEM]
    first_section = system[0].content.split("\n\n")[1]
    assert len(system) == 1 and first_section.startswith(f"<summary>\n{SUMMARY_HEADER}\n{quote(summary)}\n</summary>")
    other = memory_factory(session_id="s2", chat_history_token_limit=120)
    assert other.manager.session_summary() is None
    again.reset()
    assert again.manager.session_summary() is None


def test_covered_turns_counts_the_turns_folded_into_the_summary(memory_factory) -> None:
    memory = memory_factory(chat_history_token_limit=120)
    compressor = memory.manager.compressor
    assert compressor.covered_turns("s1") == 0  # nothing folded yet
    memory.put_messages(turns(16))
    shown = [m for m in memory.get() if m.role != MessageRole.SYSTEM]
    assert compressor.covered_turns("s1") == 18 - len(shown) > 0  # folded: the turns no longer shown
    assert compressor.covered_turns("s2") == 0


def test_llm_summary_is_used_and_kept_within_its_cap(memory_factory) -> None:
    long_reply = "The user is allergic to peanuts. " + "They discussed cooking at length. " * 80
    llm = ScriptedLLM(rules=[(SUMMARY, long_reply)])
    memory = memory_factory(chat_history_token_limit=150, llm=llm)
    memory.put_messages(turns(20))
    messages = memory.get()
    [prompt] = llm.prompts_with(SUMMARY)
    assert "Previous summary:\n(none)" in prompt and "user: Important: I am allergic to peanuts" in prompt
    summary = memory.manager.session_summary()
    cap = memory.manager.compressor.cap(150)
    assert summary.startswith("The user is allergic to peanuts.") and count_tokens(summary) <= cap
    assert (
        tokens_of([m for m in messages if m.role != MessageRole.SYSTEM]) + memory.manager.compressor.cost(summary)
        <= 150
    )
    for message in turns(6):
        memory.put(message)
        memory.get()
    later = llm.prompts_with(SUMMARY)
    assert len(later) >= 2 and "Previous summary:\nThe user is allergic to peanuts." in later[-1]


def test_failing_llm_falls_back_to_the_extractive_summary(memory_factory) -> None:
    llm = ScriptedLLM(rules=[(SUMMARY, "")])
    memory = memory_factory(chat_history_token_limit=120, llm=llm)
    memory.put_messages(turns(16))
    memory.get()
    assert "allergic to peanuts" in memory.manager.session_summary()


def test_extractive_summary_keeps_the_most_important_sentences_in_order() -> None:
    summary = extractive_summary(
        "- user: My daughter's birthday is on June 4th.",
        [
            ("user", "ok thanks. The weather is grey. I'm allergic to shellfish and I love sushi."),
            ("assistant", "Sure. Here are three sushi places without shellfish."),
        ],
        cap_tokens=40,
    )
    lines = summary.splitlines()
    assert lines[0] == "- user: My daughter's birthday is on June 4th."
    assert "- user: I'm allergic to shellfish and I love sushi." in lines
    assert not any("ok thanks" in line for line in lines)
    assert count_tokens(summary) <= 40
    assert fit_tokens("One. Two three four. " * 20, 10).endswith(".")
    assert count_tokens(fit_tokens("word " * 100, 12)) <= 12


def test_extractive_lines_name_the_turn_each_line_quotes() -> None:
    previous = "- user: My daughter's birthday is on June 4th."
    turns = [
        ("user", "ok thanks. I'm allergic to shellfish and I love sushi."),
        ("assistant", "Sure."),
        ("user", "I moved to Oslo in spring."),
    ]
    lines = extractive_lines(previous, turns, cap_tokens=60)
    assert lines == [
        (None, previous),  # kept from the previous summary: no turn of these
        (0, "- user: I'm allergic to shellfish and I love sushi."),
        (2, "- user: I moved to Oslo in spring."),
    ]
    assert extractive_summary(previous, turns, cap_tokens=60) == "\n".join(line for _, line in lines)


def test_chinese_turns_are_summarised_too() -> None:
    """Chinese has no spaces: sentences end at 。！？ and words are counted as jieba segments them
    (a space-split count saw one word in every Chinese sentence, so no Chinese turn was ever kept)."""
    turns = [
        ("user", "我去听了一场交响乐音乐会，非常感动。我最喜欢其中的《新世界》。"),
        ("assistant", "好。"),
        ("user", "我妹妹下个月要搬到杭州工作。"),
    ]
    lines = extractive_lines(None, turns, cap_tokens=200)
    assert (0, "- user: 我去听了一场交响乐音乐会，非常感动。") in lines
    assert (0, "- user: 我最喜欢其中的《新世界》。") in lines
    assert (2, "- user: 我妹妹下个月要搬到杭州工作。") in lines
    assert all(source != 1 for source, _ in lines)  # "好。" says nothing
    long = extractive_lines(None, [("user", "我喜欢" + "很长的句子" * 60 + "。")], cap_tokens=2000)
    assert len(long) == 1 and long[0][1].endswith(" …")
