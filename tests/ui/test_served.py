"""``lmh ui`` as another process on the machine meets it: the real command on a free port, a real HTTP client.

Checked: without the secret every path answers 401 and names nothing (no user, no memory), whatever the path,
cookie, header or ``Sec-Fetch-Site`` (a cross-site ``<img>``); a process without the secret cannot erase the
user even with ``--allow-edits``; a fixed secret given in ``LMH_UI_TOKEN`` opens the pages and is not printed;
a malformed one is refused before any store opens; and reading every page leaves ``memory.db`` and ``graph.db``
as they were, row for row.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspector_data import BOB_SECRET

httpx = pytest.importorskip("httpx")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "scripted-secret-0123456789_abc.XYZ~"
#: Seconds to wait for the server (it loads the embedding model first).
SERVER_START = 180


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _lmh(folder: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llama_index_memory_hierarchy",
        "ui",
        "--user",
        "alice",
        "--dir",
        str(folder),
        *options,
    ]


def _env(secret: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LMH_UI_TOKEN"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return env | ({"LMH_UI_TOKEN": secret} if secret is not None else {})


@pytest.fixture(scope="module")
def served(
    two_users: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """``lmh ui --allow-edits`` with the secret in ``LMH_UI_TOKEN``: its address and its log."""
    folder, _ = two_users
    port = _free_port()
    log = tmp_path_factory.mktemp("served") / "lmh-ui.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            _lmh(folder, "--port", str(port), "--allow-edits"),
            stdout=output,
            stderr=subprocess.STDOUT,
            env=_env(SECRET),
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=5).text == "ok":
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"lmh ui did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    yield base, log
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def rows(folder: Path) -> dict[tuple[str, str], list[str]]:
    """Every row of every table of ``memory.db`` and ``graph.db``, read with the standard library."""
    found: dict[tuple[str, str], list[str]] = {}
    for name in ("memory.db", "graph.db"):
        with sqlite3.connect(f"file:{folder / name}?mode=ro", uri=True) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                found[(name, table)] = sorted(map(repr, db.execute(f'SELECT * FROM "{table}"')))
    return found


def test_without_the_secret_nothing_is_shown_and_nothing_erased(
    served: tuple[str, Path], two_users: tuple[Path, dict[str, Any]]
) -> None:
    base, _ = served
    tea = two_users[1]["alice_tea"]
    paths = ["/", "/search?q=tea", "/profile", f"/memory/{tea}", "/forget-everything", "/access-log"]
    # not only the pages: an unknown path, or one beside the open files, gets no error page naming the user
    paths += ["/no-such-page", "/static/nothing.css", "/static/", "/favicon.ico/x", "/healthz/x"]
    wrong = [{}, {"cookie": "lmh_ui_x=" + SECRET}, {"authorization": f"Basic {SECRET}"}, {"authorization": SECRET}]
    wrong += [{"authorization": f"Bearer {SECRET}x"}, {"sec-fetch-site": "cross-site", "sec-fetch-dest": "image"}]
    with httpx.Client(base_url=base, follow_redirects=False, timeout=60) as web:
        for path in paths:
            for headers in wrong:
                answer = web.get(path, headers=headers)
                assert answer.status_code == 401, (path, headers, answer.status_code)
                assert "alice" not in answer.text and "genmaicha" not in answer.text, (path, headers)
        # another local process, edits allowed: without the secret it reads no CSRF token and erases nothing
        erased = web.post("/forget-everything", data={"confirm": "alice", "csrf_token": "x"})
        assert erased.status_code == 401
        assert web.get("/static/ui.css").status_code == 200 and web.get("/healthz").text == "ok"
        assert "genmaicha" in web.get("/search?q=genmaicha", headers={"authorization": f"Bearer {SECRET}"}).text


def test_a_fixed_secret_opens_the_pages_and_is_not_printed(served: tuple[str, Path]) -> None:
    base, log = served
    printed = log.read_text()
    assert SECRET not in printed and "?token=<the secret>" in printed
    with httpx.Client(base_url=base, follow_redirects=False, timeout=60) as web:
        opened = web.get(f"/profile?token={SECRET}")
        assert opened.status_code == 303 and opened.headers["location"] == "/profile"
        assert "httponly" in opened.headers["set-cookie"].lower()
        assert web.get("/profile").status_code == 200  # the cookie now


@pytest.mark.parametrize("secret", ["short", "has space inside it!", "x" * 513, "ünïcode-secret-000000"])
def test_a_malformed_fixed_secret_is_refused_before_any_store_opens(tmp_path: Path, secret: str) -> None:
    done = subprocess.run(
        _lmh(tmp_path / "never", "--port", str(_free_port())),
        env=_env(secret),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "LMH_UI_TOKEN" in done.stderr, done.stderr
    assert not (tmp_path / "never").exists()


def test_reading_every_page_writes_nothing(served: tuple[str, Path], two_users: tuple[Path, dict[str, Any]]) -> None:
    base, _ = served
    folder, ids = two_users
    tea = ids["alice_tea"]
    pages = ["/", "/search?q=which+tea+do+I+like", "/search?q=tea&tier=procedural", "/timeline", "/graph"]
    pages += ["/graph/view", "/profile", "/context?input=which+tea+do+I+like", "/memories", "/memories?history=1"]
    pages += [f"/memory/{tea}", f"/memory/{tea}/forget", "/procedural", "/access-log", "/forget-everything", "/new"]
    with httpx.Client(base_url=base, headers={"authorization": f"Bearer {SECRET}"}, timeout=60) as web:
        web.get("/search?q=warm+up")  # the first search loads what it needs
        time.sleep(1.0)  # past the access writer's quiet time (stores.access.FLUSH_QUIET_S)
        before = rows(folder)
        for page in pages:
            answer = web.get(page)
            assert answer.status_code == 200, (page, answer.status_code)
            assert BOB_SECRET not in answer.text
        assert re.search("genmaicha", web.get("/context?input=which+tea+do+I+like").text)
        time.sleep(1.0)
    changed = {table for table in {*before, *rows(folder)} if before.get(table) != rows(folder).get(table)}
    assert not changed, changed
