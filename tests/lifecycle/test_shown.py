"""What get() showed earlier in a session holds for every memory object on it: another object, another process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from llama_index.core.llms import ChatMessage, MessageRole

PAST = [
    "I start the new job at the Harbourside boatyard on Monday, it is seventy kilometres from our flat.",
    "We adopted a puppy called Pepper.",
    "I repainted the hallway a deep blue.",
]
FIRST = "two hours behind the wheel again today, I'm wiped out"
LATER = "and tomorrow it will be the same drive all over again"


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def shown(messages: list[ChatMessage]) -> str:
    return "\n".join(str(m.content) for m in messages if m.role == MessageRole.SYSTEM)


def remember(make_memory) -> None:
    for n, text in enumerate(PAST):
        make_memory(session_id=f"past-{n}").put(user(text))


def test_a_second_object_on_the_session_does_not_repeat_what_the_first_showed(make_memory) -> None:
    remember(make_memory)
    first = make_memory(session_id="now")
    first.put_messages([user("the motorway was a car park this morning"), user(FIRST)])
    assert PAST[0] in shown(first.get(input=FIRST))
    second = make_memory(session_id="now")  # a web service's next request, say
    second.put(user(LATER))
    assert PAST[0] not in shown(second.get(input=LATER))
    assert PAST[0] in shown(second.get(input="where was that job with the long drive?"))  # asked: shown again
    second.reset()  # a new conversation: nothing was shown in it yet
    third = make_memory(session_id="now")
    third.put(user(LATER))
    assert PAST[0] in shown(third.get(input=LATER))


def test_another_process_on_the_session_does_not_repeat_what_this_one_showed(make_memory, persist_dir: Path) -> None:
    remember(make_memory)
    memory = make_memory(session_id="now")
    memory.put_messages([user("the motorway was a car park this morning"), user(FIRST)])
    assert PAST[0] in shown(memory.get(input=FIRST))
    memory.runtime.run(memory.context.accesses.aflush())  # the access log is written in the background
    script = textwrap.dedent(
        f"""
        from llama_index.core.llms import ChatMessage
        from llama_index_memory_hierarchy import HierarchicalMemory
        m = HierarchicalMemory.from_defaults(user_id="alice", session_id="now", persist_dir={str(persist_dir)!r})
        m.put(ChatMessage(role="user", content={LATER!r}))
        text = "\\n".join(str(x.content) for x in m.get(input={LATER!r}) if x.role.value == "system")
        assert {PAST[0]!r} not in text, text
        m.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
