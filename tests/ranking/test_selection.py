"""Selection rules of the cross-tier search (pure): duplicates collapse, derived memories and their
sources share a slot unless both add words, content-free turns come last, and budgets drop whole lines."""

from __future__ import annotations

import numpy as np

from llama_index_memory_hierarchy.language import query_stopwords
from llama_index_memory_hierarchy.ranking.context import fill_budget
from llama_index_memory_hierarchy.ranking.selection import (
    Choice,
    information_words,
    is_content_free,
    normalised_text,
    select,
    slot_score,
)
from llama_index_memory_hierarchy.text import keyword_tokens


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def choice(key: str, score: float, text: str, vector: np.ndarray | None = None, **kwargs) -> Choice:
    return Choice(
        key=key,
        score=score,
        words=frozenset(text.lower().split()),
        identity=normalised_text(text),
        vector=vector,
        **kwargs,
    )


def test_identical_and_near_identical_contents_collapse() -> None:
    chosen = select(
        [
            choice("a", 0.9, "Okay, noted!", unit(1, 0, 0)),
            choice("b", 0.8, "okay noted", unit(0, 1, 0)),
            choice("c", 0.7, "other words here", unit(1, 0.01, 0)),
            choice("d", 0.6, "something else entirely", unit(0, 0, 1)),
        ],
        limit=4,
    )
    assert [c.key for c in chosen] == ["a", "d"]


def test_a_derived_memory_and_its_source_share_a_slot_unless_both_add_words() -> None:
    turn = choice("turn", 0.8, "i moved to paris last year with my sister beth")
    fact = choice("fact", 0.9, "alice moved paris", related=frozenset({"turn"}))
    chosen = select([fact, turn], limit=5)
    assert [c.key for c in chosen] == ["turn"] and chosen[0].covers is fact  # the turn says all the fact does
    summary = choice("summary", 0.9, "summary: trip planning museums trains hotels", related=frozenset({"t1"}))
    source = choice("t1", 0.8, "we compared night trains and ferries for the trip")
    assert [c.key for c in select([summary, source], limit=5)] == ["summary", "t1"]  # each adds words
    echo = choice("t2", 0.7, "trip planning museums", related=frozenset())
    summary2 = choice("s2", 0.9, "trip planning museums trains", related=frozenset({"t2"}))
    assert [c.key for c in select([summary2, echo], limit=5)] == ["s2"]


def test_content_free_turns_come_after_informative_ones() -> None:
    stop = query_stopwords()  # the maintained lists: Chinese particles and pronouns among them
    assert is_content_free(information_words(keyword_tokens("好的，我记住了。"), stop), matched_query=False)
    assert not is_content_free(information_words(keyword_tokens("我喜欢吃辣的川菜"), stop), matched_query=False)
    assert not is_content_free(frozenset({"peanut", "allergic", "shellfish"}), matched_query=False)
    ack = choice("ack", 0.95, "好的", content_free=True)
    weak = choice("weak", 0.2, "we talked about the garden")
    assert [c.key for c in select([ack, weak], limit=2)] == ["weak", "ack"]


def test_diversity_penalises_redundancy_and_ties_are_deterministic() -> None:
    a = choice("a", 1.0, "alpha one", unit(1, 0))
    b = choice("b", 0.95, "alpha two", unit(0.9, 0.43))
    c = choice("c", 0.9, "beta", unit(0, 1))
    chosen = select([a, b, c], limit=3, diversity=0.5)
    assert [x.key for x in chosen] == ["a", "c", "b"] and chosen[2].penalty > 0
    x = choice("x", 0.5, "same score one", tiebreak=(0.9,))
    y = choice("y", 0.5, "same score two", tiebreak=(0.1,))
    assert [c.key for c in select([y, x], limit=2)] == ["x", "y"]


def test_budget_is_filled_best_first_and_lines_are_never_cut() -> None:
    lines = ["- one", "- a very long line " * 20, "- two", "- one"]
    kept = fill_budget(lines, budget=10, limit=5, count=lambda text: len(text.split()))
    assert kept == ["- one", "- two"]
    assert fill_budget(lines, budget=100, limit=1, count=len) == ["- one"]


def test_a_source_saying_as_much_as_its_derived_paraphrase_keeps_the_slot() -> None:
    fact = choice("fact", 0.9, "alice favorite tea sencha", related=frozenset({"turn"}))
    turn = choice("turn", 0.7, "alice favourite tea sencha")
    chosen = select([fact, turn], limit=5)
    assert [c.key for c in chosen] == ["turn"] and chosen[0].covers is fact
    near = unit(1, 0.05)  # a paraphrase embeds next to its source: the source still takes the slot
    fact = choice("fact", 0.9, "alice favorite tea sencha", unit(1, 0), related=frozenset({"turn"}))
    turn = choice("turn", 0.7, "alice favourite tea sencha", near)
    assert [c.key for c in select([fact, turn], limit=5)] == ["turn"]


def test_what_a_replaced_memory_covered_competes_again() -> None:
    """A turn, then a summary quoting it takes its slot, then another source of that summary takes the
    summary's: the first turn (the one holding the answer) must not be lost along the chain."""
    answer = choice("q", 0.9, "i bought a psychology book called emotional intelligence", unit(1, 0, 0))
    summary = choice(
        "s",
        0.8,
        "i bought a psychology book called emotional intelligence psychology helps handle emotions",
        unit(0.7, 0.7, 0),
        related=frozenset({"q", "r"}),
    )
    reply = choice(
        "r",
        0.6,
        "psychology helps handle emotions i bought a psychology book called emotional intelligence you said",
        unit(0, 1, 0),
    )
    answer = Choice(**{**answer.__dict__, "related": frozenset({"s"})})
    reply = Choice(**{**reply.__dict__, "related": frozenset({"s"})})
    chosen = select([answer, summary, reply], limit=5)
    assert {c.key for c in chosen} == {"r", "q"}  # the summary's slot went to its verbatim source, q kept its own
    passed = choice("p", 0.85, "i bought a psychology book", unit(0.9, 0.1, 0), related=frozenset({"s"}))
    chosen = select([summary, passed, reply], limit=5)
    assert {c.key for c in chosen} == {"r", "p"}  # passed over for the summary, back when the summary went


def test_a_summary_saying_all_a_chosen_turn_does_and_more_holds_its_slot() -> None:
    """The more informative of a memory and its derived one is shown, even when the derived one scores lower
    (the summary quotes the turn and two more): its slot keeps the turn's rank and names it as covered."""
    turn = choice("turn", 0.9, "we went camping and roasted marshmallows", unit(1, 0, 0))
    summary = choice(
        "summary",
        0.3,
        "we went camping and roasted marshmallows then hiked to the lake and saw the perseid meteor shower",
        unit(0.6, 0.8, 0),
        related=frozenset({"turn", "other"}),
    )
    other = choice("x", 0.5, "my new job starts monday", unit(0, 0, 1))
    chosen = select([turn, summary, other], limit=2)
    assert [c.key for c in chosen] == ["summary", "x"] and chosen[0].covers is turn
    fact = choice("fact", 0.3, "camping", unit(0.9, 0.1, 0), related=frozenset({"turn"}))  # says less: no swap
    assert [c.key for c in select([turn, fact, other], limit=2)] == ["turn", "x"]


def test_a_memory_back_in_competition_ranks_by_its_score() -> None:
    """A turn passed over for a summary quoting it comes back when the summary's verbatim source takes the
    summary's slot: it is then listed where its score puts it, not after everything chosen meanwhile."""
    summary = choice("s", 0.9, "i love rock and pop music and played guitar", related=frozenset({"q", "r"}))
    answer = choice("q", 0.85, "i love rock and pop music", related=frozenset({"s"}))
    other = choice("a", 0.5, "the weather was sunny in the park")
    more = choice("b", 0.45, "we cooked pasta for dinner last night")
    source = choice(
        "r", 0.4, "i love rock and pop music and played guitar on the stage tonight", related=frozenset({"s"})
    )
    chosen = select([summary, answer, other, more, source], limit=4)
    assert [c.key for c in chosen] == ["r", "q", "a", "b"]
    assert [slot_score(c) for c in chosen] == sorted((slot_score(c) for c in chosen), reverse=True)


def test_a_slot_keeps_its_score_when_the_memory_it_covered_competes_again() -> None:
    """A fact is chosen first; its verbatim source takes its slot, then a summary quoting the source takes that
    one and the fact competes again, now penalised for repeating the summary: the slot the summary holds keeps
    the score the fact had when it was chosen."""
    fact = choice("fact", 0.9, "user listens to classical music", unit(1, 0), related=frozenset({"turn"}))
    turn = choice("turn", 0.6, "i listen to classical music and read", unit(0.9, 0.44), related=frozenset({"sum"}))
    summary = choice(
        "sum",
        0.3,
        "i felt low today i listen to classical music and read books and travel and cook",
        unit(0.8, 0.6),
        related=frozenset({"turn"}),
    )
    chosen = select([fact, turn, summary], limit=3)
    assert [c.key for c in chosen] == ["sum", "fact"]
    assert slot_score(chosen[0]) == 0.9 and chosen[1].penalty > 0


def test_source_first_shows_the_turn_a_derived_memory_does_not_reproduce_in_its_place() -> None:
    summary = choice("summary", 0.9, "summary: trip planning museums trains hotels", related=frozenset({"t1", "t2"}))
    source = choice("t1", 0.8, "we compared night trains and ferries for the trip")
    other = choice("t2", 0.5, "my cousin recommended a small hotel near the harbour")
    default = select([summary, source, other], limit=5)
    assert [c.key for c in default] == ["summary", "t1", "t2"]
    chosen = select([summary, source, other], limit=5, source_first=True)
    assert [c.key for c in chosen] == ["t1", "summary", "t2"]  # one source takes its place, not every one
    assert chosen[0].stands_for is summary and slot_score(chosen[0]) == 0.9
    # a fact that adds nothing to the turn shown in its place then drops out
    turn = choice("turn", 0.8, "i moved to paris last year with my sister beth")
    fact = choice("fact", 0.9, "alice moved paris", related=frozenset({"turn"}))
    assert [c.key for c in select([fact, turn], limit=5, source_first=True)] == ["turn"]
