"""The user is one entity however named: first person, "the user", the name they gave once (issue 32)."""

from __future__ import annotations


def facts_of(semantic, name: str) -> set[tuple[str, str, str]]:
    return {(i.metadata["subject"], i.metadata["predicate"], i.metadata["object"]) for i in semantic.get_facts(name)}


def test_a_name_given_once_merges_into_the_user_node_which_keeps_it_as_alias(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    semantic.add("I'm Alice.")
    semantic.add("Alice is vegetarian.")  # a later text, by name
    semantic.add("The user lives in Berlin.")  # third person, as an MCP client writes
    semantic.add("I work at Globex.")  # first person
    user = semantic.get_entity("User")
    assert user is not None and "alice" in set(user.aliases)
    assert semantic.get_entity("Alice").id == user.id
    facts = facts_of(semantic, "User")
    assert {("User", "is", "vegetarian"), ("User", "lives_in", "Berlin"), ("User", "works_at", "Globex")} <= {
        ("User", p, o) for _, p, o in facts
    }
    assert len({i.metadata["subject_id"] for i in semantic.get_facts("User")}) == 1


def test_third_person_facts_about_other_people_stay_theirs(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    semantic.add("I'm Alice.")
    semantic.add("Karl is a baker.")
    assert ("Karl", "is", "baker") in facts_of(semantic, "Karl")
    assert semantic.get_entity("Karl").id != semantic.get_entity("User").id


def test_a_chinese_name_given_once_and_the_third_person_are_the_user(make_memory) -> None:
    memory = make_memory()
    semantic = memory.semantic
    semantic.add("我叫张敏。")
    semantic.add("张敏住在苏州。")
    semantic.add("用户对芒果过敏。")
    user = semantic.get_entity("User")
    assert user is not None and "张敏" in set(user.aliases)
    facts = {(p, o) for _, p, o in facts_of(semantic, "User")}
    assert {("lives_in", "苏州"), ("is_allergic_to", "芒果")} <= facts
