"""A long scripted conversation through HierarchicalMemory: 8 simulated days, 208 turns.

Every turn the context that ``get()`` hands the agent (system message plus history) stays within
its token budget, while older turns fold into running summaries, each day is consolidated at
the end of its session, and weak memories are forgotten every night. On the last day a fact from
the first day is still recalled. Offline paths only (no LLM).
"""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from llama_index_memory_hierarchy.messages import message_text
from llama_index_memory_hierarchy.text import count_tokens

DAYS = 8
EXCHANGES_PER_DAY = 13
HISTORY_BUDGET, MEMORY_BUDGET = 300, 200
FIRST_DAY_FACT = "My daughter Mia is allergic to peanuts, so never suggest anything with nuts."

TOPICS = [
    ("the garden", "tomatoes", "watering them early in the morning"),
    ("my commute", "the train", "leaving ten minutes earlier"),
    ("the book club", "a detective novel", "reading two chapters a night"),
    ("the kitchen", "a pasta recipe", "using less salt in the water"),
    ("the budget", "the electricity bill", "switching to a cheaper tariff"),
    ("the weekend", "a hike near the lake", "packing a rain jacket"),
    ("work", "the quarterly report", "splitting it into smaller parts"),
    ("the car", "a strange noise", "checking the tyre pressure"),
]


def exchange(day: int, turn: int) -> tuple[ChatMessage, ChatMessage]:
    place, thing, advice = TOPICS[(day + turn) % len(TOPICS)]
    user = f"Day {day + 1}, note {turn + 1}: I was thinking about {place} and {thing} again today."
    answer = f"For {thing}, you could try {advice}; tell me how it goes with {place}."
    return ChatMessage(role=MessageRole.USER, content=user), ChatMessage(role=MessageRole.ASSISTANT, content=answer)


def context_tokens(messages: list[ChatMessage]) -> int:
    return sum(count_tokens(message_text(m)) for m in messages)


def test_weeks_of_conversation_stay_within_budget_and_remember_day_one(memory_factory, clock) -> None:
    settings = {"chat_history_token_limit": HISTORY_BUDGET, "memory_context_token_limit": MEMORY_BUDGET}
    turns = 0
    largest = 0
    summaries = 0
    for day in range(DAYS):
        clock.now = clock.now.replace(hour=9, minute=0)
        memory = memory_factory(session_id=f"day-{day + 1:02d}", **settings)
        for turn in range(EXCHANGES_PER_DAY):
            clock.advance(minutes=7)
            user, answer = exchange(day, turn)
            if day == 0 and turn == 2:
                user = ChatMessage(role=MessageRole.USER, content=FIRST_DAY_FACT)
            memory.put_messages([user, answer])
            turns += 2
            messages = memory.get()
            used = context_tokens(messages)
            largest = max(largest, used)
            assert used <= HISTORY_BUDGET + MEMORY_BUDGET, (day, turn, used)
            history = [m for m in messages if m.role != MessageRole.SYSTEM]
            assert context_tokens(history) <= HISTORY_BUDGET
            assert history[-1].content == answer.content
        summaries += memory.manager.session_summary() is not None
        memory.manager.end_session()  # consolidate the day into facts, clear working memory
        memory.manager.forget("importance_based", ["episodic"], threshold=0.45)  # the night forgets small talk
        memory.close()
        clock.advance(days=1)
    assert turns == DAYS * EXCHANGES_PER_DAY * 2 >= 200
    assert summaries == DAYS  # every day grew beyond the history budget and was summarised

    last = memory_factory(session_id="day-09", **settings)
    last.put(ChatMessage(role=MessageRole.USER, content="What can I pack for Mia's school lunch tomorrow?"))
    messages = last.get()
    assert messages[-1].role == MessageRole.SYSTEM  # the memory message, after the latest user message
    assert "allergic to peanuts" in messages[-1].content  # day one, a week later
    assert context_tokens(messages) <= HISTORY_BUDGET + MEMORY_BUDGET
    recalled = last.manager.retrieve_memories("Is Mia allergic to anything?", limit=3)
    assert any("peanuts" in item.content for item in recalled)
    profile = last.manager.get_profile()
    assert any("peanuts" in entry.text for entry in profile.facts + profile.preferences)
    # the nights forgot the assistant's small talk but kept what the user said
    stats = last.episodic.get_stats()["count"]
    assert stats < turns and stats >= DAYS * EXCHANGES_PER_DAY
    print(f"\n{turns} turns over {DAYS} days; largest context {largest} tokens of {HISTORY_BUDGET + MEMORY_BUDGET}")
