"""A readable record of one session, as Markdown or JSON.

The turns with their times, the running summary, and what was remembered from the session (facts
distilled from its turns, session summaries, insights, perceptions).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, Literal

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.consolidation import STAGE_SEMANTIC, SUMMARY_KIND
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.types import MemoryType, parse_iso, validate_identifier


async def aexport_session(
    deps: LifecycleDeps,
    session_id: str,
    path: str | os.PathLike[str] | None = None,
    *,
    format: Literal["markdown", "json"] = "markdown",
) -> str:
    """A readable record of one session (turns, times, what was remembered); written to ``path`` if given."""
    if format not in ("markdown", "json"):
        raise MemoryValidationError("format", f"must be 'markdown' or 'json', got {format!r}")
    session_id = validate_identifier(session_id, "session_id")
    data = await _asession_data(deps, session_id)
    text = json.dumps(data, ensure_ascii=False, indent=2) if format == "json" else _session_markdown(data)
    if path is not None:
        await asyncio.to_thread(_write_text, Path(path), text)
    return text


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def _asession_data(deps: LifecycleDeps, session_id: str) -> dict[str, Any]:
    user = deps.user_id
    events = await deps.tiers.episodic.aget_session(session_id)
    turns = [e for e in events if e.metadata.get("role") and e.metadata.get("kind") != SUMMARY_KIND]
    others = [e for e in events if not e.metadata.get("role") and e.metadata.get("kind") != SUMMARY_KIND]
    summaries = [e for e in events if e.metadata.get("kind") == SUMMARY_KIND]
    ids = {e.id for e in events}
    distilled = await deps.store.aconsolidated(user, STAGE_SEMANTIC, sorted(ids)) if ids else {}
    facts: list[dict[str, Any]] = []
    insights: list[dict[str, Any]] = []
    if await deps.context.records.count(user, memory_type=MemoryType.SEMANTIC):
        for item in await deps.tiers.semantic.aquery():
            sources = [s for s in item.metadata.get("source_ids") or [] if s in ids]
            if not sources:
                continue
            entry = {
                "id": item.id,
                "content": item.content,
                "sources": sources,
                "valid_at": item.metadata.get("valid_at"),
                "invalid_at": item.metadata.get("invalid_at"),
            }
            (insights if item.metadata.get("origin") == "reflection" else facts).append(entry)
    perceptions = []
    if await deps.context.records.count(user, memory_type=MemoryType.PERCEPTUAL):
        perceptions = [
            {
                "id": p.id,
                "timestamp": p.timestamp.isoformat(),
                "modality": p.metadata.get("modality"),
                "content": p.content,
            }
            for p in await deps.tiers.perceptual.aquery(session_id=session_id)
        ]
    running = await deps.store.aget_summary(user, session_id)
    return {
        "user_id": user,
        "session_id": session_id,
        "started": events[0].timestamp.isoformat() if events else None,
        "ended": events[-1].timestamp.isoformat() if events else None,
        "turns": [
            {
                "id": t.id,
                "timestamp": t.timestamp.isoformat(),
                "role": t.metadata.get("role"),
                "content": t.content,
                "importance": t.importance,
                "distilled": t.id in distilled,
            }
            for t in turns
        ],
        "events": [{"id": e.id, "timestamp": e.timestamp.isoformat(), "content": e.content} for e in others],
        "running_summary": running["summary"] if running else None,
        "summaries": [{"id": s.id, "timestamp": s.timestamp.isoformat(), "content": s.content} for s in summaries],
        "facts": facts,
        "insights": insights,
        "perceptions": perceptions,
    }


def _session_markdown(data: dict[str, Any]) -> str:
    def when(value: str | None) -> str:
        return parse_iso(value).strftime("%Y-%m-%d %H:%M UTC") if value else "?"

    lines = [f"# Session {data['session_id']}", ""]
    lines.append(f"- User: {data['user_id']}")
    lines.append(f"- From {when(data['started'])} to {when(data['ended'])}; {len(data['turns'])} turns")
    lines += ["", "## Transcript", ""]
    for turn in data["turns"]:
        text = turn["content"].replace("\n", "\n  ")
        lines.append(f"- **{turn['role']}** ({when(turn['timestamp'])}): {text}")
    if data["events"]:
        lines += ["", "## Other events", ""]
        lines += [f"- ({when(e['timestamp'])}) {e['content']}" for e in data["events"]]
    lines += ["", "## What was remembered", ""]
    remembered = False
    if data["running_summary"]:
        lines += ["### Running summary", "", data["running_summary"], ""]
        remembered = True
    if data["summaries"]:
        lines += ["### Session summaries", ""]
        lines += [f"- {s['content']}" for s in data["summaries"]]
        lines.append("")
        remembered = True
    if data["facts"]:
        lines += ["### Facts", ""]
        for fact in data["facts"]:
            status = " (superseded)" if fact.get("invalid_at") else ""
            lines.append(f"- {fact['content']}{status} — from {len(fact['sources'])} turn(s)")
        lines.append("")
        remembered = True
    if data["insights"]:
        lines += ["### Insights", ""]
        lines += [f"- {i['content']}" for i in data["insights"]]
        lines.append("")
        remembered = True
    if data["perceptions"]:
        lines += ["### Perceptions", ""]
        lines += [f"- [{p['modality']}] {p['content']}" for p in data["perceptions"]]
        lines.append("")
        remembered = True
    if not remembered:
        lines.append("Nothing consolidated from this session yet (run consolidate() or end_session()).")
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["aexport_session"]
