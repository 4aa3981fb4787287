"""Agent tools: a FunctionAgent stores a fact, recalls and updates it in another process, then forgets it;
the tools' results carry full ids; RagToolSpec searches and answers from a knowledge base."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "knowledge"))
sys.path.insert(0, str(Path(__file__).parent))

from scripted_llm import ScriptedLLM
from tool_agent_session import run_turn

from llama_index_memory_hierarchy.tools import MemoryToolSpec, RagToolSpec

SCRIPT = Path(__file__).with_name("tool_agent_session.py")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# Facts go to semantic memory when this installation has it, else to episodic memory.
TIER = "semantic" if importlib.util.find_spec("llama_index_memory_hierarchy.tiers.semantic") else "episodic"
MEMORY_TOOLS = [
    "add_instruction",
    "forget",
    "list_instructions",
    "memory_stats",
    "memory_summary",
    "recall",
    "remember",
    "remove_instruction",
    "update_memory",
]


def run_in_new_process(persist_dir: Path, session: str, message: str, plan: list[dict]) -> dict:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(persist_dir), "mei", session, message, json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_agent_remembers_recalls_in_a_new_process_updates_and_forgets(make_memory, persist_dir: Path) -> None:
    # Session 1, this process: the agent stores a fact.
    memory = make_memory(user_id="mei", session_id="s1")
    plan = [
        {
            "tool": "remember",
            "kwargs": {"content": "Mei's favourite tea is genmaicha.", "tier": TIER, "importance": 0.8},
        },
        {"answer": "I'll remember that."},
    ]
    log = await run_turn(memory, "Please remember that my favourite tea is genmaicha.", plan)
    assert log["offered"] == MEMORY_TOOLS
    stored = re.fullmatch(rf"Remembered in {TIER} memory with id=({UUID})\.", log["tool_results"][0])
    assert stored, log["tool_results"]
    memory_id = stored.group(1)
    assert getattr(memory, TIER).get(memory_id).content == "Mei's favourite tea is genmaicha."
    memory.close()  # the embedded stores serve one process at a time

    # Session 2, a new process: the agent recalls the fact by meaning, finds its id and updates it.
    plan = [
        {"tool": "recall", "kwargs": {"query": "which tea does Mei like", "tier": "all", "limit": 5}},
        {
            "tool": "update_memory",
            "kwargs": {"memory_id": "$id", "content": "Mei's favourite tea is sencha."},
            "match": "genmaicha",
        },
        {"answer": "Updated: you now prefer sencha."},
    ]
    log = run_in_new_process(persist_dir, "s2", "What tea do I like? Actually, I now prefer sencha.", plan)
    recalled, updated = log["tool_results"]
    assert f"id={memory_id}" in recalled and "genmaicha" in recalled
    assert updated.startswith(f"Updated {TIER} memory id={memory_id}: Mei's favourite tea is sencha.")
    assert log["response"] == "Updated: you now prefer sencha."

    # Session 3, this process again: the updated fact is recalled, then forgotten by id.
    memory = make_memory(user_id="mei", session_id="s3")
    plan = [
        {"tool": "recall", "kwargs": {"query": "favourite tea", "tier": TIER}},
        {"tool": "forget", "kwargs": {"memory_id": "$id"}, "match": "sencha"},
        {"tool": "recall", "kwargs": {"query": "favourite tea", "tier": TIER}},
        {"answer": "Forgotten."},
    ]
    log = await run_turn(memory, "Forget what you know about my tea.", plan)
    before, forgot, after = log["tool_results"]
    assert f"id={memory_id}" in before and "sencha" in before
    assert forgot == f"Forgot {TIER} memory id={memory_id}: Mei's favourite tea is sencha."
    assert f"id={memory_id}" not in after
    assert getattr(memory, TIER).get(memory_id) is None


def test_tool_results_and_errors_are_for_an_llm(make_memory) -> None:
    memory = make_memory(user_id="kai")
    spec = MemoryToolSpec(memory)
    tools = {tool.metadata.name: tool for tool in spec.to_tool_list()}
    assert sorted(tools) == MEMORY_TOOLS
    for tool in tools.values():
        description = tool.metadata.description
        assert "Use it" in description and "Example:" in description  # what, when, an example
        assert tool.async_fn is not None  # a real async twin
    assert tools["remember"].metadata.get_parameters_dict()["required"] == ["content"]

    stored = spec.remember("Kai works night shifts at the hospital.", tier="episodic", importance=0.7)
    memory_id = re.search(rf"id=({UUID})", stored).group(1)
    spec.remember("Kai is training for a marathon.", tier="working")
    recalled = spec.recall("night shift job", limit=3)
    assert recalled.startswith("Found") and f"id={memory_id} | episodic" in recalled
    assert "importance 0.70" in recalled
    summary = spec.memory_summary(max_items=3)
    assert "episodic memory: 1 item(s)" in summary and f"id={memory_id}" in summary
    assert "Kai is training for a marathon." in summary
    stats = json.loads(spec.memory_stats())
    assert stats["user_id"] == "kai" and stats["episodic"]["count"] == 1 and stats["working"]["count"] == 1
    assert spec.update_memory(memory_id, importance=0.9).startswith(f"Updated episodic memory id={memory_id}")
    assert memory.episodic.get(memory_id).importance == 0.9

    # Mistakes come back as text the agent can act on, and change nothing.
    assert spec.remember("x", tier="dreams").startswith("Error: tier: must be one of")
    assert spec.remember("   ").startswith("Error: content")
    assert spec.remember("valid", tier="episodic", importance=3).startswith("Error: importance")
    assert spec.recall("tea", limit=0).startswith("Error: limit")
    assert spec.forget("not-an-id").startswith("Error: memory_id: not a UUID")
    assert spec.update_memory(memory_id).startswith("Error: content: give the new content")
    other = make_memory(user_id="eve")
    assert MemoryToolSpec(other).forget(memory_id) == f"No memory with id={memory_id}; nothing was deleted."
    assert memory.episodic.get(memory_id) is not None  # another user's id is simply absent


async def test_async_twins(make_memory) -> None:
    spec = MemoryToolSpec(make_memory(user_id="ana"))
    stored = await spec.aremember("Ana's cat is called Miso.", tier="episodic")
    memory_id = re.search(rf"id=({UUID})", stored).group(1)
    assert f"id={memory_id}" in await spec.arecall("cat's name", tier="episodic")
    assert (await spec.aupdate_memory(memory_id, content="Ana's cat is called Tofu.")).endswith("Tofu.")
    assert "episodic memory: 1 item(s)" in await spec.amemory_summary()
    assert json.loads(await spec.amemory_stats())["episodic"]["count"] == 1
    assert (await spec.aforget(memory_id)).startswith("Forgot episodic memory")


@pytest.fixture
def knowledge_base(persist_dir: Path):
    from llama_index_memory_hierarchy.knowledge import KnowledgeBase

    llm = ScriptedLLM(answer=lambda prompt: "Port 8443 [1].")
    kb = KnowledgeBase.from_defaults(namespace="manuals", persist_dir=str(persist_dir), user_id="ops", llm=llm)
    kb.add_text(
        "# Gateway manual\n\n## Networking\n\nThe gateway service listens on port 8443.\n\n"
        "## Backups\n\nBackups run nightly at 02:00 to the NAS.",
        doc_id="gateway-manual",
        metadata={"file_name": "gateway.md"},
    )
    yield kb, llm
    kb.close()


async def test_rag_tools_search_and_ask_with_citations(knowledge_base) -> None:
    kb, llm = knowledge_base
    spec = RagToolSpec(kb)
    tools = {tool.metadata.name: tool for tool in spec.to_tool_list()}
    assert sorted(tools) == ["ask_documents", "search_documents"]
    assert all("Example:" in t.metadata.description and t.async_fn is not None for t in tools.values())

    found = spec.search_documents("which port does the gateway use", limit=2)
    assert found.startswith("Found") and "Gateway manual > Networking" in found
    assert re.search(rf"chunk id={UUID}", found) and "port 8443" in found
    assert "Gateway manual > Networking" in await spec.asearch_documents("port", limit=1)

    answer = spec.ask_documents("Which port does the gateway listen on?")
    assert answer.startswith("Port 8443 [1].") and "Sources:\n[1] gateway.md › Gateway manual > Networking" in answer
    assert re.search(rf"Chunk ids: {UUID}", answer)
    assert len(llm.prompts_of("mqe")) == 1 and len(llm.prompts_of("hyde")) == 1  # the engine's defaults
    assert (await spec.aask_documents("When do backups run?")).startswith("Port 8443")
    assert spec.search_documents("", limit=2).startswith("Error: query")
