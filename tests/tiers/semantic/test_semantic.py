"""Semantic memory on the embedded stores, real MiniLM embeddings, offline spaCy and a scripted LLM."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from pydantic import Field

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.graph import SQLitePropertyGraphStore
from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory, SemanticSettings
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

T0 = datetime(2025, 3, 1, tzinfo=UTC)


class ScriptedLLM(CustomLLM):
    """A hosted-LLM stand-in: answers with the JSON scripted for the first key found in the prompt."""

    script: dict[str, Any] = Field(default_factory=dict)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted-1")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        for key, value in self.script.items():
            if key in prompt:
                return CompletionResponse(text=json.dumps(value))
        return CompletionResponse(text='{"triplets": []}')

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


def triples(items: list[MemoryItem]) -> set[tuple[str, str, str]]:
    return {(i.metadata["subject"], i.metadata["predicate"], i.metadata["object"]) for i in items}


def graph_counts(memory: Any, user_id: str) -> dict[str, int]:
    store = memory.semantic.graph.store
    assert isinstance(store, SQLitePropertyGraphStore)
    return store.count(user_id)


def test_add_fact_is_a_record_and_a_graph_edge_without_duplicates(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    assert isinstance(semantic, SemanticMemory)
    source_a, source_b = memory.episodic.add("Alice married Bob"), memory.episodic.add("Bob's wife is Alice")
    first = semantic.add_fact("Alice", "spouse", "Bob", source_id=source_a, valid_at=T0)
    again = semantic.add_fact("alice", "Spouse", "Bob", source_id=source_b)
    assert again == first
    item = semantic.get(first)
    assert item.memory_type is MemoryType.SEMANTIC
    assert item.content == "Alice spouse Bob"
    assert item.timestamp == T0
    assert item.metadata["source_ids"] == sorted([source_a, source_b])
    assert item.metadata["valid_at"] == T0.isoformat() and item.metadata["invalid_at"] is None
    assert semantic.get_stats()["facts"] == 1
    assert graph_counts(memory, "alice") == {"nodes": 2, "relations": 1}
    assert semantic.retrieve("who is Alice married to?", limit=1)[0].id == first
    assert semantic.get_entity("ALICE").name == "Alice"


def test_contradiction_supersedes_and_keeps_history(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    paris = semantic.add_fact("User", "lives in", "Paris", valid_at=T0)
    berlin = semantic.add_fact("User", "lives_in", "Berlin", valid_at=T0 + timedelta(days=30))
    london = semantic.add_fact("User", "lives_in", "London", valid_at=T0 - timedelta(days=300))  # late news
    semantic.add_fact("User", "knows", "Bob")
    semantic.add_fact("User", "knows", "Carol")  # not functional: both stay current

    assert triples(semantic.get_facts("User")) == {
        ("User", "lives_in", "Berlin"),
        ("User", "knows", "Bob"),
        ("User", "knows", "Carol"),
    }
    history = {i.id: i for i in semantic.get_facts("User", include_history=True)}
    assert set(history) >= {paris, berlin, london}
    old = history[paris].metadata
    assert old["invalid_at"] == (T0 + timedelta(days=30)).isoformat()
    assert old["superseded_by"] == berlin and old["expired_at"]
    assert history[london].metadata["invalid_at"] == T0.isoformat()
    assert {r.name for r in semantic.get_related_entities("User", relation_types=["lives_in"])} == {"Berlin"}
    assert paris not in {i.id for i in semantic.retrieve("where does the user live? Paris", limit=10)}
    assert paris in {i.id for i in semantic.retrieve("Paris", limit=10, include_history=True)}

    assert semantic.remove(berlin)  # the evidence of the move is gone: Paris is current again
    assert triples(semantic.get_facts("User")) >= {("User", "lives_in", "Paris")}
    assert semantic.get(paris).metadata["invalid_at"] is None
    assert {r.name for r in semantic.get_related_entities("User", relation_types=["lives_in"])} == {"Paris"}


def test_two_hop_question_through_graph_and_agent_context(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    semantic.add_facts(
        [
            ("Alice", "spouse", "Bob"),
            ("Bob", "works_at", "Initech"),
            ("Initech", "located_in", "Austin"),
            ("Carol", "works_at", "Globex"),
        ]
    )
    one = semantic.get_related_entities("Alice", depth=1)
    assert [(r.name, r.hop) for r in one] == [("Bob", 1)]
    two = {r.name: r for r in semantic.get_related_entities("Alice", depth=2)}
    assert set(two) == {"Bob", "Initech"}
    assert two["Initech"].path == "Alice -spouse-> Bob -works_at-> Initech"
    assert {r.name for r in semantic.get_related_entities("Alice", depth=3)} == {"Bob", "Initech", "Austin"}
    assert {r.name for r in semantic.get_related_entities("Initech", depth=1)} == {"Bob", "Austin"}
    assert semantic.get_related_entities("Alice", depth=2, relation_types=["works at"]) == []
    assert semantic.get_related_entities("Nobody", depth=2) == []
    with pytest.raises(MemoryValidationError, match="depth"):
        semantic.get_related_entities("Alice", depth=4)

    top = [i.content for i in semantic.retrieve("Where does Alice's husband work?", limit=2)]
    assert set(top) == {"Alice spouse Bob", "Bob works at Initech"}

    memory.put(ChatMessage(role="user", content="Where does Alice's husband work?"))
    context = memory.get()[-1]  # the memory message follows the latest user message
    assert context.role.value == "system"
    assert "Alice spouse Bob" in context.content
    assert "Bob works at Initech" in context.content


def test_offline_extraction_resolution_and_provenance(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    semantic.add_fact("Alice Chen", "lives_in", "Paris", subject_type="PERSON")
    statement = semantic.add("Alice works at Acme Corp. Alice is Bob's wife.", importance=0.8)
    facts = {
        (i.metadata["subject"], i.metadata["predicate"], i.metadata["object"]): i for i in semantic.get_facts("Alice")
    }
    assert set(facts) == {
        ("Alice Chen", "lives_in", "Paris"),
        ("Alice", "works_at", "Acme Corp"),
        ("Alice", "spouse", "Bob"),
    }
    extracted = facts[("Alice", "works_at", "Acme Corp")]
    assert extracted.metadata["extractor"] == "spacy"
    assert extracted.metadata["confidence"] < 1.0
    assert extracted.metadata["source_ids"] == [statement]
    assert len({i.metadata["subject_id"] for i in facts.values()}) == 1  # "Alice" is "Alice Chen"
    entity = semantic.get_entity("alice")
    assert entity.name == "Alice Chen" and {"alice", "alice chen"} <= set(entity.aliases)
    assert semantic.search_entities("Alice")[0].id == entity.id

    turn_a = memory.episodic.add("Bob knows Carol.")
    turn_b = memory.episodic.add("Bob knows Carol and Dave.")
    semantic.extract_and_add("Bob knows Carol.", source_id=turn_a)
    semantic.extract_and_add("Bob knows Carol. Bob knows Dave.", source_id=turn_b)
    assert semantic.remove_sources([turn_b]) == 1  # "Bob knows Dave" had no other source
    assert triples(semantic.get_facts("Bob")) == {("Alice", "spouse", "Bob"), ("Bob", "knows", "Carol")}
    assert semantic.get_facts("Carol")[0].metadata["source_ids"] == [turn_a]
    assert semantic.remove(statement)  # its facts go, the manual one stays
    assert triples(semantic.get_facts("Alice Chen")) == {("Alice Chen", "lives_in", "Paris")}


async def test_llm_extraction_with_structured_output(make_memory) -> None:
    memory = make_memory()
    llm = ScriptedLLM(
        script={
            "I moved to Lisbon": {
                "triplets": [
                    {"subject": "I", "predicate": "lives_in", "object": "Lisbon", "object_type": "PLACE"},
                    {"subject": "I", "predicate": "works at", "object": "Feedzai", "confidence": 0.8},
                ]
            }
        }
    )
    semantic = SemanticMemory(user_id="alice", session_id="s1", context=memory.context, llm=llm)
    turn = await memory.episodic.aadd("I moved to Lisbon and now work at Feedzai.")
    ids = await semantic.aextract_and_add("I moved to Lisbon and now work at Feedzai.", source_id=turn)
    facts = {i.metadata["predicate"]: i for i in await semantic.aget_many(ids)}
    assert facts["lives_in"].content == "User lives in Lisbon"
    assert facts["works_at"].metadata["extractor"] == "llm:scripted-1"
    assert facts["works_at"].metadata["confidence"] == pytest.approx(0.8)
    assert facts["lives_in"].metadata["source_ids"] == [turn]
    assert (await semantic.aget_stats())["extractor"] == "LLMExtractor"


def test_users_are_isolated_in_records_and_graph(make_memory) -> None:
    alice, bob = make_memory("alice"), make_memory("bob", session_id="s9")
    alice.semantic.add_facts([("Alice", "works_at", "Acme"), ("Alice", "knows", "Zed")])
    bob.semantic.add_facts([("Alice", "works_at", "Globex")])
    assert triples(alice.semantic.get_facts("Alice")) == {("Alice", "works_at", "Acme"), ("Alice", "knows", "Zed")}
    assert triples(bob.semantic.get_facts("Alice")) == {("Alice", "works_at", "Globex")}
    assert alice.semantic.get_entity("Alice").id != bob.semantic.get_entity("Alice").id
    assert bob.semantic.get_entity("Zed") is None
    assert {r.name for r in bob.semantic.get_related_entities("Alice", depth=3)} == {"Globex"}
    assert all(i.user_id == "bob" for i in bob.semantic.retrieve("Acme Zed Alice", limit=10))

    assert bob.semantic.clear() == 1
    assert graph_counts(bob, "bob") == {"nodes": 0, "relations": 0}
    assert graph_counts(alice, "alice") == {"nodes": 3, "relations": 2}
    assert len(alice.semantic.get_facts("Alice")) == 2


def test_durable_and_graph_rebuilt_from_records(make_memory, persist_dir: Path) -> None:
    memory = make_memory()
    memory.semantic.add_facts([("Alice", "spouse", "Bob"), ("Bob", "works_at", "Initech")])
    memory.semantic.add_fact("Bob", "works_at", "Hooli")  # supersedes Initech
    memory.close()
    from llama_index_memory_hierarchy.stores.context import StoreContext

    StoreContext.close_all()
    (persist_dir / "graph.db").unlink()
    for suffix in ("-wal", "-shm"):
        (persist_dir / f"graph.db{suffix}").unlink(missing_ok=True)
    reopened = make_memory()
    assert {r.name for r in reopened.semantic.get_related_entities("Alice", depth=2)} == {"Bob", "Hooli"}
    assert triples(reopened.semantic.get_facts("Bob", include_history=True)) == {
        ("Alice", "spouse", "Bob"),
        ("Bob", "works_at", "Initech"),
        ("Bob", "works_at", "Hooli"),
    }
    assert graph_counts(reopened, "alice")["relations"] == 2


def test_export_json_graphml_html(make_memory, tmp_path: Path) -> None:
    semantic = make_memory().semantic
    semantic.add_facts([("Alice", "spouse", "Bob"), ("Bob", "works_at", "Initech")])
    semantic.add_fact("Bob", "works_at", "Hooli")
    data = json.loads(semantic.export_knowledge_graph("json"))
    assert {n["label"] for n in data["nodes"]} == {"Alice", "Bob", "Hooli"}
    assert {e["label"] for e in data["edges"]} == {"spouse", "works_at"}
    history = json.loads(semantic.export_knowledge_graph("json", include_history=True))
    assert {e["properties"]["status"] for e in history["edges"]} == {"current", "superseded"}
    root = ElementTree.fromstring(semantic.export_knowledge_graph("graphml").encode())
    assert len(root.findall(".//{http://graphml.graphdrawing.org/xmlns}node")) == 3
    page = tmp_path / "kg.html"
    html = semantic.export_knowledge_graph("html", path=page)
    assert page.read_text(encoding="utf-8") == html and "Hooli" in html
    with pytest.raises(MemoryValidationError, match="format"):
        semantic.export_knowledge_graph("svg")


def test_forgetting_and_validation(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    keep = semantic.add_fact("Alice", "likes", "tea", importance=0.9)
    semantic.add_fact("Alice", "likes", "rain", importance=0.1)
    assert semantic.forget("importance_based", threshold=0.3) == 1
    assert [i.id for i in semantic.get_facts("Alice")] == [keep]
    assert graph_counts(memory, "alice") == {"nodes": 2, "relations": 1}
    with pytest.raises(MemoryValidationError):
        semantic.add_fact("   ", "likes", "tea")
    with pytest.raises(MemoryValidationError, match="same entity"):
        semantic.add_fact("Alice", "likes", "alice")
    with pytest.raises(MemoryValidationError, match="content"):  # a correction must state a fact
        semantic.update(keep, content="Well, maybe.")
    assert semantic.update(keep, importance=0.95)
    assert semantic.get(keep).importance == 0.95


def test_settings_make_predicates_functional(make_memory) -> None:
    memory = make_memory()
    settings = SemanticSettings(functional_predicates=frozenset({"drives"}))
    semantic = SemanticMemory(user_id="alice", session_id="s1", context=memory.context, settings=settings)
    semantic.add_fact("Alice", "drives", "a Volvo", valid_at=T0)
    semantic.add_fact("Alice", "drives", "a Tesla", valid_at=T0 + timedelta(days=1))
    semantic.add_fact("Alice", "lives_in", "Oslo")
    semantic.add_fact("Alice", "lives_in", "Bergen")  # no longer functional here
    assert triples(semantic.get_facts("Alice")) == {
        ("Alice", "drives", "a Tesla"),
        ("Alice", "lives_in", "Oslo"),
        ("Alice", "lives_in", "Bergen"),
    }


def test_issue_15_supersession_negation_entities_and_user_name(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    semantic.extract_and_add("I work at Google.", valid_at=T0)
    semantic.extract_and_add("I no longer work at Google.", valid_at=T0 + timedelta(days=1))
    current = triples(semantic.get_facts("User"))
    assert ("User", "works_at", "Google") not in current  # "no longer" ends the old fact
    assert ("User", "does_not_work_at", "Google") in current
    history = triples(semantic.get_facts("User", include_history=True))
    assert ("User", "works_at", "Google") in history
    # "is" holds many values: a second one does not replace the first
    semantic.extract_and_add("Carol is a pilot.", valid_at=T0)
    semantic.extract_and_add("Carol is left-handed.", valid_at=T0 + timedelta(days=1))
    assert {("Carol", "is", "pilot"), ("Carol", "is", "left-handed")} <= triples(semantic.get_facts("Carol"))
    # near-identical facts with different objects are different facts
    semantic.extract_and_add("Carol flies A320.")
    semantic.extract_and_add("Carol flies A321.")
    assert {("Carol", "flies", "A320"), ("Carol", "flies", "A321")} <= triples(semantic.get_facts("Carol"))
    # a shared first name is not enough when the surnames differ
    semantic.add_fact("Alice Smith", "lives_in", "Leeds", subject_type="PERSON")
    semantic.add_fact("Alice", "likes", "jazz", subject_type="PERSON")
    semantic.extract_and_add("Alice Jones owns a yellow piano.")
    smith, jones = semantic.get_entity("Alice Smith"), semantic.get_entity("Alice Jones")
    assert smith is not None and jones is not None and smith.id != jones.id
    assert ("Alice Jones", "owns", "yellow piano") in triples(semantic.get_facts("Alice Jones"))
    assert ("Alice Jones", "owns", "yellow piano") not in triples(semantic.get_facts("Alice Smith"))
    # the user's own name and "User" are one entity
    semantic.extract_and_add("Hi! I'm Zhang San.")
    semantic.add_fact("Zhang San", "likes", "tea")
    user, named = semantic.get_entity("User"), semantic.get_entity("Zhang San")
    assert user is not None and named is not None and user.id == named.id
    assert ("Zhang San", "likes", "tea") in triples(semantic.get_facts("User"))


def test_chinese_user_name_is_the_user(make_memory) -> None:
    semantic = make_memory().semantic
    semantic.extract_and_add("我叫张三。我住在北京。")
    semantic.extract_and_add("张三喜欢咖啡。")
    user = semantic.get_entity("我") or semantic.get_entity("User")
    assert user is not None and semantic.get_entity("张三").id == user.id
    assert {("User", "lives_in", "北京"), ("张三", "likes", "咖啡")} <= triples(semantic.get_facts("User"))


def test_a_name_known_before_the_user_introduces_themselves_becomes_the_user(make_memory) -> None:
    semantic = make_memory().semantic
    semantic.extract_and_add("Zhang San works at Acme as a data analyst.")
    semantic.extract_and_add("Li Si is the manager of Zhang San.")
    semantic.extract_and_add("Hi! I'm Zhang San.")
    user = semantic.get_entity("User")
    assert user is not None and semantic.get_entity("Zhang San").id == user.id
    facts = triples(semantic.get_facts("User"))
    assert {("Zhang San", "works_at", "Acme"), ("Li Si", "manager_of", "Zhang San")} <= facts
    graph = json.loads(semantic.export_knowledge_graph("json"))
    labels = [n["label"] for n in graph["nodes"]]
    assert labels.count("Zhang San") == 1 and "User" not in labels  # one node for the user, labelled with the name
    assert not [e for e in graph["edges"] if e["source"] == e["target"]]  # no "User named User" edge
    assert any("Li Si" in r.path for r in semantic.get_related_entities("Zhang San"))


def test_a_name_given_once_is_the_user_in_later_and_earlier_texts(make_memory) -> None:
    semantic = make_memory().semantic
    semantic.add("Priya is a pilot.")  # before the user said who they are: a person of that name
    semantic.add("I'm Priya.")  # now she is the user: her facts move to the user's entity
    semantic.add("Priya is allergic to sesame.")  # and later facts about the name are the user's
    semantic.add("My colleague Tom is vegan.")  # a third person stays theirs
    facts = {(f.metadata["predicate"], f.metadata["object"]) for f in semantic.get_facts("User")}
    assert {("is", "pilot"), ("is_allergic_to", "sesame"), ("named", "Priya")} <= facts
    assert ("is", "vegan") not in facts
    assert semantic.get_entity("Priya").id == semantic.get_entity("User").id
    assert ("is", "vegan") in {(f.metadata["predicate"], f.metadata["object"]) for f in semantic.get_facts("Tom")}


def test_a_fact_given_new_content_ends_as_history_and_returns_when_the_correction_goes(make_memory) -> None:
    """update(fact, content=...) is a correction, as an agent makes it on a fact it recalled: nothing is lost."""
    semantic = make_memory().semantic
    jazz = semantic.add_fact("User", "likes", "jazz", importance=0.7)
    rome = semantic.add_fact("User", "lives_in", "Rome")
    with pytest.raises(MemoryValidationError, match="content"):  # states no fact: nothing changes
        semantic.update(jazz, content="Hmm, okay then.")
    assert semantic.get_stats()["statements"] == 0 and semantic.get(jazz).metadata["invalid_at"] is None

    assert semantic.update(jazz, content="The user likes blues.")  # not functional: ended by the correction
    assert semantic.update(rome, content="The user lives in Turin.")  # functional: superseded as usual
    now = {i.content: i for i in semantic.get_facts("User")}
    assert set(now) == {"User likes blues", "User lives in Turin"}
    assert now["User likes blues"].importance == 0.7
    old = semantic.get(jazz).metadata
    assert old["invalid_at"] and old["superseded_by"] == now["User likes blues"].id
    assert semantic.get(rome).metadata["superseded_by"] == now["User lives in Turin"].id
    stats = semantic.get_stats()
    assert stats["historical_facts"] == 2 and stats["statements"] == 2
    graph = json.loads(semantic.export_knowledge_graph(include_history=True))
    assert len(graph["edges"]) == 4 and len(json.loads(semantic.export_knowledge_graph())["edges"]) == 2

    (correction,) = now["User likes blues"].metadata["source_ids"]
    assert semantic.remove(correction)  # the correction withdrawn: the fact it ended holds again
    assert {i.content for i in semantic.get_facts("User")} == {"User likes jazz", "User lives in Turin"}
