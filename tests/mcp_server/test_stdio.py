"""``lmh mcp`` over stdio answers every line (issue 36, item 7): a line the SDK's transport cannot read (a lone
``\\ud800`` escape, nesting 50,000 deep, no JSON at all) gets a JSON-RPC error under its own id, and the server
reads on. Driven with raw JSON lines, as a broken or hostile client writes them."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

from mcp_helpers import START_TIMEOUT, lmh_command, server_env

from llama_index_memory_hierarchy.mcp_server.stdio import PARSE_ERROR, request_id_of

#: Once started, a server answers a line in well under this (seconds); a dropped line would wait for ever.
REPLY_TIMEOUT = 60.0


class RawClient:
    """JSON-RPC lines to and from one ``lmh mcp`` process."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = REPLY_TIMEOUT) -> dict[str, Any]:
        return json.loads(self.lines.get(timeout=timeout))

    def call(self, request_id: int, method: str, params: dict[str, Any], timeout: float = REPLY_TIMEOUT) -> Any:
        self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        answer = self.reply(timeout)
        assert answer["id"] == request_id, answer
        return answer


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawClient]:
    folder = tmp_path_factory.mktemp("stdio") / "memory"
    documents = folder.parent / "documents"  # the document tools read inside it (the fuzz's paths too)
    documents.mkdir()
    (documents / "manual.txt").write_text("To reset the kettle, hold its switch for five seconds.\n", "utf-8")
    command = lmh_command(
        "mcp", "--dir", str(folder), "--user", "alice", "--llm", "none", "--document-root", str(documents)
    )
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        env=server_env(),
    )
    client = RawClient(process)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    assert "result" in client.call(1, "initialize", init, timeout=START_TIMEOUT)
    client.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield client
    assert process.stdin is not None
    process.stdin.close()  # end of input: the server closes its stores and exits
    try:
        process.wait(timeout=START_TIMEOUT)
    finally:
        process.kill()


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


UNREADABLE = [
    ("lone surrogate", '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"recall","arguments":'
     '{"query":"a \\ud800 b"}}}'),
    ("50,000 deep", '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"remember","arguments":'
     '{"content":"x","deep":' + _deep(50_000) + "}}}"),
    ("deep with the id last", '{"jsonrpc":"2.0","method":"tools/call","params":' + _deep(50_000) + ',"id":%d}'),
    ("not a message", '{"jsonrpc":"2.0","id":%d,"method":17}'),
]  # fmt: skip


@pytest.mark.parametrize(("name", "template"), UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_an_unreadable_line_gets_an_error_reply_and_the_server_reads_on(
    client: RawClient, name: str, template: str
) -> None:
    request_id = 100 + [u[0] for u in UNREADABLE].index(name)
    client.send(template % request_id)
    answer = client.reply()
    assert "error" in answer and answer["error"]["code"] in (PARSE_ERROR, -32600), answer
    # the id is recovered where the line lets it be read: not past 50,000 brackets, nor from a message the SDK
    # parsed and then refused (its error holds the bad member, not the line)
    assert answer["id"] == (None if name in ("deep with the id last", "not a message") else request_id), answer
    stats = client.call(request_id + 1000, "tools/call", {"name": "memory_stats", "arguments": {}})
    assert stats["result"]["isError"] is False


def test_no_json_at_all_gets_a_parse_error_with_a_null_id(client: RawClient) -> None:
    client.send("this is not json {")
    answer = client.reply()
    assert answer["id"] is None and answer["error"]["code"] == PARSE_ERROR


@pytest.mark.parametrize("age", ["99999999999d", "9" * 400 + "d", "9999-12-31T23:59:59.999999"])
@pytest.mark.parametrize("field", ["since", "until"])
def test_a_huge_age_in_timeline_is_a_tool_error_naming_the_field(client: RawClient, age: str, field: str) -> None:
    answer = client.call(7, "tools/call", {"name": "timeline", "arguments": {field: age}})
    result = answer["result"]
    assert result["isError"] is True and f" {field}: " in result["content"][0]["text"], result
    assert len(result["content"][0]["text"]) < 300  # a 400-digit age is not echoed whole


def test_the_id_of_a_line_is_read_only_when_it_is_plain() -> None:
    assert request_id_of('{"id": 5, "method": "x"}') == 5
    assert request_id_of('{"method": "x", "id": "abc", "params": ' + _deep(5000) + "}") == "abc"
    assert request_id_of('{"params": {"id": 3}, ' + _deep(5000)) is None  # an id nested in params is not the id
    assert request_id_of('{"id": true}') is None and request_id_of('{"id": "\\ud800"}') is None
    assert request_id_of("[1, 2]") is None and request_id_of("") is None


# ------------------------------------------------------------------ fuzz: every argument of every tool
HOSTILE: list[Any] = [
    "9" * 400 + "d",
    "99999999999d",
    "9999-12-31T23:59:59.999999",
    -1,
    10**400,
    1e308,
    "",
    "\x1b]0;owned\x07\x1b[2J",
    "x" * 100_001,
    "a\ud800b",
    {"k": [[[[[[[[[[1]]]]]]]]]]},
    [[[]]],
    "../../etc/passwd",
    None,
    True,
]
#: A good value for every required argument, so that a call fails for the fuzzed argument only (a new tool's new
#: required argument needs one here: the fuzz says so). The ids are well formed and belong to nothing.
NOBODY = "00000000-0000-4000-8000-000000000000"
GOOD: dict[str, Any] = {
    "content": "A note about the lake",
    "query": "lake",
    "entity": "Mia",
    "question": "What does the manual say?",
    "path": "manual.txt",
    "paths": ["manual.txt"],
    "instruction": "Answer in one sentence",
    "memory_id": NOBODY,
    "memory_ids": [NOBODY],
    "instruction_id": NOBODY,
    "confirm": "nobody",
}
#: Refusals about the server, not about any argument.
NOT_ABOUT_AN_ARGUMENT = ("runs without an LLM",)
CONTROLS = {chr(c) for c in [*range(0x20), 0x7F, 0x9B]} - {"\n", "\t"}


def _tools(client: RawClient) -> dict[str, dict[str, Any]]:
    """Every tool the server lists, by name, with its input schema."""
    return {tool["name"]: tool["inputSchema"] for tool in client.call(2, "tools/list", {})["result"]["tools"]}


def _tool_arguments(client: RawClient) -> list[tuple[str, str]]:
    tools = _tools(client)
    return sorted((name, arg) for name, schema in tools.items() for arg in schema.get("properties", {}))


def _fuzz(
    client: RawClient, tools: dict[str, dict[str, Any]], name: str, argument: str, value: Any, request_id: int
) -> None:
    """One call with a hostile argument (the others good): answered at once, by a result, a tool error naming an
    argument of the tool, or a JSON-RPC error; never a raw control character, never a huge value echoed whole."""
    required = [arg for arg in tools[name].get("required", []) if arg != argument]
    assert set(required) <= set(GOOD), f"{name}: give GOOD a value for {set(required) - set(GOOD)}"
    arguments = {**{arg: GOOD[arg] for arg in required}, argument: value}
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments}})  # fmt: skip
    client.send(line)
    answer = client.reply()
    shown = (name, argument, repr(value)[:40])
    assert answer.get("id") in (request_id, None), (*shown, answer)
    if "error" in answer:  # the line itself was unreadable (a lone surrogate): answered, not dropped
        assert answer["id"] == request_id and answer["error"]["code"] in (PARSE_ERROR, -32600), (*shown, answer)
        return
    result = answer["result"]
    text = " ".join(block.get("text", "") for block in result["content"])
    if not result["isError"]:
        return
    assert not CONTROLS & set(text), (*shown, text[:200])
    assert len(text) < 2000, (*shown, "an error echoes a huge value", len(text))
    if not any(reason in text for reason in NOT_ABOUT_AN_ARGUMENT):
        fields = set(arguments) | set(tools[name].get("properties", {}))  # e.g. update_memory wants content
        named = [arg for arg in fields if re.search(rf"\b{re.escape(arg)}\b", text)]
        assert named, (*shown, "the error names no argument", text[:300])


FOUND_BY_THE_FUZZ = [
    ("add_document", {"path": "9" * 400}, "path: File name too long"),  # was "Error executing tool add_document"
    ("ingest_documents", {"paths": ["manual.txt", "a/" * 3000]}, "paths: File name too long"),
    ("related_entities", {"entity": ""}, "entity: must not be empty"),  # named the tier's parameter, 'name'
    ("add_instruction", {"instruction": "Answer briefly", "condition": "x" * 100_001}, "condition: longer than"),
]


@pytest.mark.parametrize(("name", "arguments", "expected"), FOUND_BY_THE_FUZZ, ids=[f[0] for f in FOUND_BY_THE_FUZZ])
def test_what_the_fuzz_found_is_a_tool_error_naming_the_argument(
    client: RawClient, name: str, arguments: dict[str, Any], expected: str
) -> None:
    result = client.call(8, "tools/call", {"name": name, "arguments": arguments})["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True and expected in text and len(text) < 2000, text[:300]


def test_fuzz_every_tool_argument(client: RawClient) -> None:
    """Every argument of every listed tool (a new tool or argument is covered by being listed): 3 hostile values."""
    tools = _tools(client)
    arguments = _tool_arguments(client)
    assert {name for name, _ in arguments} == set(tools)  # every tool takes an argument (user_id at least)
    for n, (name, argument) in enumerate(arguments):
        for k in range(3):
            _fuzz(client, tools, name, argument, HOSTILE[(n + k) % len(HOSTILE)], 1000 + 10 * n + k)
    assert client.call(9, "tools/call", {"name": "memory_stats", "arguments": {}})["result"]["isError"] is False


@pytest.mark.slow
def test_fuzz_every_tool_argument_long(client: RawClient) -> None:
    tools = _tools(client)
    for n, (name, argument) in enumerate(_tool_arguments(client)):
        for k, value in enumerate(HOSTILE):
            _fuzz(client, tools, name, argument, value, 100_000 + 100 * n + k)
        head = {"jsonrpc": "2.0", "id": 100_099 + 100 * n, "method": "tools/call"}
        params = f'{{"name":{json.dumps(name)},"arguments":{{{json.dumps(argument)}:{_deep(50_000)}}}}}'
        client.send(json.dumps(head)[:-1] + f',"params":{params}}}')
        answer = client.reply()  # nesting past the parser's limit: a parse error under the request's id
        assert answer["id"] == 100_099 + 100 * n and answer["error"]["code"] == PARSE_ERROR, answer


# ------------------------------------------------------------------ drawn lines: stdio always answers
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**40), 10**40) | st.floats(allow_nan=False)
    | st.text(st.characters(exclude_categories=()), max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)  # fmt: skip
#: Line breaks split a line in two (the transport reads universal newlines); a blank line is no message.
GARBAGE = st.text(st.characters(exclude_categories=(), exclude_characters="\r\n"), min_size=1, max_size=300).filter(
    lambda line: line.strip() and not _is_notification(line)
)
_NEXT_ID = iter(range(500_000, 10**9))


def _is_notification(line: str) -> bool:
    """A readable JSON-RPC message without an id: no answer is due (JSON-RPC 2.0)."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "method" in data and "id" not in data


@st.composite
def _lines(draw: st.DrawFn, tools: dict[str, dict[str, Any]]) -> tuple[str, int | None]:
    """A line a broken or hostile client may write, and the id its answer must carry (None: a parse error's)."""
    kind = draw(st.sampled_from(["tool", "method", "garbage", "truncated"]))
    request_id = next(_NEXT_ID)
    if kind == "garbage":
        return draw(GARBAGE), None
    if kind == "tool":
        name = draw(st.sampled_from(sorted(tools)))
        names = [*sorted(tools[name].get("properties", {})), "extra"]
        arguments = draw(st.dictionaries(st.sampled_from(names), JSON_VALUES, max_size=4))
        params: Any = {"name": name, "arguments": arguments}
        method = "tools/call"
    else:
        method = draw(st.sampled_from(["tools/call", "tools/list", "resources/read", "prompts/get", "ping", "x/y"]))
        params = draw(JSON_VALUES)
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    if kind == "truncated":
        line = line[: draw(st.integers(1, max(1, len(line) - 1)))]
        return line, request_id_of(line)  # a parse error carries the id when the cut left it readable
    return line, request_id


@pytest.mark.slow
def test_every_drawn_line_is_answered(client: RawClient) -> None:
    """500 drawn lines (tool calls with drawn arguments, other methods with drawn params, text of any character,
    truncated messages): each gets exactly one answer under its id (or null) and the server reads on."""
    tools = _tools(client)

    @settings(max_examples=500, deadline=None, database=None)
    @given(drawn=_lines(tools))
    def answered(drawn: tuple[str, int | None]) -> None:
        line, request_id = drawn
        client.send(line)
        answer = client.reply()
        assert answer.get("id") in (request_id, None), (line[:200], answer)
        assert ("result" in answer) != ("error" in answer), answer

    answered()
    assert client.call(9, "tools/call", {"name": "memory_stats", "arguments": {}})["result"]["isError"] is False
