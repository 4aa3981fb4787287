"""Consolidation: working -> episodic (no duplicates), episodic -> semantic facts with sources,
offline and with a scripted LLM; idempotent; at session end; in the background."""

from __future__ import annotations

import json

from lifecycle_llm import DISTILL, ScriptedLLM
from llama_index.core.base.llms.types import ChatMessage

from llama_index_memory_hierarchy.lifecycle.consolidation import SUMMARY_KIND
from llama_index_memory_hierarchy.lifecycle.settings import LifecycleSettings
from llama_index_memory_hierarchy.types import MemoryType


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def query(tier, **filters) -> list:
    """Every memory of a tier (sync, for assertions)."""
    return tier.runtime.run(tier.aquery(**filters))


def facts_of(memory) -> list:
    return [i for i in query(memory.semantic) if i.metadata.get("kind") == "fact"]


def test_working_items_that_matter_move_to_episodic_once(memory_factory) -> None:
    memory = memory_factory()
    manager = memory.manager
    memory.put_messages([user("I work at Acme Corp as a data engineer."), assistant("Nice!")])
    put_turns = memory.episodic.get_stats()["count"]
    important = manager.add_memory("The deploy key is in the team vault.", "working", 0.9)
    trivial = manager.add_memory("Scratch note: try the other branch.", "working", 0.2)
    repeated = [manager.add_memory("Use the staging database.", "working", 0.3) for _ in range(2)]
    recalled = manager.add_memory("The ticket number is ENG-4411.", "working", 0.3)
    for _ in range(2):
        memory.working.retrieve("ENG-4411 ticket number", limit=1)

    report = manager.consolidate(distill=False, reflect=False)
    assert report.already_episodic == 1  # the user turn (it matters): marked, not copied
    assert set(report.promoted) == {important, repeated[0], recalled}
    episodic = {i.id: i for i in query(memory.episodic)}
    assert len(episodic) == put_turns + 3
    assert trivial not in episodic and repeated[1] not in episodic
    assert episodic[important].metadata["consolidated_from"] == "working"
    assert episodic[repeated[0]].metadata["repetitions"] == 2
    assert episodic[recalled].access_count >= 2

    again = manager.consolidate(distill=False, reflect=False)
    assert again.promoted == [] and again.already_episodic == 0
    assert memory.episodic.get_stats()["count"] == put_turns + 3


def test_offline_distillation_links_facts_to_their_sources(memory_factory) -> None:
    memory = memory_factory()
    memory.put_messages(
        [
            user("I work at Acme Corp as a data engineer."),
            assistant("Great, Acme Corp sounds interesting."),
            user("My sister Lena lives in Lisbon."),
            assistant("Lisbon is lovely."),
        ]
    )
    turns = {i.content: i.id for i in query(memory.episodic)}
    report = memory.manager.consolidate()
    assert report.method == "offline"
    work, sister = turns["I work at Acme Corp as a data engineer."], turns["My sister Lena lives in Lisbon."]
    assert set(report.distilled) == {work, sister}
    facts = {f.content: f for f in facts_of(memory)}
    assert "User works at Acme Corp" in facts and "Lena lives in Lisbon" in facts
    assert facts["User works at Acme Corp"].metadata["source_ids"] == [work]
    assert facts["Lena lives in Lisbon"].metadata["source_ids"] == [sister]
    assert facts["Lena lives in Lisbon"].metadata["extractor"].startswith("consolidation:")
    assert facts["Lena lives in Lisbon"].timestamp == memory.episodic.get(sister).timestamp
    [summary] = [i for i in query(memory.episodic) if i.metadata.get("kind") == SUMMARY_KIND]
    assert set(summary.metadata["source_ids"]) == set(report.distilled)
    assert "Lisbon" in summary.content and summary.id in report.summaries
    assert memory.semantic.get_facts("Lena")

    count = len(facts_of(memory))
    again = memory.manager.consolidate()
    assert (again.distilled, again.facts, again.summaries, again.method) == ([], [], [], "none")
    assert len(facts_of(memory)) == count


def test_an_extractive_summary_cites_only_the_turns_it_quotes(memory_factory) -> None:
    quoted = ["I work at Acme Corp as a data engineer.", "My sister Lena lives in Lisbon."]
    memory = memory_factory()
    memory.put_messages([user(quoted[0]), user("Sounds good!"), user(quoted[1])])
    turns = {i.content: i.id for i in query(memory.episodic)}
    report = memory.manager.consolidate()
    assert turns["Sounds good!"] in report.distilled  # in the batch, too short to be quoted
    [summary] = [i for i in query(memory.episodic) if i.metadata.get("kind") == SUMMARY_KIND]
    assert "Sounds good" not in summary.content and summary.metadata["method"] == "extractive"
    assert summary.metadata["source_ids"] == [turns[q] for q in quoted]
    assert summary.metadata["party"] == "user"  # the user's own account: "my ..." questions weigh it as theirs


def test_llm_distillation_with_citations(memory_factory) -> None:
    reply = {
        "summary": "The user talked about their job and their sister.",
        "facts": [
            {"subject": "User", "predicate": "works_at", "object": "Acme Corp", "sources": [1]},
            {"subject": "Lena", "predicate": "sister_of", "object": "User", "sources": [2]},
            {"subject": "User", "predicate": "likes", "object": "climbing"},
            {"subject": "broken"},
        ],
    }
    llm = ScriptedLLM(rules=[(DISTILL, "```json\n" + json.dumps(reply) + "\n```")])
    memory = memory_factory(llm=llm)
    memory.put_messages([user("I work at Acme Corp."), assistant("ok"), user("Lena is my sister.")])
    turns = {i.content: i.id for i in query(memory.episodic)}
    report = memory.manager.consolidate()
    assert report.method == "llm"
    [prompt] = llm.prompts_with(DISTILL)
    assert "[1]" in prompt and "I work at Acme Corp." in prompt and "[2]" in prompt and "Lena is my sister." in prompt
    assert "ok" not in prompt.split("[2]")[0].split("\n")[-2]  # assistant turns are not distilled
    facts = {f.content: f for f in facts_of(memory)}
    assert facts["User works at Acme Corp"].metadata["source_ids"] == [turns["I work at Acme Corp."]]
    assert facts["Lena sister of User"].metadata["source_ids"] == [turns["Lena is my sister."]]
    # "User likes climbing" cites no event and no event mentions climbing: an unsupported fact is dropped (issue 15)
    assert "User likes climbing" not in facts
    assert all(f.metadata["extractor"] == "consolidation:llm" for f in facts.values())
    [summary] = [i for i in query(memory.episodic) if i.metadata.get("kind") == SUMMARY_KIND]
    assert summary.content.endswith("The user talked about their job and their sister.")
    assert memory.manager.consolidate().facts == [] and len(llm.prompts_with(DISTILL)) == 1


def test_llm_failure_falls_back_to_offline_extraction(memory_factory) -> None:
    llm = ScriptedLLM(rules=[(DISTILL, "Sorry, I cannot help with that.")])
    memory = memory_factory(llm=llm)
    memory.put(user("I work at Globex as a chemist."))
    report = memory.manager.consolidate()
    assert report.method == "llm" and llm.prompts_with(DISTILL)
    assert "User works at Globex" in {f.content for f in facts_of(memory)}


def test_end_session_consolidates_this_session_and_clears_working(memory_factory) -> None:
    earlier = memory_factory(session_id="monday")
    earlier.put(user("I moved to Hamburg."))
    memory = memory_factory(session_id="tuesday")
    memory.put_messages([user("I work at Initech."), assistant("Noted.")])
    memory.manager.add_memory("Remember the parking spot is B12.", "working", 0.8)
    report = memory.manager.end_session()
    assert memory.working.get_stats()["count"] == 0
    assert len(report.promoted) == 1
    contents = {f.content for f in facts_of(memory)}
    assert "User works at Initech" in contents
    assert not any("Hamburg" in c for c in contents)  # another session: not this one's to consolidate
    assert [e["action"] for e in memory.manager.events()][-2:] == ["consolidate", "end_session"]


async def test_background_consolidation_does_not_block_the_turn(memory_factory) -> None:
    fact = {"subject": "User", "predicate": "works_at", "object": "Hooli", "sources": [1]}
    reply = {"summary": "Work talk.", "facts": [fact]}
    llm = ScriptedLLM(rules=[(DISTILL, json.dumps(reply))], async_delay=0.5)
    memory = memory_factory(llm=llm, lifecycle=LifecycleSettings(consolidate_every_turns=2))
    manager = memory.manager
    await memory.aput_messages([user("I work at Hooli."), assistant("Cool.")])  # the 2nd message starts it
    assert manager.background_running  # the put returned while consolidation waits on the LLM
    assert facts_of(memory) == []
    await manager.await_background()
    assert not manager.background_running
    assert {f.content for f in facts_of(memory)} == {"User works at Hooli"}

    assert await manager.aconsolidate(background=True) is None  # explicit background run: nothing new
    await manager.await_background()
    assert len(llm.prompts_with(DISTILL)) == 1
    [event] = [e for e in await manager.aevents() if e["action"] == "consolidate"][-1:]
    assert event["detail"]["facts"] == 0


def test_consolidated_memories_keep_their_tier_identity(memory_factory) -> None:
    memory = memory_factory()
    memory.put(user("I am vegetarian."))
    memory.manager.consolidate()
    for fact in facts_of(memory):
        assert fact.memory_type is MemoryType.SEMANTIC and fact.user_id == "alice"


def test_unusable_llm_replies_fall_back_offline_and_say_so(memory_factory) -> None:
    """Issue 15: an empty but valid reply, a reply cut off mid-JSON, a summary repeating an event."""
    replies = iter(
        [
            json.dumps({"summary": "", "facts": []}),
            '{"summary": "The user moved.", "facts": [{"subject": "User", "predicate": "lives_in", "obj',
            json.dumps(
                {"summary": "I live in Oslo.", "facts": [{"subject": "User", "predicate": "likes", "object": "Mars"}]}
            ),
        ]
    )
    llm = ScriptedLLM(rules=[(DISTILL, lambda prompt: next(replies))])
    for number, turns in enumerate(
        [
            ["I work at Globex as a chemist.", "I don't like coffee."],
            ["I live in Bergen.", "My sister Lena is a pilot."],
            ["I live in Oslo.", "I'm allergic to peanuts."],
        ]
    ):
        memory = memory_factory(llm=llm, session_id=f"s{number}")
        memory.put_messages([user(t) for t in turns])
        report = memory.manager.consolidate(session_id=f"s{number}")
        assert report.method == "llm" and report.fallbacks, report
        contents = {f.content for f in facts_of(memory)}
        summaries = [i for i in query(memory.episodic) if i.metadata.get("kind") == SUMMARY_KIND]
        if number == 0:
            assert {"User works at Globex", "User does not like coffee"} <= contents
            assert summaries and "no usable fact" in report.fallbacks[0]
        elif number == 1:
            assert {"User lives in Bergen", "Lena sister of User"} <= contents
            assert "unusable LLM reply" in report.fallbacks[0]
        else:
            assert "User likes Mars" not in contents  # no event supports it
            assert "User is allergic to peanuts" in contents
            assert any("summary" in note for note in report.fallbacks)


def test_a_first_person_said_by_another_speaker_is_that_speaker(memory_factory) -> None:
    """A conversation stored with speakers (LoCoMo-style events): John's "I" is John, not the user; the
    user's own messages and notes without a speaker keep the user as "I"."""
    memory = memory_factory()
    john = memory.episodic.add("I work at Acme Corp as a data engineer.", metadata={"speaker": "John"})
    note = memory.episodic.add("I work at Globex as a designer.")
    memory.put_messages([user("My sister Lena lives in Lisbon.")])
    memory.manager.consolidate()
    facts = {f.content: f for f in facts_of(memory)}
    assert "John works at Acme Corp" in facts and facts["John works at Acme Corp"].metadata["source_ids"] == [john]
    assert not any("User works at Acme" in content for content in facts)  # never the user: true before complete
    assert "User works at Globex" in facts and facts["User works at Globex"].metadata["source_ids"] == [note]
    assert "Lena lives in Lisbon" in facts


def test_the_llm_reads_who_said_each_event(memory_factory) -> None:
    """The distillation prompt names a turn's speaker where it is not the user's own message, so that an LLM
    can tell whose "I" it is (as the offline path does)."""
    llm = ScriptedLLM(rules=[(DISTILL, '{"summary": "", "facts": []}')])
    memory = memory_factory(llm=llm)
    memory.episodic.add("I got promoted to team lead.", metadata={"speaker": "John"})
    memory.put_messages([user("I work at Acme Corp.")])
    memory.manager.consolidate()
    [prompt] = llm.prompts_with(DISTILL)
    assert "John: I got promoted to team lead." in prompt and "user: I work at Acme Corp." in prompt
