"""``lmh demo``: a scripted two-session agent conversation that shows every part of the hierarchy.

Offline on the embedded default: the bundled multilingual-e5-small embeddings and, when installed, the
bundled SmolLM2-135M as the LLM. Session 1 and session 2 each open their own
``HierarchicalMemory`` over the same folder (as two processes would); the agent in session 2
is asked what session 1 said. Then the demo shows what each tier holds, a fused recall, the
knowledge graph (and its HTML export) and a knowledge-base answer with MQE, HyDE and citations.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.cli._common import (
    CLIError,
    Output,
    llm_label,
    load_config,
    short,
)
from llama_index_memory_hierarchy.cli.demo_script import DEMO_USER, SCRIPTS


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    demo = commands.add_parser(
        "demo",
        parents=parents,
        formatter_class=formatter,
        help="run a two-session agent conversation and show what each tier remembers",
        description="A scripted two-session conversation with a LlamaIndex FunctionAgent (session 2 in a fresh "
        "HierarchicalMemory over the same folder), then what each tier holds, a fused recall, the knowledge "
        "graph with an HTML export, and a knowledge-base answer with MQE, HyDE and citations. Offline: the "
        "bundled embedding model and, when installed, the bundled SmolLM2 model.",
    )
    demo.add_argument("--keep", action="store_true", help="keep the demo folder (a temporary one otherwise)")
    demo.add_argument("--reset", action="store_true", help="erase the demo user's earlier memories in --dir first")
    demo.add_argument(
        "--lang", choices=sorted(SCRIPTS), default="en", help="language of the scripted conversation (zh: Chinese)"
    )
    demo.add_argument("--max-tokens", type=int, default=80, metavar="N", help="local model: most tokens per reply")
    demo.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace, out: Output) -> int:
    if args.max_tokens < 1:
        raise CLIError("--max-tokens must be at least 1", code=2)
    if args.user is None:
        args.user = DEMO_USER
    temporary = args.dir is None and args.config is None
    if temporary:
        args.dir = tempfile.mkdtemp(prefix="lmh-demo-")
    import asyncio

    try:
        return asyncio.run(Demo(args, out, temporary=temporary and not args.keep).run())
    finally:
        if temporary and not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


class Demo:
    """The demo's steps; each records what it showed in ``self.report`` (the ``--json`` output)."""

    def __init__(self, args: argparse.Namespace, out: Output, *, temporary: bool = False) -> None:
        self.args = args
        self._temporary = temporary
        self.out = out
        self.config = load_config(args)
        self.folder = Path(self.config.persist_dir).expanduser().resolve()
        self.script = SCRIPTS[getattr(args, "lang", "en")]
        self.report: dict[str, Any] = {"user_id": self.config.user_id, "folder": str(self.folder), "timings": {}}
        self.llm: Any = None
        self.llm_note = ""
        self.started = time.perf_counter()

    # ------------------------------------------------------------------ output helpers
    def step(self, title: str) -> None:
        self.out.print()
        self.out.print(f"[bold magenta]── {title} ──[/bold magenta]")

    def say(self, who: str, text: str) -> None:
        style = {"you": "bold green", "agent": "bold cyan", "tool": "bold yellow", "note": "dim"}.get(who, "bold")
        from rich.markup import escape

        self.out.print(f"[{style}]{who:>5}[/{style}]  {escape(text)}")

    def timed(self, name: str, since: float) -> None:
        self.report["timings"][name] = round(time.perf_counter() - since, 2)

    # ------------------------------------------------------------------ the run
    async def run(self) -> int:
        from llama_index_memory_hierarchy.version import __version__

        self._check_folder()
        self._choose_llm()
        self.report["llm"] = llm_label(self.llm)
        if not self.out.json_mode:
            from rich.panel import Panel

            lines = [
                f"folder  {self.folder}" + ("  (temporary; --keep to keep it)" if self._temporary else ""),
                f"user    {self.config.user_id}",
                f"LLM     {llm_label(self.llm)}{self.llm_note}",
                "embeds  the bundled multilingual-e5-small (offline)"
                if self.config.embed_model in (None, "default")
                else f"embeds  {self.config.embed_model}",
            ]
            self.out.print(
                Panel("\n".join(lines), title=f"lmh demo · llama-index-memory-hierarchy {__version__}", expand=False)
            )
        await self.session_one()
        await self.session_two()
        self.show_tiers()
        self.show_recall()
        self.show_graph()
        await self.knowledge_base()
        self.finish()
        return 0

    def _check_folder(self) -> None:
        """Refuse to mix the demo into a folder where this user already has memories (unless --reset)."""
        from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

        if self.config.records_on_server or (self.folder / "memory.db").is_file():
            with HierarchicalMemory.from_defaults(config=self.config) as memory:
                counts = sum(
                    t.get_stats().get("count", 0) for t in memory.tiers(["episodic", "semantic", "perceptual"])
                )
                if counts and not self.args.reset:
                    raise CLIError(
                        f"user {self.config.user_id!r} already has {counts} memories in {str(self.folder)!r}; "
                        "pass --reset to erase them and rerun the demo, or another --user or --dir"
                    )
                if counts:
                    for tier in memory.tiers(["episodic", "semantic", "perceptual"]):
                        tier.clear()
                    memory.context.runtime.run(memory.context.aerase_user(self.config.user_id))
                    self.out.note(f"erased {counts} earlier memories of {self.config.user_id!r} (--reset)")

    def _choose_llm(self) -> None:
        from llama_index_memory_hierarchy.cli._common import llm_spec, local_chat_options, resolve_cli_llm
        from llama_index_memory_hierarchy.llms.local import INSTALL_HINT

        self.llm = resolve_cli_llm(self.args, **local_chat_options(self.args.max_tokens))
        if self.llm is None:
            self.llm_note = (
                "\n        (no LLM installed: the agent's replies are placeholders. "
                f"For the offline model: {INSTALL_HINT})"
                if llm_spec(self.args) != "none"
                else "  (--llm none: the agent's replies are placeholders)"
            )
        elif type(self.llm).__name__ == "LocalLLM":
            self.llm_note = "  (offline, tiny: replies are rough; any LlamaIndex LLM can be passed with --llm)"

    def _agent_llm(self) -> Any:
        """The LLM the agent runs: the chosen one, or a placeholder that quotes the memory it was given."""
        if self.llm is not None:
            return self.llm
        return PlaceholderLLM()

    def _memory(self, session: str) -> Any:
        from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

        explicit = self.llm is not None and type(self.llm).__name__ != "LocalLLM"
        return HierarchicalMemory.from_defaults(
            config=self.config, session_id=session, llm=self.llm if explicit else None
        )

    # ------------------------------------------------------------------ session 1
    async def session_one(self) -> None:
        import asyncio

        from llama_index_memory_hierarchy.cli._agent import arun_turn, build_agent, calls_tools
        from llama_index_memory_hierarchy.tools import MemoryToolSpec

        self.step("Session 1: the user introduces themselves")
        started = time.perf_counter()
        memory = self._memory("session-1")
        try:
            with self.out.status("Loading the embedding model"):
                await asyncio.to_thread(memory.context.embeddings.probe)
            self.timed("load_embeddings", started)
            load = getattr(self.llm, "load", None)
            if callable(load):
                loading = time.perf_counter()
                with self.out.status(f"Loading {llm_label(self.llm)}"):
                    await asyncio.to_thread(load)
                self.timed("load_llm", loading)
            tools = MemoryToolSpec(memory)
            llm = self._agent_llm()
            agent = build_agent(llm, system_prompt=self.script.system_prompt, tools=tools.to_tool_list())
            turns = []
            chatting = time.perf_counter()
            tool_calls: list[dict[str, Any]] = []

            def on_tool(name: str, kwargs: dict[str, Any], output: str) -> None:
                tool_calls.append({"tool": name, "args": kwargs, "result": output})
                self.say("tool", f"{name}({_args(kwargs)}) -> {_outcome(output)}")

            for message in self.script.session_1:
                self.say("you", message)
                reply = await arun_turn(agent, message, memory, on_tool=on_tool)
                self.say("agent", reply)
                turns.append({"user": message, "agent": reply})
            self.timed("session_1_turns", chatting)
            if not calls_tools(llm):
                self.out.print(
                    "[dim]A function-calling LLM (e.g. --llm with a hosted model) would now call the memory tools "
                    "itself; this small local model cannot call tools reliably, so the demo makes the calls it "
                    "would make:[/dim]"
                )
                for content, importance in self.script.remember:
                    result = await tools.aremember(content, "semantic", importance)
                    tool_calls.append({"tool": "remember", "args": {"content": content}, "result": result})
                    self.say("tool", f"remember({content!r}) -> {_outcome(result)}")
            perception = await self._perceive(memory)
            consolidation = await self._consolidate(memory)
            self.report["session_1"] = {
                "turns": turns,
                "tool_calls": tool_calls,
                "perception_id": perception,
                "consolidation": consolidation,
            }
        finally:
            memory.close()
        self.out.note("session 1 closed: its HierarchicalMemory released the folder, as a process exiting would")
        self.timed("session_1", started)

    async def _perceive(self, memory: Any) -> str | None:
        """A whiteboard photo of the report pipeline into perceptual memory (a generated PNG)."""
        try:
            image = _whiteboard_png(self.folder / "whiteboard.png")
            perception_id = await memory.perceptual.aadd_perception(
                str(image),
                caption=self.script.caption,
                importance=0.5,
            )
        except Exception as exc:  # pillow or the perceptual tier unavailable: the rest of the demo still runs
            self.out.warn(f"perceptual memory skipped: {exc}")
            return None
        self.say("tool", f"memory.perceptual.add_perception('whiteboard.png', caption=...) -> {perception_id[:8]}…")
        return perception_id

    async def _consolidate(self, memory: Any) -> Any:
        """End of session: the lifecycle manager consolidates the session (working -> episodic -> semantic)."""
        report = await memory.manager.aend_session()
        if report is None:
            return None
        self.say(
            "note",
            f"memory.manager.end_session(): consolidation ({report.method}) distilled {len(report.distilled)} "
            f"events into {len(report.facts)} facts and wrote {len(report.summaries)} session summary",
        )
        return report.model_dump(mode="json")

    # ------------------------------------------------------------------ session 2
    async def session_two(self) -> None:
        from llama_index_memory_hierarchy.cli._agent import arun_turn, build_agent
        from llama_index_memory_hierarchy.tools import MemoryToolSpec

        self.step("Session 2: a fresh HierarchicalMemory over the same folder")
        started = time.perf_counter()
        memory = self._memory("session-2")
        self.memory = memory  # kept open for the next steps; closed in finish()
        tools = MemoryToolSpec(memory).to_tool_list()
        agent = build_agent(self._agent_llm(), system_prompt=self.script.system_prompt, tools=tools)
        self.say("you", self.script.session_2)
        context = await memory.aget(input=self.script.session_2)
        given = next((m.content for m in reversed(context) if m.role.value == "system"), "") or ""
        if given:
            self.out.print("[dim]What HierarchicalMemory.get() adds to the history for the LLM:[/dim]")
            from rich.panel import Panel

            self.out.print(Panel(given, border_style="dim", expand=False))
        reply = await arun_turn(agent, self.script.session_2, memory)
        self.say("agent", reply)
        used = [word for word in self.script.recalled if word.lower() in reply.lower()]
        tiny = self.llm is None or type(self.llm).__name__ == "LocalLLM"
        if used and not tiny:
            self.say("note", f"the answer uses what session 1 said ({', '.join(used)})")
        elif used:
            self.say(
                "note",
                f"the reply mentions {', '.join(used)} from session 1, through the memories above. A 135M model "
                "often just echoes them; a capable LLM (--llm) answers: you are learning Python and want to "
                "automate the weekly Excel sales report",
            )
        else:
            self.say(
                "note",
                "the small local model did not use the memories above; they are in its prompt, and a "
                "capable LLM (--llm) answers from them",
            )
        question = self.script.session_2
        self.report["session_2"] = {"user": question, "memory_context": given, "agent": reply, "recalled": used}
        self.timed("session_2", started)

    # ------------------------------------------------------------------ tiers, recall, graph
    def show_tiers(self) -> None:
        self.step("What each tier holds")
        memory = self.memory
        rows, data = [], {}
        working = memory.working.get_recent(3)
        data["working"] = {"count": memory.working.get_stats().get("count", len(working)), "examples": []}
        data["working"]["examples"] = [i.content for i in working]
        for tier in memory.tiers(["episodic", "semantic", "perceptual"]):
            name = tier.memory_type.value
            stats = tier.get_stats()
            examples = memory.context.runtime.run(tier.aquery(order_by="-importance", limit=3))
            data[name] = {"count": stats.get("count", 0), "examples": [i.content for i in examples]}
            if name == "semantic":
                data[name]["facts"] = stats.get("facts")
                data[name]["entities"] = stats.get("entities")
        where = {
            "working": "this process (session 2)",
            "episodic": "records + vectors + keyword index",
            "semantic": "records + vectors + property graph",
            "perceptual": "records + vectors + files",
        }
        for name in ("working", "episodic", "semantic", "perceptual"):
            count = str(data[name]["count"])
            if name == "semantic" and data[name].get("facts") is not None:
                count += f"\n({data[name]['facts']} facts)"
            rows.append([name, count, where[name], "\n".join(f"• {short(e, 90)}" for e in data[name]["examples"])])
        self.out.print(self.out.table(None, ["tier", "items", "kept in", "examples (most important first)"], rows))
        self.report["tiers"] = data

    def show_recall(self) -> None:
        self.step("Fused recall across tiers")
        retriever = self.memory.as_retriever(similarity_top_k=6)
        nodes = retriever.retrieve(self.script.recall_query)
        rows = [
            [
                str(rank),
                n.node.metadata.get("memory_type", ""),
                f"{n.score or 0.0:.4f}",
                short(n.node.get_content(), 110),
            ]
            for rank, n in enumerate(nodes, start=1)
        ]
        query = self.script.recall_query
        self.out.print(f"memory.as_retriever().retrieve({query!r}) - dense + keyword per tier, fused by rank:")
        self.out.print(self.out.table(None, ["#", "tier", "score", "memory"], rows))
        self.report["recall"] = {
            "query": self.script.recall_query,
            "results": [
                {"tier": n.node.metadata.get("memory_type"), "score": n.score, "content": n.node.get_content()}
                for n in nodes
            ],
        }

    def show_graph(self) -> None:
        self.step("Knowledge graph (semantic memory)")
        semantic = self.memory.semantic
        graph = json.loads(semantic.export_knowledge_graph("json"))
        names = {n["id"]: n["label"] for n in graph["nodes"]}
        facts = [(names.get(e["source"], "?"), e["label"], names.get(e["target"], "?")) for e in graph["edges"]]
        self.out.print(
            self.out.table(
                f"{len(names)} entities, {len(facts)} facts",
                ["subject", "relation", "object"],
                [list(f) for f in facts],
            )
        )
        related = semantic.get_related_entities(self.script.entity, depth=2)
        if related:
            self.out.print(f"semantic.get_related_entities({self.script.entity!r}, depth=2):")
            for entity in related:
                self.out.print(f"  hop {entity.hop}: {entity.path}")
        html: Path | None = None
        if self._temporary:  # the folder is removed when the demo ends: no path to a file about to go
            self.out.print("[dim]An interactive HTML view of the graph is written when the folder is kept.[/dim]")
        else:
            html = self.folder / "knowledge_graph.html"
            semantic.export_knowledge_graph("html", path=html)
            self.out.print(f"interactive view: [link=file://{html}]{html}[/link]  (open it in a browser)")
        self.report["graph"] = {
            "entities": len(names),
            "facts": [list(f) for f in facts],
            "related": [r.path for r in related],
            "html": str(html) if html is not None else None,
        }

    # ------------------------------------------------------------------ knowledge base
    async def knowledge_base(self) -> None:
        from llama_index_memory_hierarchy.cli.knowledge import answer_data, show_answer
        from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase

        self.step("Knowledge base: documents, answered with MQE, HyDE and citations")
        started = time.perf_counter()
        docs = self.folder / "docs"
        docs.mkdir(parents=True, exist_ok=True)
        for name, text in self.script.documents.items():
            (docs / name).write_text(text, encoding="utf-8")
        kb = KnowledgeBase.from_defaults(
            namespace="demo-docs",
            user_id=self.config.user_id,
            context=self.memory.context,
            llm=self.llm,
            show_progress=self.out.interactive and not self.out.json_mode,
        )
        try:
            report = await kb.aadd_documents(docs)
            self.out.print(f"ingested {docs}: {report.summary()}")
            self.say("you", self.script.kb_question)
            if self.llm is None:
                nodes = await kb.as_retriever(similarity_top_k=3).aretrieve(self.script.kb_question)
                self.out.print(
                    "[dim]No LLM: MQE, HyDE and the answer need one. The passages a query engine would cite:[/dim]"
                )
                from llama_index_memory_hierarchy.knowledge.retriever import citation, node_text

                rows = [[str(i), citation(n), short(node_text(n), 140)] for i, n in enumerate(nodes, start=1)]
                self.out.print(self.out.table(None, ["#", "source", "passage"], rows))
                self.report["knowledge_base"] = {"ingest": report.model_dump(mode="json"), "passages": len(nodes)}
            else:
                engine = kb.as_query_engine(mqe_queries=2, hyde=True, similarity_top_k=5)
                with self.out.status("Expanding the query (MQE, HyDE), searching and answering"):
                    response = await engine.aquery(self.script.kb_question)
                if not self.out.json_mode:
                    show_answer(self.out, self.script.kb_question, response, self.llm, mqe_requested=2)
                    if type(self.llm).__name__ == "LocalLLM":
                        self.out.print(
                            "[dim]A 135M model writes rough expansions and answers: the search still fuses the "
                            "original query's dense and keyword lists with them, and a capable LLM writes real "
                            "rephrasings and a cited answer ([1], [2]).[/dim]"
                        )
                self.report["knowledge_base"] = {
                    "ingest": report.model_dump(mode="json"),
                    **answer_data(self.script.kb_question, response, self.llm),
                }
        finally:
            kb.close()
        self.timed("knowledge_base", started)

    # ------------------------------------------------------------------ end
    def finish(self) -> None:
        self.memory.close()
        total = round(time.perf_counter() - self.started, 1)
        self.report["timings"]["total"] = total
        if self.out.json_mode:
            self.out.json(self.report)
            return
        self.step("Done")
        timings = ", ".join(f"{k} {v}s" for k, v in self.report["timings"].items() if k != "total")
        self.out.print(f"finished in {total} s ({timings})")
        if self.llm is None or type(self.llm).__name__ == "LocalLLM":
            self.out.print(
                "[dim]With a capable LLM the agent calls remember/recall itself, session 2 answers from the "
                "memories, and answers cite their sources reliably: pass any LlamaIndex LLM with "
                "--llm module:attribute (or llm= in Python).[/dim]"
            )
        if self._temporary:
            self.out.print(
                "[dim]The demo folder was temporary. Keep one to explore it: lmh demo --dir ./demo_data[/dim]"
            )
        else:
            where = f"--dir {self.folder}" if self.args.config is None else f"--config {self.args.config}"
            user = f"--user {self.config.user_id}"
            self.out.print("Explore what was stored:")
            for command in (
                f"lmh search 'Excel report' {user} {where}",
                f"lmh timeline {user} {where}",
                f"lmh graph --entity '{self.script.entity}' {user} {where}",
                f"lmh ask 'When is the sales report due?' --namespace demo-docs {user} {where}",
                f"lmh chat {user} {where}",
            ):
                self.out.print(f"  {command}")


def _outcome(result: str) -> str:
    """A tool result in a few words: 'semantic 1a2b3c4d…' for a new memory, else its first words."""
    import re

    found = re.search(r"in (\w+) memory with id=([0-9a-f]{8})", result)
    return f"stored in {found.group(1)} memory ({found.group(2)}…)" if found else short(result, 100)


def _args(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={short(repr(v), 60)}" for k, v in kwargs.items())


def _whiteboard_png(path: Path) -> Path:
    """Draw a small whiteboard sketch (three boxes and arrows) as a PNG."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (360, 120), "white")
    draw = ImageDraw.Draw(image)
    for x, label in ((10, "Excel"), (135, "Python"), (260, "Report")):
        draw.rectangle((x, 35, x + 90, 85), outline="navy", width=3)
        draw.text((x + 22, 52), label, fill="black")
    for x in (100, 225):
        draw.line((x, 60, x + 35, 60), fill="darkred", width=3)
        draw.polygon([(x + 35, 54), (x + 35, 66), (x + 42, 60)], fill="darkred")
    image.save(path)
    return path


def PlaceholderLLM() -> Any:
    """A stand-in chat LLM for machines without any LLM: it quotes the first memory it was given."""
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        LLMMetadata,
    )
    from llama_index.core.llms import CustomLLM

    class _Placeholder(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="placeholder (no LLM installed)", is_chat_model=True)

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return CompletionResponse(text=self._reply(prompt))

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            def gen() -> Any:
                text = self._reply(prompt)
                yield CompletionResponse(text=text, delta=text)

            return gen()

        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            prompt = "\n".join(m.content or "" for m in messages)
            return ChatResponse(message=ChatMessage(role="assistant", content=self._reply(prompt)))

        @staticmethod
        def _reply(prompt: str) -> str:
            memories = [line[2:] for line in prompt.splitlines() if line.startswith("- [")]
            if memories:
                return f"(placeholder reply, no LLM) I remember: {memories[0].split('] ', 1)[-1]}"
            return "(placeholder reply, no LLM) Noted."

    return _Placeholder()
