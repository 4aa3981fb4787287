"""Knowledge graph export: JSON, GraphML and a self-contained interactive HTML page.

The HTML page needs no network (the user may be offline, and a CDN would leak what the
graph contains): its CSS and JavaScript are inline, the layout is a small force-directed
simulation on a ``<canvas>`` written here. It has labels, hover details, dragging,
zoom and pan, and a search box. The graph data is embedded as JSON inside a
``<script type="application/json">`` block with ``<``, ``>`` and ``&`` escaped, so no
entity name can close the script or inject markup. When the first layout is drawn the
page sets ``<body data-ready="true">`` and lists the nodes in an accessible side panel;
script errors are collected in ``data-errors`` (what the browser test checks).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from llama_index_memory_hierarchy.errors import MemoryValidationError

ExportFormat = Literal["json", "graphml", "html"]
FORMATS: tuple[str, ...] = ("json", "graphml", "html")

# Characters XML 1.0 forbids even when escaped.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass
class GraphNode:
    """A node to export: id, display label, type and extra properties."""

    id: str
    label: str
    type: str = "ENTITY"
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class GraphEdge:
    """A directed, labelled edge to export."""

    source: str
    target: str
    label: str
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class KnowledgeGraph:
    """Nodes and edges of one user's knowledge graph, ready to export."""

    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    title: str = "Knowledge graph"

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``{"title", "nodes": [...], "edges": [...]}``."""
        return {
            "title": self.title,
            "nodes": [{"id": n.id, "label": n.label, "type": n.type, "properties": n.properties} for n in self.nodes],
            "edges": [
                {"source": e.source, "target": e.target, "label": e.label, "properties": e.properties}
                for e in self.edges
            ],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """The graph as JSON (UTF-8 text, non-ASCII kept)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, default=str)

    def to_graphml(self) -> str:
        """The graph as GraphML (valid XML 1.0; readable by networkx, Gephi, yEd, Cytoscape)."""
        ns = "http://graphml.graphdrawing.org/xmlns"
        ET.register_namespace("", ns)
        root = ET.Element(f"{{{ns}}}graphml")
        node_keys = ["label", "type", *sorted({k for n in self.nodes for k in n.properties} - {"label", "type"})]
        edge_keys = ["label", *sorted({k for e in self.edges for k in e.properties} - {"label"})]
        key_ids: dict[tuple[str, str], str] = {}
        for domain, keys in (("node", node_keys), ("edge", edge_keys)):
            for i, name in enumerate(keys):
                key_id = f"{domain[0]}{i}"
                key_ids[(domain, name)] = key_id
                ET.SubElement(
                    root,
                    f"{{{ns}}}key",
                    {"id": key_id, "for": domain, "attr.name": _xml_text(name), "attr.type": "string"},
                )
        graph = ET.SubElement(root, f"{{{ns}}}graph", {"id": "G", "edgedefault": "directed"})

        def add_data(parent: ET.Element, domain: str, name: str, value: Any) -> None:
            if value is None:
                return
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            data = ET.SubElement(parent, f"{{{ns}}}data", {"key": key_ids[(domain, name)]})
            data.text = _xml_text(text)

        for node in self.nodes:
            element = ET.SubElement(graph, f"{{{ns}}}node", {"id": _xml_text(node.id)})
            add_data(element, "node", "label", node.label)
            add_data(element, "node", "type", node.type)
            for key, value in node.properties.items():
                if key not in {"label", "type"}:
                    add_data(element, "node", key, value)
        for i, edge in enumerate(self.edges):
            element = ET.SubElement(
                graph,
                f"{{{ns}}}edge",
                {"id": f"e{i}", "source": _xml_text(edge.source), "target": _xml_text(edge.target)},
            )
            add_data(element, "edge", "label", edge.label)
            for key, value in edge.properties.items():
                if key != "label":
                    add_data(element, "edge", key, value)
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

    def to_html(self) -> str:
        """A self-contained interactive page (no network access needed)."""
        data = json.dumps(self.to_dict(), ensure_ascii=False, default=str)
        data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        data = data.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        title = _html_escape(self.title)
        return _HTML_TEMPLATE.replace("__TITLE__", title).replace("__DATA__", data)

    def export(self, format: str) -> str:
        """The graph in ``format`` (``json``, ``graphml`` or ``html``)."""
        fmt = str(format).lower()
        if fmt == "json":
            return self.to_json()
        if fmt == "graphml":
            return self.to_graphml()
        if fmt == "html":
            return self.to_html()
        raise MemoryValidationError("format", f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")


def from_triplets(triplets: Iterable[Any], *, title: str = "Knowledge graph") -> KnowledgeGraph:
    """A :class:`KnowledgeGraph` from LlamaIndex ``(node, relation, node)`` triplets."""
    nodes: dict[str, GraphNode] = {}
    edges: list[GraphEdge] = []
    for source, relation, target in triplets:
        for node in (source, target):
            if node.id not in nodes:
                props = dict(node.properties)
                label = str(props.pop("display_name", None) or getattr(node, "name", None) or node.id)
                nodes[node.id] = GraphNode(id=node.id, label=label, type=str(node.label), properties=props)
        edges.append(GraphEdge(relation.source_id, relation.target_id, relation.label, dict(relation.properties)))
    return KnowledgeGraph(nodes=list(nodes.values()), edges=edges, title=title)


def _xml_text(value: str) -> str:
    return _XML_INVALID.sub("\ufffd", value)


def _html_escape(value: str) -> str:
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


_HTML_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>__TITLE__</title>
<style>
  :root { --bg: #0f172a; --panel: #111827; --text: #e5e7eb; --muted: #94a3b8; --accent: #f59e0b; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg);
         color: var(--text); display: flex; height: 100vh; overflow: hidden; }
  #side { width: 280px; background: var(--panel); padding: 12px; display: flex; flex-direction: column; gap: 8px;
          border-right: 1px solid #1f2937; }
  #side h1 { font-size: 16px; margin: 0; }
  #stats { color: var(--muted); font-size: 12px; }
  #search { width: 100%; padding: 6px 8px; border-radius: 6px; border: 1px solid #374151; background: #0b1220;
            color: var(--text); }
  #node-list { list-style: none; margin: 0; padding: 0; overflow-y: auto; flex: 1; }
  #node-list li { padding: 3px 6px; border-radius: 4px; cursor: pointer; white-space: nowrap; overflow: hidden;
                  text-overflow: ellipsis; }
  #node-list li:hover, #node-list li.match { background: #1f2937; }
  #node-list li .dot { display: inline-block; width: 9px; height: 9px; border-radius: 50%; margin-right: 6px; }
  #details { font-size: 12px; color: var(--muted); max-height: 30%; overflow-y: auto; white-space: pre-wrap;
             word-break: break-word; }
  #main { flex: 1; position: relative; }
  canvas { display: block; width: 100%; height: 100%; cursor: grab; }
  #tip { position: absolute; pointer-events: none; background: rgba(17,24,39,.95); border: 1px solid #374151;
         padding: 6px 8px; border-radius: 6px; font-size: 12px; display: none; max-width: 320px; }
  #errors { position: absolute; top: 8px; right: 8px; background: #7f1d1d; padding: 6px 10px; border-radius: 6px;
            display: none; }
</style>
</head>
<body data-ready="false">
<aside id="side">
  <h1 id="graph-title">__TITLE__</h1>
  <div id="stats"></div>
  <input id="search" type="search" placeholder="Search entities..." aria-label="Search entities">
  <ul id="node-list" aria-label="Entities"></ul>
  <div id="details"></div>
</aside>
<main id="main"><canvas id="graph" aria-label="Knowledge graph drawing"></canvas><div id="tip"></div>
<div id="errors"></div></main>
<script type="application/json" id="graph-data">__DATA__</script>
<script>
(function () {
  "use strict";
  var errors = [];
  function report(message) {
    errors.push(String(message));
    document.body.setAttribute("data-errors", errors.join(" | "));
    var box = document.getElementById("errors");
    box.style.display = "block";
    box.textContent = "Error: " + errors.join(" | ");
  }
  window.addEventListener("error", function (event) { report(event.message); });

  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var canvas = document.getElementById("graph");
  var ctx = canvas.getContext("2d");
  var tip = document.getElementById("tip");
  var palette = ["#60a5fa", "#f472b6", "#34d399", "#fbbf24", "#a78bfa", "#f87171", "#2dd4bf", "#fb923c"];
  var typeColor = {};
  function colorOf(type) {
    if (!(type in typeColor)) { typeColor[type] = palette[Object.keys(typeColor).length % palette.length]; }
    return typeColor[type];
  }

  var nodes = data.nodes.map(function (n, i) {
    var angle = 2 * Math.PI * i / Math.max(data.nodes.length, 1);
    var radius = 40 + 12 * Math.sqrt(data.nodes.length) * (1 + (i % 3) * 0.15);
    var label = String(n.label), short = label.length > 32 ? label.slice(0, 31) + "\u2026" : label;
    return { id: n.id, label: label, short: short, type: String(n.type), props: n.properties || {},
             x: Math.cos(angle) * radius, y: Math.sin(angle) * radius, vx: 0, vy: 0, degree: 0, fixed: false };
  });
  var byId = {};
  nodes.forEach(function (n) { byId[n.id] = n; });
  var edges = data.edges.filter(function (e) { return byId[e.source] && byId[e.target]; }).map(function (e) {
    byId[e.source].degree++; byId[e.target].degree++;
    return { source: byId[e.source], target: byId[e.target], label: String(e.label), props: e.properties || {} };
  });
  function radiusOf(n) { return 6 + Math.min(10, Math.sqrt(n.degree) * 3); }

  // ---- force-directed layout: repulsion (all pairs), springs on edges, gravity to the centre
  var alpha = 1;
  function tick() {
    var k = 70, i, j, a, b, dx, dy, d2, d, f;
    for (i = 0; i < nodes.length; i++) {
      a = nodes[i];
      for (j = i + 1; j < nodes.length; j++) {
        b = nodes[j]; dx = a.x - b.x; dy = a.y - b.y; d2 = dx * dx + dy * dy + 0.01;
        if (d2 > 250000) continue;
        f = (k * k) / d2 * alpha;
        a.vx += dx * f * 0.05; a.vy += dy * f * 0.05; b.vx -= dx * f * 0.05; b.vy -= dy * f * 0.05;
      }
    }
    edges.forEach(function (e) {
      dx = e.target.x - e.source.x; dy = e.target.y - e.source.y; d = Math.sqrt(dx * dx + dy * dy) || 1;
      f = (d - k * 1.4) / d * 0.06 * alpha;
      e.source.vx += dx * f; e.source.vy += dy * f; e.target.vx -= dx * f; e.target.vy -= dy * f;
    });
    nodes.forEach(function (n) {
      n.vx -= n.x * 0.004 * alpha; n.vy -= n.y * 0.004 * alpha;
      if (!n.fixed) { n.x += Math.max(-30, Math.min(30, n.vx)); n.y += Math.max(-30, Math.min(30, n.vy)); }
      n.vx *= 0.6; n.vy *= 0.6;
    });
    alpha = Math.max(alpha * 0.985, 0.02);
  }

  // ---- view: zoom and pan
  var view = { x: 0, y: 0, scale: 1 };
  var dpr = window.devicePixelRatio || 1;
  function resize() {
    var rect = canvas.getBoundingClientRect();
    canvas.width = Math.max(1, rect.width * dpr); canvas.height = Math.max(1, rect.height * dpr);
  }
  function fit() {
    if (!nodes.length) return;
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    ctx.font = "11px system-ui, sans-serif";
    nodes.forEach(function (n) {
      var labelWidth = ctx.measureText(n.short).width + radiusOf(n) + 4;
      minX = Math.min(minX, n.x - radiusOf(n)); minY = Math.min(minY, n.y - 12);
      maxX = Math.max(maxX, n.x + labelWidth); maxY = Math.max(maxY, n.y + 12);
    });
    var w = canvas.width / dpr, h = canvas.height / dpr;
    view.scale = Math.min(2, 0.85 * Math.min(w / Math.max(maxX - minX, 1), h / Math.max(maxY - minY, 1)));
    view.x = w / 2 - view.scale * (minX + maxX) / 2; view.y = h / 2 - view.scale * (minY + maxY) / 2;
  }
  function toWorld(px, py) { return { x: (px - view.x) / view.scale, y: (py - view.y) / view.scale }; }

  var hover = null, matches = {}, query = "";
  function draw() {
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.translate(view.x, view.y); ctx.scale(view.scale, view.scale);
    ctx.lineWidth = 1.2 / view.scale;
    ctx.font = (11 / Math.sqrt(view.scale)) + "px system-ui, sans-serif";
    edges.forEach(function (e) {
      var lit = hover && (e.source === hover || e.target === hover);
      ctx.strokeStyle = lit ? "#f59e0b" : "rgba(148,163,184,0.45)";
      ctx.beginPath(); ctx.moveTo(e.source.x, e.source.y); ctx.lineTo(e.target.x, e.target.y); ctx.stroke();
      var dx = e.target.x - e.source.x, dy = e.target.y - e.source.y, d = Math.sqrt(dx * dx + dy * dy) || 1;
      var r = radiusOf(e.target), ax = e.target.x - dx / d * r, ay = e.target.y - dy / d * r;
      ctx.fillStyle = ctx.strokeStyle; ctx.beginPath();
      ctx.moveTo(ax, ay); ctx.lineTo(ax - dx / d * 7 - dy / d * 3.5, ay - dy / d * 7 + dx / d * 3.5);
      ctx.lineTo(ax - dx / d * 7 + dy / d * 3.5, ay - dy / d * 7 - dx / d * 3.5); ctx.fill();
      if (lit || edges.length < 60) {
        ctx.fillStyle = lit ? "#fde68a" : "#94a3b8";
        ctx.fillText(e.label, (e.source.x + e.target.x) / 2 + 3, (e.source.y + e.target.y) / 2 - 3);
      }
    });
    nodes.forEach(function (n) {
      var r = radiusOf(n), dim = query && !matches[n.id];
      ctx.globalAlpha = dim ? 0.25 : 1;
      ctx.fillStyle = colorOf(n.type); ctx.beginPath(); ctx.arc(n.x, n.y, r, 0, 2 * Math.PI); ctx.fill();
      if (n === hover || matches[n.id]) {
        ctx.strokeStyle = "#f59e0b"; ctx.lineWidth = 3 / view.scale; ctx.stroke(); ctx.lineWidth = 1.2 / view.scale;
      }
      ctx.fillStyle = "#e5e7eb"; ctx.fillText(n.short, n.x + r + 3, n.y + 4);
      ctx.globalAlpha = 1;
    });
  }

  function nodeAt(px, py) {
    var p = toWorld(px, py), best = null, bestD = Infinity;
    nodes.forEach(function (n) {
      var dx = n.x - p.x, dy = n.y - p.y, d = dx * dx + dy * dy, r = radiusOf(n) + 4;
      if (d <= r * r && d < bestD) { best = n; bestD = d; }
    });
    return best;
  }
  function describe(n) {
    var lines = [n.label + " (" + n.type + ")"];
    Object.keys(n.props).forEach(function (k) {
      var v = n.props[k]; lines.push(k + ": " + (typeof v === "string" ? v : JSON.stringify(v)));
    });
    edges.forEach(function (e) {
      if (e.source === n) lines.push("\\u2192 " + e.label + " " + e.target.label);
      if (e.target === n) lines.push("\\u2190 " + e.label + " " + e.source.label);
    });
    return lines.join("\\n");
  }

  // ---- interaction: hover, drag nodes, pan, zoom, search
  var drag = null, pan = null, running = false;
  function kick() { alpha = Math.max(alpha, 0.3); if (!running) { running = true; requestAnimationFrame(loop); } }
  function loop() {
    tick(); draw();
    if (alpha > 0.03 || drag) { requestAnimationFrame(loop); } else { running = false; }
  }
  canvas.addEventListener("pointerdown", function (ev) {
    var rect = canvas.getBoundingClientRect(), n = nodeAt(ev.clientX - rect.left, ev.clientY - rect.top);
    canvas.setPointerCapture(ev.pointerId);
    if (n) { drag = n; n.fixed = true; document.getElementById("details").textContent = describe(n); kick(); }
    else { pan = { x: ev.clientX - view.x, y: ev.clientY - view.y }; }
    canvas.style.cursor = "grabbing";
  });
  canvas.addEventListener("pointermove", function (ev) {
    var rect = canvas.getBoundingClientRect(), px = ev.clientX - rect.left, py = ev.clientY - rect.top;
    if (drag) { var p = toWorld(px, py); drag.x = p.x; drag.y = p.y; return; }
    if (pan) { view.x = ev.clientX - pan.x; view.y = ev.clientY - pan.y; draw(); return; }
    var n = nodeAt(px, py);
    if (n !== hover) { hover = n; draw(); }
    if (n) {
      tip.style.display = "block"; tip.textContent = describe(n);
      tip.style.left = (px + 14) + "px"; tip.style.top = (py + 14) + "px";
    } else { tip.style.display = "none"; }
  });
  function release() { if (drag) { drag.fixed = false; } drag = null; pan = null; canvas.style.cursor = "grab"; }
  canvas.addEventListener("pointerup", release);
  canvas.addEventListener("pointercancel", release);
  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var rect = canvas.getBoundingClientRect(), px = ev.clientX - rect.left, py = ev.clientY - rect.top;
    var factor = Math.exp(-ev.deltaY * 0.0015), p = toWorld(px, py);
    view.scale = Math.max(0.05, Math.min(8, view.scale * factor));
    view.x = px - p.x * view.scale; view.y = py - p.y * view.scale; draw();
  }, { passive: false });

  var list = document.getElementById("node-list");
  var items = {};
  nodes.slice().sort(function (a, b) { return a.label.localeCompare(b.label); }).forEach(function (n) {
    var li = document.createElement("li"), dot = document.createElement("span");
    dot.className = "dot"; dot.style.background = colorOf(n.type);
    li.appendChild(dot); li.appendChild(document.createTextNode(n.label));
    li.setAttribute("data-node-id", n.id); li.title = n.type;
    li.addEventListener("click", function () {
      hover = n; document.getElementById("details").textContent = describe(n);
      var w = canvas.width / dpr, h = canvas.height / dpr;
      view.x = w / 2 - n.x * view.scale; view.y = h / 2 - n.y * view.scale; draw();
    });
    items[n.id] = li; list.appendChild(li);
  });
  document.getElementById("search").addEventListener("input", function (ev) {
    query = ev.target.value.trim().toLowerCase(); matches = {};
    nodes.forEach(function (n) {
      var hit = query && (n.label.toLowerCase().indexOf(query) >= 0 || n.type.toLowerCase().indexOf(query) >= 0);
      if (hit) matches[n.id] = true;
      items[n.id].classList.toggle("match", !!hit);
      items[n.id].style.display = !query || hit ? "" : "none";
    });
    draw();
  });
  document.getElementById("stats").textContent = nodes.length + " entities \\u00b7 " + edges.length + " relations";
  window.addEventListener("resize", function () { resize(); fit(); draw(); });

  resize();
  for (var i = 0; i < 300; i++) tick();
  fit(); draw();
  document.title = data.title + " (" + nodes.length + " entities)";
  document.body.setAttribute("data-ready", "true");
  document.body.setAttribute("data-node-count", String(nodes.length));
  document.body.setAttribute("data-edge-count", String(edges.length));
})();
</script>
</body>
</html>
"""
