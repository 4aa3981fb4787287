"""``lmh mcp`` over stdio answers every line (issue 36, item 7): a line the SDK's transport cannot read (a lone
``\\ud800`` escape, nesting 50,000 deep, no JSON at all) gets a JSON-RPC error under its own id, and the server
reads on. Driven with raw JSON lines, as a broken or hostile client writes them."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

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
    command = lmh_command("mcp", "--dir", str(folder), "--user", "alice", "--llm", "none")
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


def _tool_arguments(client: RawClient) -> list[tuple[str, str]]:
    tools = client.call(2, "tools/list", {})["result"]["tools"]
    return sorted((tool["name"], arg) for tool in tools for arg in tool["inputSchema"].get("properties", {}))


def _fuzz(client: RawClient, name: str, argument: str, value: Any, request_id: int) -> None:
    """One call with a hostile argument: a result (a tool error names the argument) or a JSON-RPC error, at once."""
    base = {"remember": {"content": "a note"}, "recall": {"query": "note"}, "update_memory": {}, "forget": {}}
    arguments = {**base.get(name, {}), argument: value}
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments}})  # fmt: skip
    client.send(line)
    answer = client.reply()
    assert answer.get("id") in (request_id, None), answer
    if "error" in answer:
        return  # the line itself was unreadable (a lone surrogate): answered, not dropped
    result = answer["result"]
    text = " ".join(block.get("text", "") for block in result["content"])
    assert not {chr(c) for c in (0x1B, 0x07)} & set(text) or not result["isError"], (name, argument, text[:200])
    assert len(text) < 5000 or not result["isError"], (name, argument, "an error echoes a huge value")
    if result["isError"] and "Unknown tool" not in text:
        assert argument in text or "arguments" in text or ":" in text, (name, argument, text[:300])


def test_fuzz_every_tool_argument(client: RawClient) -> None:
    for n, (name, argument) in enumerate(_tool_arguments(client)):
        for k in range(3):
            _fuzz(client, name, argument, HOSTILE[(n + k) % len(HOSTILE)], 1000 + 10 * n + k)
    assert client.call(9, "tools/call", {"name": "memory_stats", "arguments": {}})["result"]["isError"] is False


@pytest.mark.slow
def test_fuzz_every_tool_argument_long(client: RawClient) -> None:
    for n, (name, argument) in enumerate(_tool_arguments(client)):
        for k, value in enumerate(HOSTILE):
            _fuzz(client, name, argument, value, 100_000 + 100 * n + k)
        head = {"jsonrpc": "2.0", "id": 100_099 + 100 * n, "method": "tools/call"}
        params = f'{{"name":{json.dumps(name)},"arguments":{{{json.dumps(argument)}:{_deep(50_000)}}}}}'
        client.send(json.dumps(head)[:-1] + f',"params":{params}}}')
        answer = client.reply()  # nesting past the parser's limit: a parse error under the request's id
        assert answer["id"] == 100_099 + 100 * n and answer["error"]["code"] == PARSE_ERROR, answer
