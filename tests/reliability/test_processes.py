"""One embedded folder, many processes at once (issue 30): an app writing, two ``lmh mcp`` stdio servers
started by the MCP SDK's client, ``lmh add`` and ``lmh ui``; every acknowledged write of every process is
in the timeline afterwards, and each sees the others' writes and deletes while running. SIGKILLs of a
writer and of an erasure, then every process reopens the folder and the erasure is complete."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp_server"))
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import free_port, ids, lmh_command, ok, server_env

from llama_index_memory_hierarchy import HierarchicalMemory

#: Every process of a folder embeds with the same model: the light hashing one, to keep the tests fast.
ENV = {**server_env(), "LMH_EMBED_MODEL": "hashing", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}

APP = textwrap.dedent(
    """
    import sys, time
    from llama_index_memory_hierarchy import HierarchicalMemory
    folder, marker = sys.argv[1], sys.argv[2]
    memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="app", persist_dir=folder,
                                              embed_model="hashing")
    print("READY", flush=True)
    seen = None
    for i in range(2000):
        print("ACK", memory.episodic.add(f"app note {i} about the greenhouse"), flush=True)
        if seen is None and [m for m in memory.search(marker, limit=3) if marker in m.content]:
            seen = i
            print("SEEN", flush=True)
        if seen is not None and i >= seen + 5:
            break
        time.sleep(0.05)
    memory.close()
    print("DONE", flush=True)
    """
)

WRITER = textwrap.dedent(
    """
    import sys
    from llama_index_memory_hierarchy import HierarchicalMemory
    memory = HierarchicalMemory.from_defaults(user_id=sys.argv[2], session_id="w", persist_dir=sys.argv[1],
                                              embed_model="hashing")
    for i in range(100000):
        print("ACK", memory.episodic.add(f"{sys.argv[2]} writes note {i} about lanterns"), flush=True)
    """
)


@contextlib.asynccontextmanager
async def stdio_session(folder: Path, user: str) -> AsyncIterator[ClientSession]:
    """A client session with a fresh ``lmh mcp`` stdio process on ``folder`` (the folder's embedding model)."""
    command = lmh_command("mcp", "--user", user, "--dir", str(folder), "--llm", "none")
    params = StdioServerParameters(command=command[0], args=command[1:], env=ENV)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _open(folder: Path, user: str = "alice") -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id=user, session_id="check", persist_dir=str(folder), embed_model="hashing"
    )


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=ENV
    )


def _wait_for(line: str, process: subprocess.Popen[str], acked: list[str]) -> None:
    """Read the child's lines until ``line``, collecting acknowledged ids."""
    assert process.stdout is not None
    for got in process.stdout:
        if got.startswith("ACK "):
            acked.append(got.split()[1])
        elif got.strip() == line:
            return
    raise AssertionError(f"the child ended (code {process.wait()}) before printing {line!r}")


def _complete(process: subprocess.Popen[str]) -> list[str]:
    """The ids of the whole ``ACK`` lines a killed child printed (a line cut by the kill acknowledged nothing)."""
    assert process.stdout is not None
    return [line.split()[1] for line in process.stdout if line.endswith("\n") and len(line.split()[-1]) == 36]


def _start_ui(folder: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with log.open("wb") as output:
        process = subprocess.Popen(
            lmh_command("ui", "--user", "alice", "--dir", str(folder), "--port", str(port)),
            stdout=output,
            stderr=subprocess.STDOUT,
            env=ENV,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
                if response.read() == b"ok":
                    return process, base
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"lmh ui did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)


async def test_app_mcp_servers_cli_and_inspector_share_one_folder(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    marker = "quokka-marker-3141"
    app = _python(APP, str(folder), marker)
    acked: list[str] = []
    ui = None
    try:
        _wait_for("READY", app, acked)
        ui, _ = _start_ui(folder, tmp_path / "ui.log")
        async with stdio_session(folder, "alice") as one, stdio_session(folder, "alice") as two:
            written = ids(ok(await one.call_tool("remember", {"content": f"Alice keeps a {marker} in the shed"})))
            added = subprocess.run(
                lmh_command("add", "Alice repaints the porch every spring", "--user", "alice", "--dir", str(folder)),
                capture_output=True,
                text=True,
                env=ENV,
                timeout=300,
            )
            assert added.returncode == 0, added.stderr[-2000:]
            recalled = ok(await two.call_tool("recall", {"query": f"{marker} shed porch", "limit": 10}))
            assert marker in recalled and "repaints the porch" in recalled  # the other server's and the CLI's
            assert "greenhouse" in ok(await two.call_tool("recall", {"query": "app note greenhouse"}))  # the app's
            _wait_for("SEEN", app, acked)  # the app's search found the first server's write while running
            ok(await two.call_tool("forget", {"memory_ids": [written[0]]}))
            after = ok(await one.call_tool("recall", {"query": f"{marker} shed", "limit": 10}))
            assert written[0] not in after and f"keeps a {marker}" not in after  # (the reply may echo the query)
        _wait_for("DONE", app, acked)
        assert app.wait(60) == 0
    finally:
        for process in (app, ui):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(60)
    with _open(folder) as memory:
        timeline = {item.id for item in memory.episodic.get_timeline(limit=10_000)}
        assert acked and set(acked) <= timeline  # every acknowledged write of the app is there
        contents = [i.content for i in memory.search("porch spring", limit=5)]
        assert "Alice repaints the porch every spring" in contents


def test_each_process_sees_the_others_writes_and_deletes_by_vector(tmp_path: Path) -> None:
    """The dense index of each process follows the others' writes and deletes (one search later)."""
    folder = tmp_path / "memory"
    with _open(folder) as here, _open(folder) as same:
        assert same.context is here.context
        child = subprocess.run(
            [sys.executable, "-c", "import sys; from llama_index_memory_hierarchy import HierarchicalMemory as H\n"
             "m = H.from_defaults(user_id='alice', persist_dir=sys.argv[1], embed_model='hashing')\n"
             "print(m.episodic.add('the ferry to the island leaves at dawn')); m.close()", str(folder)],
            capture_output=True, text=True, env=ENV, timeout=300,
        )  # fmt: skip
        assert child.returncode == 0, child.stderr[-2000:]
        written = child.stdout.split()[-1]
        runtime, context = here.context.runtime, here.context
        vector = runtime.run(context.embeddings.aembed_query("the ferry to the island leaves at dawn"))
        assert runtime.run(context.adense_search("alice", vector, limit=3))[0][0] == written
        gone = subprocess.run(
            [sys.executable, "-c", "import sys; from llama_index_memory_hierarchy import HierarchicalMemory as H\n"
             "m = H.from_defaults(user_id='alice', persist_dir=sys.argv[1], embed_model='hashing')\n"
             "assert m.episodic.remove(sys.argv[2]); m.close()", str(folder), written],
            capture_output=True, text=True, env=ENV, timeout=300,
        )  # fmt: skip
        assert gone.returncode == 0, gone.stderr[-2000:]
        assert written not in [i for i, _ in runtime.run(context.adense_search("alice", vector, limit=3))]


@pytest.mark.parametrize("victim", ["writer", "eraser"])
def test_sigkill_of_a_writer_or_an_erasure_leaves_a_folder_every_process_opens(tmp_path: Path, victim: str) -> None:
    """Two writers on one folder, one SIGKILLed mid-write (or an erasure of the other user SIGKILLed): every
    acknowledged write of the survivor and of the killed one is there, and any process finishes the erasure."""
    folder = tmp_path / "memory"
    with _open(folder, "erin") as erin:
        erin.episodic.add_many([f"erin-q7x keeps note {i} about the harbour" for i in range(30)])
    survivor, killed = _python(WRITER, str(folder), "bob"), _python(WRITER, str(folder), "carol")
    acked: dict[str, list[str]] = {"bob": [], "carol": []}
    try:
        for name, process in (("bob", survivor), ("carol", killed)):
            assert process.stdout is not None
            while len(acked[name]) < 20:
                acked[name].append(process.stdout.readline().split()[1])
        if victim == "eraser":
            code = "import sys, time\nfrom llama_index_memory_hierarchy.lifecycle import erasure\n"
            code += "from llama_index_memory_hierarchy import HierarchicalMemory as H\n"
            code += "async def stall(*a, **k):\n    print('STALLED', flush=True); time.sleep(3600)\n"
            code += "erasure._aerase_graph = stall\n"
            code += (
                "H.from_defaults(user_id='erin', persist_dir=sys.argv[1], embed_model='hashing').manager.forget_user()"
            )
            eraser = _python(code, str(folder))
            assert eraser.stdout is not None and eraser.stdout.readline().strip() == "STALLED"
            eraser.send_signal(signal.SIGKILL)
            eraser.wait(30)
        killed.send_signal(signal.SIGKILL)
        killed.wait(30)
        acked["carol"] += _complete(killed)  # acknowledged before the kill landed
        while len(acked["bob"]) < 40:  # the survivor goes on writing after the kills
            acked["bob"].append((survivor.stdout or iter(())).readline().split()[1])
    finally:
        for process in (survivor, killed):
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(30)
        acked["bob"] += _complete(survivor)
    for name in ("bob", "carol"):
        with _open(folder, name) as memory:  # every process opens it (this one finishes any erasure first)
            timeline = {item.id for item in memory.episodic.get_timeline(limit=100_000)}
            assert set(acked[name]) <= timeline, name
    with _open(folder, "erin") as erin:
        count = erin.context.runtime.run(erin.context.records.count("erin", namespace=None))
        assert count == (0 if victim == "eraser" else 30)
        if victim == "eraser":
            assert erin.search("harbour", limit=3) == []
