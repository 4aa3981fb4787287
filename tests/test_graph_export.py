"""Graph export: JSON, GraphML parsed back, and the HTML page rendered in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.graph_export import GraphEdge, GraphNode, KnowledgeGraph

HOSTILE = "</script><script>window.pwned=1</script> & <b>\"'"


def sample_graph() -> KnowledgeGraph:
    nodes = [
        GraphNode("ent_alice", "Alice Chen", "PERSON", {"aliases": ["alice", "alice chen"]}),
        GraphNode("ent_bob", "Bob", "PERSON"),
        GraphNode("ent_acme", "Acme Corp", "ORG"),
        GraphNode("ent_paris", "Paris", "PLACE"),
        GraphNode("ent_zh", "北京", "PLACE"),
        GraphNode("ent_evil", HOSTILE, "ENTITY", {"note": "bell\x07 char"}),
    ]
    edges = [
        GraphEdge("ent_alice", "ent_bob", "spouse", {"confidence": 0.9, "valid_at": "2024-01-01T00:00:00+00:00"}),
        GraphEdge("ent_alice", "ent_acme", "works_at", {"confidence": 0.6}),
        GraphEdge("ent_acme", "ent_paris", "located_in", {}),
        GraphEdge("ent_bob", "ent_zh", "lives_in", {}),
        GraphEdge("ent_evil", "ent_bob", "knows", {}),
    ]
    return KnowledgeGraph(nodes=nodes, edges=edges, title="Alice's memory")


def test_json_round_trip() -> None:
    graph = sample_graph()
    data = json.loads(graph.export("json"))
    assert [n["label"] for n in data["nodes"]][:3] == ["Alice Chen", "Bob", "Acme Corp"]
    assert data["edges"][0] == {
        "source": "ent_alice",
        "target": "ent_bob",
        "label": "spouse",
        "properties": {"confidence": 0.9, "valid_at": "2024-01-01T00:00:00+00:00"},
    }
    with pytest.raises(MemoryValidationError, match="format"):
        graph.export("pdf")


def test_graphml_is_valid_xml_and_parses_back() -> None:
    text = sample_graph().export("graphml")
    root = ET.fromstring(text.encode("utf-8"))
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    assert len(root.findall(".//g:node", ns)) == 6
    assert len(root.findall(".//g:edge", ns)) == 5
    networkx = pytest.importorskip("networkx")
    path_graph = networkx.parse_graphml(text)
    assert path_graph.nodes["ent_alice"]["label"] == "Alice Chen"
    assert path_graph.nodes["ent_evil"]["label"] == HOSTILE
    assert path_graph.edges["ent_alice", "ent_bob"]["label"] == "spouse"
    assert json.loads(path_graph.nodes["ent_alice"]["aliases"]) == ["alice", "alice chen"]


def test_html_is_self_contained_and_escapes_data() -> None:
    html = sample_graph().export("html")
    assert "<script src" not in html
    assert "<link" not in html
    assert not re.search(r"https?://", html)
    assert HOSTILE not in html  # the label is in the page only as escaped JSON
    assert html.count("</script>") == 2  # the data block and the program, nothing injected


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render(html_path: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on a local file, offline, with a throwaway profile."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium found (Debian: apt-get install chromium); the HTML export is not rendered")
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=3000",
        *extra,
        html_path.as_uri(),
    ]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)}
    )


def render_to_png(graph: KnowledgeGraph, png: Path, tmp_path: Path) -> None:
    """Screenshot of the exported page (used by the test and to refresh docs/img/knowledge-graph.png)."""
    page = tmp_path / "graph.html"
    page.write_text(graph.export("html"), encoding="utf-8")
    result = render(page, tmp_path, f"--screenshot={png}", "--window-size=1280,800", "--hide-scrollbars")
    assert png.exists() and png.stat().st_size > 5000, result.stderr[-2000:]


def test_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "graph.html"
    graph = sample_graph()
    page.write_text(graph.export("html"), encoding="utf-8")
    result = render(page, tmp_path, "--dump-dom")
    dom = result.stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None, result.stderr[-2000:]
    assert 'data-ready="true"' in body.group(0), result.stderr[-2000:]
    assert "data-errors" not in body.group(0)
    assert "Uncaught" not in result.stderr
    assert "window.pwned" not in dom.split("</script>")[-1]  # not turned into markup
    items = re.findall(r'<li data-node-id="([^"]+)"', dom)
    assert sorted(items) == sorted(n.id for n in graph.nodes)
    for label in ("Alice Chen", "Bob", "Acme Corp", "Paris", "北京"):
        assert f"{label}</li>" in dom
    assert 'data-node-count="6"' in body.group(0)
    assert 'data-edge-count="5"' in body.group(0)
    assert "<title>Alice's memory (6 entities)</title>" in dom or "Alice&#39;s memory (6 entities)" in dom

    png = tmp_path / "graph.png"
    render_to_png(graph, png, tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
