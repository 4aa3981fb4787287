"""Episodic memory on the embedded stores: durable, hybrid retrieval, filters, timeline, scoping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_add_retrieve_round_trip(make_memory) -> None:
    episodic = make_memory().episodic
    ids = episodic.add_many(
        [
            MemoryItem(content="We planned a trip to Kyoto in April", timestamp=T0, importance=0.7),
            MemoryItem(content="The user adopted a dog named Biscuit", timestamp=T0 + timedelta(days=1)),
            MemoryItem(content="Quarterly taxes are due on the 15th", timestamp=T0 + timedelta(days=2)),
        ]
    )
    assert len(set(ids)) == 3
    results = episodic.retrieve("what is my dog called?", limit=2)
    assert results[0].content == "The user adopted a dog named Biscuit"
    assert results[0].memory_type is MemoryType.EPISODIC and results[0].score is not None
    item = episodic.get(ids[0])
    assert item.timestamp == T0 and item.importance == 0.7 and item.session_id == "s1"


def test_keyword_signal_finds_rare_terms(make_memory) -> None:
    episodic = make_memory().episodic
    episodic.add_many(
        [f"note number {i} about groceries" for i in range(30)] + ["serial XK-4471 belongs to the router"]
    )
    assert episodic.retrieve("XK-4471", limit=1)[0].content == "serial XK-4471 belongs to the router"


def test_chinese_text_is_searchable(make_memory) -> None:
    episodic = make_memory().episodic
    episodic.add_many(["我喜欢学习Python编程", "今天天气很好", "明天去北京开会"])
    assert episodic.retrieve("北京", limit=1)[0].content == "明天去北京开会"


def test_filters_session_time_importance_metadata(make_memory) -> None:
    episodic = make_memory().episodic
    episodic.add("tea in s1", timestamp=T0, importance=0.2, metadata={"topic": "tea"})
    episodic.add(
        "tea in s2", timestamp=T0 + timedelta(days=3), importance=0.9, session_id="s2", metadata={"topic": "tea"}
    )
    episodic.add("coffee in s2", timestamp=T0 + timedelta(days=3), session_id="s2", metadata={"topic": "coffee"})
    contents = lambda items: sorted(i.content for i in items)  # noqa: E731
    # min_score=0: the filters alone decide what is shown (the relevance floor would keep only what says "tea")
    assert contents(episodic.retrieve("tea", session_id="s2", min_score=0.0)) == ["coffee in s2", "tea in s2"]
    later = episodic.retrieve("tea", start_time=T0 + timedelta(days=1), min_score=0.0)
    assert contents(later) == ["coffee in s2", "tea in s2"]
    assert contents(episodic.retrieve("tea", time_range=(T0, T0 + timedelta(hours=1)), min_score=0.0)) == ["tea in s1"]
    assert contents(episodic.retrieve("tea", min_importance=0.8, min_score=0.0)) == ["tea in s2"]
    assert contents(episodic.retrieve("drink", metadata={"topic": "coffee"}, min_score=0.0)) == ["coffee in s2"]
    with pytest.raises(MemoryValidationError, match="colour"):
        episodic.retrieve("tea", colour="red")


def test_timeline_session_and_patterns(make_memory) -> None:
    episodic = make_memory().episodic
    for day in range(4):
        episodic.add(f"practised guitar chords on day {day}", timestamp=T0 + timedelta(days=day), session_id=f"d{day}")
        episodic.add(f"ate lunch item {day}", timestamp=T0 + timedelta(days=day, hours=3), session_id=f"d{day}")
    timeline = episodic.get_timeline(T0 + timedelta(days=1), T0 + timedelta(days=2, hours=5))
    assert [i.timestamp for i in timeline] == sorted(i.timestamp for i in timeline)
    assert len(timeline) == 4
    assert [i.content for i in episodic.get_session("d0")] == ["practised guitar chords on day 0", "ate lunch item 0"]
    patterns = episodic.find_patterns()
    topics = [t["topic"] for t in patterns["recurring_topics"]]
    assert "guitar" in topics and "chords" in topics
    assert patterns["active_hours"] == {9: 4, 12: 4}


def test_patterns_are_topics_not_filler_words(make_memory) -> None:
    """ "went", "again", "then" recur in every conversation; only what they were about is a topic."""
    pytest.importorskip("spacy")
    episodic = make_memory().episodic
    lines = [
        "We went to the climbing gym again, then had pho.",
        "I went bouldering at the climbing gym and then again on Friday.",
        "Then we went back to the gym again.",
        "周末又去攀岩馆了，然后吃了米粉。",
        "然后我们又去了攀岩馆。",
    ]
    for day, line in enumerate(lines):
        episodic.add(line, timestamp=T0 + timedelta(days=day), session_id=f"d{day}")
    topics = [t["topic"] for t in episodic.find_patterns(top_n=20)["recurring_topics"]]
    assert "gym" in topics and "climbing" in topics and any(t.startswith("攀岩") for t in topics)
    assert not {"went", "again", "then", "然后"} & set(topics)


def test_patterns_leave_out_small_talk_and_time_words(make_memory) -> None:
    """Chat is full of "today", "lol" and "haha" (nouns to a tagger): when, or nothing; never what it was about."""
    pytest.importorskip("spacy")
    episodic = make_memory().episodic
    lines = [
        "Yeah so today I went to the pottery class again, lol, it was fun haha.",
        "Okay, the pottery class today was great, the weekend glaze firing too lol.",
        "Haha, this weekend I finally finished a bowl at the pottery class.",
        "今天又去陶艺课了，哈哈。",
        "今天陶艺课做了一个碗，哈哈。",
    ]
    for day, line in enumerate(lines):
        episodic.add(line, timestamp=T0 + timedelta(days=day), session_id=f"d{day}")
    topics = [t["topic"] for t in episodic.find_patterns(top_n=20)["recurring_topics"]]
    assert {"pottery", "class"} <= set(topics) and any("陶艺" in t for t in topics), topics
    assert not {"today", "weekend", "lol", "haha", "今天", "哈哈"} & set(topics), topics


def test_retrieval_bumps_access(make_memory) -> None:
    memory = make_memory()
    memory_id = memory.episodic.add("the wifi password is on the fridge")
    memory.episodic.retrieve("wifi password")
    memory.context.runtime.run(_settle(memory))
    item = memory.episodic.get(memory_id)
    assert item.access_count == 1 and item.last_accessed is not None


async def _settle(memory) -> None:
    import asyncio

    await asyncio.gather(*memory.context._background)


def test_dedupe_is_idempotent_on_request(make_memory) -> None:
    episodic = make_memory().episodic
    first = episodic.add("same words", dedupe=True)
    assert episodic.add("same words", dedupe=True) == first
    assert episodic.add("same words") != first
    assert episodic.get_stats()["count"] == 2


def test_update_remove_clear_and_forget(make_memory) -> None:
    episodic = make_memory().episodic
    memory_id = episodic.add("my locker code is 1234", importance=0.2)
    assert episodic.update(memory_id, content="my locker code is 9876", importance=0.9)
    assert episodic.retrieve("locker code", limit=1)[0].content == "my locker code is 9876"
    old = episodic.add("old news", timestamp=T0, importance=0.1)
    assert episodic.forget("time_based", older_than=86400, dry_run=True) == 1
    assert episodic.has_memory(old)
    assert episodic.forget("time_based", older_than=86400) == 1
    assert not episodic.has_memory(old)
    assert episodic.remove(memory_id) and not episodic.remove(memory_id)
    episodic.add("a"), episodic.add("b")
    assert episodic.clear() == 2
    assert episodic.retrieve("a") == []


def test_two_users_never_see_each_other(make_memory) -> None:
    alice, bob = make_memory("alice"), make_memory("bob")
    secret = alice.episodic.add("Alice's bank PIN is 4321")
    bob.episodic.add("Bob likes sailing")
    assert bob.episodic.get(secret) is None
    assert all("PIN" not in i.content for i in bob.episodic.retrieve("bank PIN", limit=10))
    assert not bob.episodic.update(secret, content="hacked") and not bob.episodic.remove(secret)
    nodes = bob.episodic.as_retriever(similarity_top_k=10).retrieve("bank PIN")
    assert all(n.node.metadata["user_id"] == "bob" for n in nodes)
    assert bob.episodic.clear() == 1
    assert alice.episodic.get(secret).content == "Alice's bank PIN is 4321"
    assert alice.episodic.get_stats()["count"] == 1


def test_bad_input_is_rejected_before_writing(make_memory) -> None:
    episodic = make_memory().episodic
    with pytest.raises(MemoryValidationError, match="item_or_text"):
        episodic.add_many(["fine", MemoryItem(content="ok"), "also fine", 3])  # type: ignore[list-item]
    with pytest.raises(MemoryValidationError, match="importance"):
        episodic.add("x", importance=float("inf"))
    with pytest.raises(MemoryValidationError, match="metadata"):
        episodic.add("x", metadata={"bad": float("nan")})
    with pytest.raises(MemoryValidationError, match="limit"):
        episodic.retrieve("x", limit=0)
    assert episodic.get_stats()["count"] == 0


def test_removing_a_source_memory_removes_facts_only_it_supported(make_memory) -> None:
    memory = make_memory()
    only = memory.episodic.add("Alice told me she works at Acme")
    first = memory.episodic.add("Bob said he lives in Oslo")
    second = memory.episodic.add("Bob repeated that he lives in Oslo")
    memory.semantic.add_fact("Alice", "works_at", "Acme", source_id=only)
    memory.semantic.add_fact("Bob", "lives_in", "Oslo", source_id=first)
    memory.semantic.add_fact("Bob", "lives_in", "Oslo", source_id=second)
    assert memory.episodic.remove(only)
    assert memory.semantic.get_facts("Alice") == []
    assert memory.episodic.forget("importance_based", threshold=1.0) == 2
    assert memory.semantic.get_facts("Bob") == []


def test_chinese_time_hint_finds_last_weeks_turn(make_memory) -> None:
    """ "我上周说过什么？" (what did I say last week?) names no word of the memories: the time hint ranks them."""
    from llama_index_memory_hierarchy.types import utcnow

    now = utcnow()
    monday = datetime(now.year, now.month, now.day, 12, tzinfo=UTC) - timedelta(days=now.weekday())
    episodic = make_memory().episodic
    episodic.add_many(
        [
            MemoryItem(content="我开始学习装饰器了", timestamp=monday - timedelta(days=40)),
            MemoryItem(content="我最喜欢的茶是龙井", timestamp=monday - timedelta(days=90)),
        ]
    )
    last_week = episodic.add(MemoryItem(content="周末打算去爬山", timestamp=monday - timedelta(days=5)))
    # no time nor content word named: a request to recall in general (language.asks_to_recall), which every
    # informative memory answers
    assert len(episodic.retrieve("我说过什么？", limit=3)) == 3
    assert episodic.retrieve("我上周说过什么？", limit=3)[0].id == last_week


def test_chinese_speaker_names_and_mixed_text(make_memory) -> None:
    episodic = make_memory().episodic
    zhang = episodic.add(MemoryItem(content="我喜欢吃辣的川菜", metadata={"speaker": "张三"}))
    episodic.add(MemoryItem(content="我喜欢吃甜的粤菜", metadata={"speaker": "李四"}))
    assert episodic.retrieve("张三喜欢吃什么菜？", limit=2)[0].id == zhang  # the name's prior
    mixed = episodic.add(MemoryItem(content="我在用Python写自动化脚本"))
    assert episodic.retrieve("python脚本", limit=1)[0].id == mixed
    assert episodic.retrieve("What about the Python scripts?", limit=1)[0].id == mixed


def _stored_keyword_texts(memory) -> dict[str, str]:
    import sqlalchemy as sa

    from llama_index_memory_hierarchy.stores.schema import memories

    async def work(conn):
        rows = await conn.execute(sa.select(memories.c.id, memories.c.keyword).where(memories.c.user_id == "alice"))
        return dict(rows.all())

    return memory.context.runtime.run(memory.context.records.run_transaction(work, write=False, op="test"))


def _reindexed_keyword_texts(memory) -> dict[str, str]:
    """What a full recomputation of the session (as ``lmh reindex`` does) writes."""
    from llama_index_memory_hierarchy.text import keyword_text
    from llama_index_memory_hierarchy.tiers.episodic import keyword_documents

    session = memory.episodic.get_session("s1")
    return {item.id: keyword_text(text) for item, text in zip(session, keyword_documents(session), strict=True)}


def test_deletes_and_edits_leave_every_keyword_text_as_a_full_reindex_writes_it(make_memory) -> None:
    """Deletes and edits rewrite only the neighbourhood of what changed; the result equals recomputing the
    whole session, with turns that share their time (ordered as written) and a summary among them."""
    memory = make_memory()
    times = [
        T0,
        T0,
        T0 + timedelta(hours=1),
        *[T0 + timedelta(hours=2)] * 4,
        *(T0 + timedelta(hours=h) for h in range(3, 8)),
    ]
    turns = [MemoryItem(content=f"turn {n} about topic{n}", timestamp=t) for n, t in enumerate(times)]
    ids = memory.episodic.add_many(turns)
    summary = MemoryItem(content="Summary: turns about topics", timestamp=times[5], metadata={"source_ids": ids[3:6]})
    memory.episodic.add_many([summary])
    assert _stored_keyword_texts(memory) == _reindexed_keyword_texts(memory)

    assert memory.episodic.remove(ids[4]) is True  # among turns sharing their time
    assert _stored_keyword_texts(memory) == _reindexed_keyword_texts(memory)
    memory.manager.forget_memories([ids[1], ids[9], ids[10]])  # apart and adjacent, in one delete
    assert _stored_keyword_texts(memory) == _reindexed_keyword_texts(memory)
    assert memory.episodic.update(ids[6], content="turn 6 rewritten about gardening") is True
    assert _stored_keyword_texts(memory) == _reindexed_keyword_texts(memory)
    assert not [i for i in memory.search("topic4 topic9", 10) if i.explanation and i.explanation.get("keyword")]
