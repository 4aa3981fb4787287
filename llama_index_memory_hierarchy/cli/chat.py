"""``lmh chat``: talk to an agent whose memory persists across sessions and processes."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import Any

from llama_index_memory_hierarchy.cli._common import (
    CLIError,
    Output,
    llm_label,
    llm_spec,
    load_embeddings,
    local_chat_options,
    open_memory,
    resolve_cli_llm,
    short,
)

SYSTEM_PROMPT = (
    "You are a helpful assistant with long-term memory of this user. "
    "Use what you remember about them when it helps, and answer briefly."
)
TOOL_PROMPT = (
    " Use the memory tools: remember lasting facts the user tells you, recall before answering "
    "questions about earlier conversations, and forget what the user asks you to forget."
)

HELP = """\
commands:  /recall QUERY    search memory       /remember TEXT  store a fact (semantic memory)
           /stats           counts per tier     /forget ID      delete a memory
           /context         what the memory gives the LLM now   /help   /exit (or Ctrl-D)"""


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    chat = commands.add_parser(
        "chat",
        parents=parents,
        formatter_class=formatter,
        help="chat with an agent that remembers (one line per turn; reads stdin when piped)",
        description="An interactive chat with a LlamaIndex FunctionAgent over the user's HierarchicalMemory: "
        "every turn is stored, and what earlier sessions said reaches the LLM. A function-calling LLM (--llm) "
        "also gets the memory tools; the bundled local model chats without tools. Type /help for commands.",
    )
    chat.add_argument("--session", metavar="ID", help="session to continue (default: a new one)")
    chat.add_argument("--system", metavar="TEXT", help="system prompt of the agent")
    chat.add_argument("--max-tokens", type=int, default=160, metavar="N", help="local model: most tokens per reply")
    chat.set_defaults(handler=run_chat)


def run_chat(args: argparse.Namespace, out: Output) -> int:
    if args.max_tokens < 1:
        raise CLIError("--max-tokens must be at least 1", code=2)
    llm = resolve_cli_llm(args, required_for="lmh chat", **local_chat_options(args.max_tokens))
    session = args.session or f"chat-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    import asyncio

    return asyncio.run(_achat(args, out, llm, session))


async def _achat(args: argparse.Namespace, out: Output, llm: Any, session: str) -> int:
    import asyncio

    from llama_index_memory_hierarchy.cli._agent import arun_turn, build_agent, calls_tools
    from llama_index_memory_hierarchy.tools import MemoryToolSpec

    explicit = llm_spec(args) not in ("auto", "local", "none")  # a chosen LLM also extracts facts
    transcript: list[dict[str, Any]] = []
    with open_memory(args, out, session=session, must_exist=False, llm=llm if explicit else None) as memory:
        load_embeddings(memory, out)
        tools = MemoryToolSpec(memory)
        uses_tools = calls_tools(llm)
        system = (args.system or SYSTEM_PROMPT) + (TOOL_PROMPT if uses_tools else "")
        agent = build_agent(llm, system_prompt=system, tools=tools.to_tool_list())
        load = getattr(llm, "load", None)
        if callable(load):
            with out.status(f"Loading {llm_label(llm)}"):
                await asyncio.to_thread(load)
        interactive = sys.stdin.isatty() and not out.json_mode
        if not out.json_mode:
            mode = "with memory tools" if uses_tools else "chat only: memory reaches it through the context"
            out.note(f"user {memory.user_id}, session {session}; LLM {llm_label(llm)} ({mode}).")
            if interactive:
                out.note(HELP)
        while True:
            line = await asyncio.to_thread(_read_line, "you> " if interactive else "")
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if text.split()[0] in ("/exit", "/quit"):
                    break
                result = await _command(text, memory, tools, out)
                transcript.append({"command": text, "result": result})
                continue
            if not out.json_mode and not interactive:
                out.print(f"[bold]you>[/bold] {short(text, 500)}")
            reply = await _turn(agent, text, memory, out, arun_turn)
            transcript.append({"user": text, "assistant": reply})
    if out.json_mode:
        out.json({"user_id": memory.user_id, "session_id": session, "llm": llm_label(llm), "turns": transcript})
    return 0


def _read_line(prompt: str) -> str | None:
    try:
        return input(prompt) if prompt else sys.stdin.readline() or None
    except EOFError:
        return None


async def _turn(agent: Any, text: str, memory: Any, out: Output, arun_turn: Any) -> str:
    streamed: list[str] = []

    def on_delta(delta: str) -> None:
        if out.json_mode:
            return
        if not streamed:
            out.console.print("[bold cyan]agent>[/bold cyan] ", end="")
        streamed.append(delta)
        out.console.print(delta, end="", markup=False, highlight=False)

    def on_tool(name: str, kwargs: dict[str, Any], output: str) -> None:
        out.note(f"[tool] {name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) -> {short(output, 160)}")

    reply = await arun_turn(agent, text, memory, on_delta=on_delta, on_tool=on_tool)
    if not out.json_mode:
        if streamed:
            out.console.print()
        else:
            out.print(f"[bold cyan]agent>[/bold cyan] {reply}", markup=True)
    return reply


async def _command(text: str, memory: Any, tools: Any, out: Output) -> str:
    name, _, rest = text.partition(" ")
    rest = rest.strip()
    if name == "/help":
        result = HELP
    elif name == "/recall" and rest:
        result = await tools.arecall(rest, "all", 5)
    elif name == "/remember" and rest:
        result = await tools.aremember(rest, "semantic", 0.7)
    elif name == "/forget" and rest:
        result = await tools.aforget(rest)
    elif name == "/stats":
        result = await tools.amemory_stats()
    elif name == "/context":
        messages = await memory.aget()
        system = [m.content for m in messages if m.role.value == "system"]  # the memory message, after the user's
        result = system[-1] if system else "(no memories retrieved)"
    else:
        result = f"unknown or incomplete command {text!r}; /help lists them"
    if not out.json_mode:
        out.print(result, markup=False)
    return result
