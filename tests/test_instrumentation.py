"""An agent run with memory, seen through LlamaIndex instrumentation: the memory spans sit in the
agent's trace with counts and timings, and carry no memory text unless ``trace_contents`` is on."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler, NullEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import NullSpanHandler, SimpleSpanHandler
from llama_index.core.llms import MockFunctionCallingLLM
from pydantic import Field

from llama_index_memory_hierarchy.instrumentation import (
    MemoryConsolidationEvent,
    MemoryDeleteEvent,
    MemoryEraseEvent,
    MemoryEvent,
    MemoryForgetEvent,
    MemoryGetEvent,
    MemoryPutEvent,
    MemoryRetrieveEvent,
)

SECRET = "my locker code is 4471"


class Collector(BaseEventHandler):
    """Every event dispatched anywhere."""

    events: list[BaseEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Collector"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


class InputsSpanHandler(SimpleSpanHandler):
    """A span handler that also keeps every span's bound arguments, as tracing integrations record them."""

    inputs: dict[str, str] = Field(default_factory=dict)

    def new_span(self, id_: str, bound_args: inspect.BoundArguments, *args: Any, **kwargs: Any) -> Any:
        self.inputs[id_] = repr(bound_args.arguments)
        return super().new_span(id_, bound_args, *args, **kwargs)


@pytest.fixture
def trace() -> Iterator[tuple[Collector, InputsSpanHandler]]:
    root = get_dispatcher()
    events, spans = Collector(), InputsSpanHandler()
    root.add_event_handler(events)
    root.add_span_handler(spans)
    yield events, spans
    root.event_handlers.remove(events)
    root.span_handlers.remove(spans)


def scripted_llm() -> MockFunctionCallingLLM:
    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        return ChatMessage(role="assistant", content="Noted.")

    return MockFunctionCallingLLM(response_generator=respond)


def ancestors(span_id: str, parents: dict[str, str | None]) -> list[str]:
    chain = []
    while (span_id := parents.get(span_id)) is not None:
        chain.append(span_id)
    return chain


async def test_agent_run_shows_memory_spans_without_contents(
    make_memory: Callable[..., Any], trace: tuple[Collector, InputsSpanHandler]
) -> None:
    events, spans = trace
    make_memory(user_id="ines", session_id="s0").put(ChatMessage(role="user", content=f"Remember: {SECRET}."))
    memory = make_memory(user_id="ines", session_id="s1")  # a later session: the fact comes from memory
    agent = FunctionAgent(llm=scripted_llm(), tools=[], system_prompt="You help.")
    await agent.run(user_msg="What is my locker code?", memory=memory)

    finished = {s.id_: s for s in spans.completed_spans}
    parents = {s.id_: s.parent_id for s in spans.completed_spans}
    names = [span_id.partition("-")[0] for span_id in finished]
    assert "HierarchicalMemory.put" in names and "HierarchicalMemory.get" in names
    assert "memory.retrieve" in names  # the recall inside get()
    agent_spans = {i for i in finished if i.startswith(("FunctionAgent.", "Workflow.", "AgentWorkflow."))}
    in_agent = [i for i in finished if i.startswith("HierarchicalMemory.") and agent_spans & set(ancestors(i, parents))]
    assert in_agent, "no memory span inside the agent's trace"
    recall = next(i for i in finished if i.startswith("memory.retrieve"))
    assert any(p.startswith("HierarchicalMemory.get") for p in ancestors(recall, parents))

    ours = [e for e in events.events if isinstance(e, MemoryEvent)]
    puts = [e for e in ours if isinstance(e, MemoryPutEvent)]
    gets = [e for e in ours if isinstance(e, MemoryGetEvent)]
    retrieves = [e for e in ours if isinstance(e, MemoryRetrieveEvent)]
    assert puts and gets and retrieves
    assert sum(e.messages for e in puts) >= 3  # the fact, the question, the answer
    assert all(e.tokens > 0 and e.duration_ms >= 0 for e in puts)
    assert any(e.memory_message and e.memory_tokens > 0 for e in gets)
    assert any(e.results >= 1 and e.memory_ids for e in retrieves)
    assert all(e.span_id and e.span_id.partition("-")[0] in names for e in ours)
    assert all(e.user != "ines" and e.contents is None for e in ours)

    memory_spans = [i for i in finished if i.startswith(("HierarchicalMemory.", "memory."))]
    # tags are the workflow's own (LlamaIndex puts a summary of the step's input event there)
    dumped = json.dumps([e.model_dump(mode="json", exclude={"tags"}) for e in ours])
    dumped += "".join(spans.inputs[i] for i in memory_spans)
    assert "4471" not in dumped and "locker" not in dumped


def test_contents_only_when_opted_in(
    make_memory: Callable[..., Any], trace: tuple[Collector, InputsSpanHandler]
) -> None:
    events, _ = trace
    memory = make_memory(user_id="ines", session_id="s1", trace_contents=True)
    memory.put(ChatMessage(role="user", content=f"Remember: {SECRET}."))
    memory.get(input="locker code")
    ours = [e for e in events.events if isinstance(e, MemoryEvent)]
    put = next(e for e in ours if isinstance(e, MemoryPutEvent))
    assert put.user == "ines" and put.contents == {"messages": [f"Remember: {SECRET}."]}
    retrieve = next(e for e in ours if isinstance(e, MemoryRetrieveEvent))
    assert retrieve.contents is not None and any(SECRET in text for text in retrieve.contents["results"])


def test_lifecycle_operations_emit_events(
    make_memory: Callable[..., Any], trace: tuple[Collector, InputsSpanHandler]
) -> None:
    events, spans = trace
    memory = make_memory(user_id="otto", session_id="s1")
    memory.put_messages([ChatMessage(role="user", content=f"I live in Lyon and {i} cats.") for i in ("two", "three")])
    memory.manager.consolidate()
    memory.manager.retrieve_memories("where do I live", limit=3)
    memory.manager.forget("importance_based", dry_run=True, threshold=0.99)
    memory.manager.forget_memories([memory.episodic.get_session("s1")[0].id])
    memory.manager.forget_user()
    by_type = {type(e) for e in events.events}
    assert {MemoryConsolidationEvent, MemoryRetrieveEvent, MemoryForgetEvent, MemoryDeleteEvent} <= by_type
    assert MemoryEraseEvent in by_type
    delete = next(e for e in events.events if isinstance(e, MemoryDeleteEvent))
    assert delete.requested == 1 and delete.deleted == 1 and delete.contents is None
    forget = next(e for e in events.events if isinstance(e, MemoryForgetEvent))
    assert forget.dry_run and forget.considered >= 2
    erase = next(e for e in events.events if isinstance(e, MemoryEraseEvent))
    assert erase.rows >= 2
    names = {s.id_.partition("-")[0] for s in spans.completed_spans}
    assert {"Consolidator.consolidate", "MemoryManager.retrieve", "Forgetter.forget", "memory.erase_user"} <= names
    assert "memory.delete" in names


def test_a_failing_operation_drops_its_span(
    make_memory: Callable[..., Any], trace: tuple[Collector, InputsSpanHandler]
) -> None:
    from llama_index_memory_hierarchy.errors import MemoryValidationError

    _, spans = trace
    memory = make_memory()
    with pytest.raises(MemoryValidationError):
        memory.put_messages("not a list")  # type: ignore[arg-type]
    assert any(s.id_.startswith("HierarchicalMemory.put") for s in spans.dropped_spans)


def test_trace_contents_is_off_by_default_and_read_from_the_environment() -> None:
    from llama_index_memory_hierarchy.config import MemoryConfig

    assert MemoryConfig().trace_contents is False
    assert MemoryConfig.from_env(environ={"LMH_TRACE_CONTENTS": "1"}).trace_contents is True


def test_events_are_summarised_only_for_someone_listening(trace: tuple[Collector, InputsSpanHandler]) -> None:
    """LlamaIndex's root dispatcher holds null handlers: with only those, no event is built (its counts cost a
    token count of every message of each ``get()``); with a handler attached, every operation sends its event."""
    from llama_index_memory_hierarchy import instrumentation

    assert instrumentation._heard()  # the fixture's handlers
    root = get_dispatcher()
    kept = list(root.event_handlers), list(root.span_handlers)
    root.event_handlers[:] = [h for h in kept[0] if isinstance(h, NullEventHandler)]
    root.span_handlers[:] = [h for h in kept[1] if isinstance(h, NullSpanHandler)]
    try:
        assert not instrumentation._heard()
    finally:
        root.event_handlers[:], root.span_handlers[:] = kept
