"""Procedural memory: how this user wants things done (instructions) and how tasks were done before (procedures).

* An **instruction** is a standing rule ("from now on, answer me in Chinese"), extracted from the user's
  turns (offline, :mod:`~llama_index_memory_hierarchy.extraction.instructions`; by the LLM when one is
  configured) or added by a tool. It records its source turns, when it took effect (``valid_from``) and,
  once a newer rule on the same matter replaces it, when it ended (``invalid_at``, ``superseded_by``): the
  old rule stays as history, only current rules reach the memory message. Instructions are pinned (never
  forgotten by decay); the turn one came from is pinned too, so that forgetting old turns keeps the rule,
  and unpinned again once no current rule cites it (the rule was replaced or deleted). Deleting that turn
  deletes the rule (it cites it in ``source_ids``, see ``lifecycle.deletion``). Editing a rule's text reads
  it again: its polarity and topic renewed, and the current rules it now conflicts with end.
* A **procedure** is the list of tool calls (in order) with which an agent solved a task, learned from a
  run when it ends (:mod:`.runs`), merged with the procedure of the same task when the task recurs (runs,
  successes, what failed), embedded as its task so that a similar new task finds it
  (:func:`procedural_evidence`, the cross-tier search's signal for this tier).

Scoped by user, and by agent when ``MemoryConfig.agent_id`` is set (a rule or procedure without one is every
agent's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.llms.types import ChatMessage
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.calibration import acalibration, group_of
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.extraction.instructions import (
    ExtractedInstruction,
    Polarity,
    conflicts,
    extract_instructions,
    is_prompt_injection,
    topic_of,
)
from llama_index_memory_hierarchy.messages import quote
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.tiers.procedural.runs import Run, RunTracker
from llama_index_memory_hierarchy.tiers.stored import StoredTier
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, utcnow, validate_content, validate_identifier

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)

#: Longest condition a rule takes (a trigger phrase: "when I say deploy"), kept in the rule's metadata.
MAX_CONDITION_CHARS = 1000

INSTRUCTION = "instruction"
PROCEDURE = "procedure"
#: The memory's own tools (``tools.MemoryToolSpec``): calling them teaches no procedure.
MEMORY_TOOLS = frozenset(
    {
        "remember",
        "recall",
        "update_memory",
        "forget",
        "memory_summary",
        "memory_stats",
        "list_instructions",
        "add_instruction",
        "remove_instruction",
    }
)


class ProceduralSettings(BaseModel):
    """How the procedural tier learns and offers what it holds."""

    extract_instructions: bool = Field(default=True, description="Find standing rules in the user's turns.")
    learn_procedures: bool = Field(default=True, description="Learn procedures from the agent's runs.")
    use_llm: bool = Field(default=True, description="Ask the configured LLM to find rules (offline otherwise).")
    procedure_match: float = Field(
        default=0.45,
        description="Calibrated similarity of a new task to a procedure's task for the procedure to be offered.",
    )
    merge_match: float = Field(
        default=0.8, description="Calibrated similarity of two tasks for their procedures to be one (a recurring task)."
    )
    ignored_tools: frozenset[str] = Field(default=MEMORY_TOOLS, description="Tools no procedure is learned from.")


def is_current(item: MemoryItem) -> bool:
    """Whether an instruction still holds (no newer rule ended it)."""
    return not item.metadata.get("invalid_at")


def rule_sources(item: MemoryItem) -> list[str]:
    """The turns a rule came from (``source_ids``)."""
    sources = item.metadata.get("source_ids")
    return [s for s in sources if isinstance(s, str)] if isinstance(sources, list) else []


def procedural_evidence(item: MemoryItem, similarity: float, *, match: float | None = None) -> float:
    """How much the procedural tier vouches for ``item`` as a candidate of a search whose query reads
    ``similarity`` (calibrated cosine) against it: a current instruction fully, a superseded one not at
    all (0 drops it); a procedure only when the query is a similar task, then by how often it worked."""
    if item.metadata.get("kind") == INSTRUCTION:
        return 1.0 if is_current(item) else 0.0
    threshold = ProceduralSettings().procedure_match if match is None else match
    if similarity < threshold:
        return 0.0
    runs = max(int(item.metadata.get("runs", 1) or 1), 1)
    successes = min(max(int(item.metadata.get("successes", runs) or 0), 0), runs)
    return 0.5 + 0.5 * successes / runs


def procedure_text(
    task: str, steps: Sequence[dict[str, Any]], failed: Sequence[dict[str, Any]], runs: int, ok: int
) -> str:
    """A procedure as one memory line: the task, the tool calls in order, what failed before, how often it worked."""
    calls = "; ".join(f"{n}. {s['tool']}({', '.join(s.get('args') or [])})" for n, s in enumerate(steps, 1))
    text = f"Procedure that worked for {task.strip()!r}: {calls}."
    if failed:
        text += " Failed before: " + "; ".join(f"{f['tool']} ({f.get('error') or 'error'})" for f in failed[-3:]) + "."
    return f"{text} Worked in {ok} of {runs} runs."


INSTRUCTIONS_HEADER = (
    "How this user asked to be helped, in the user's words (the user's wishes, not rules of the system; the "
    "current request comes first; where two disagree, the later one holds):"
)


def instructions_section(rules: Sequence[MemoryItem], budget: int, count: Callable[[str], int]) -> str:
    """The memory message's first section: the current ``rules`` (oldest first), one line each, within
    ``budget`` tokens (the newest kept when not all fit); of two that conflict only the newer is shown."""
    shown: list[MemoryItem] = []
    for rule in sorted(rules, key=lambda r: r.timestamp, reverse=True):
        polarity = rule.metadata.get("polarity", "do")
        if not any(conflicts(s.content, s.metadata.get("polarity", "do"), rule.content, polarity) for s in shown):
            shown.append(rule)
    lines: list[str] = []
    used = count(INSTRUCTIONS_HEADER)
    for rule in shown:
        line = _one_line(rule)
        cost = count(line) + 1
        if used + cost > budget:
            break
        lines.append(line)
        used += cost
    return "\n".join([INSTRUCTIONS_HEADER, *reversed(lines)]) if lines else ""


def _one_line(rule: MemoryItem) -> str:
    """One rule as the user's quoted words: when, who (the user, or the inspector it was typed into), on what."""
    when = rule.timestamp.strftime("%Y-%m-%d")
    who = "added in the inspector" if rule.metadata.get("origin") == "inspector" else "from the user"
    condition = rule.metadata.get("condition")
    scope = f" · when the user says {quote(str(condition))}" if condition else ""
    return f"- [{when} · {who}{scope}] {quote(rule.content)}"


class ProceduralMemory(StoredTier):
    """Instructions and procedures of one user (and optionally one agent), see the module docstring."""

    memory_type = MemoryType.PROCEDURAL

    def __init__(
        self,
        *,
        user_id: str,
        session_id: str | None,
        context: StoreContext,
        agent_id: str | None = None,
        llm: Any = None,
        settings: ProceduralSettings | None = None,
    ) -> None:
        super().__init__(user_id=user_id, session_id=session_id, context=context)
        self.agent_id = None if agent_id is None else validate_identifier(agent_id, "agent_id")
        self.settings = settings or ProceduralSettings()
        self._llm = llm
        self._runs = RunTracker(self.settings.ignored_tools)
        #: The instructions as last read, with the record store's change token then (``RecordStore.change_token``).
        self._rules: tuple[Hashable, list[MemoryItem]] | None = None

    # ------------------------------------------------------------------ hooks of StoredTier
    def embedded_text(self, item: MemoryItem) -> str:
        """A procedure is embedded as its task (a new task finds it), an instruction as its rule."""
        return str(item.metadata.get("task") or item.content)

    async def abuild_records(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[np.ndarray] | None = None
    ) -> list[Record]:
        if not items:
            return []
        if embeddings is None:
            embeddings = list(await self.context.embeddings.aembed_texts([self.embedded_text(i) for i in items]))
        space = await self.context.aspace()
        return [
            Record(item=item, embedding=vector, space=space, keyword=self._keyword_text(item))
            for item, vector in zip(items, embeddings, strict=True)
        ]

    @staticmethod
    def _keyword_text(item: MemoryItem) -> str:
        if item.metadata.get("kind") == PROCEDURE:
            tools = " ".join(s.get("tool", "") for s in item.metadata.get("steps") or [])
            return f"{item.metadata.get('task', '')} {tools}".strip()
        return item.content

    async def aupdate(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """As :meth:`StoredTier.aupdate`; an instruction whose text changes is read again as a new rule would be
        (refused as a prompt injection, its polarity and topic renewed) and, while current, ends the current rules
        it now conflicts with."""
        current = await self.aget(memory_id) if content is not None else None
        rule = current is not None and current.metadata.get("kind") == INSTRUCTION
        if rule and content is not None and current is not None:
            content = validate_content(content)
            if is_prompt_injection(content):
                raise MemoryValidationError("content", "reads as a prompt injection, not a rule; it was not changed")
            found = extract_instructions(content)
            polarity = found[0].polarity if found else current.metadata.get("polarity", "do")
            metadata = {**(metadata or {}), "polarity": polarity, "topic": topic_of(content)}
        if not await super().aupdate(memory_id, content=content, importance=importance, metadata=metadata):
            return False
        if rule:
            edited = await self.aget(memory_id)
            if edited is not None and is_current(edited):
                await self._asupersede(edited)
        return True

    async def _aremove_records(self, ids: Sequence[str]) -> list[str]:
        """Delete the records, then unpin the turns only the deleted rules cited."""
        rules = [i for i in await self.aget_many(ids) if i.metadata.get("kind") == INSTRUCTION]
        deleted = await super()._aremove_records(ids)
        gone = set(deleted)
        await self._arelease_sources([r for r in rules if r.id in gone])
        return deleted

    async def aget_stats(self) -> dict[str, Any]:
        """The tier's counts, with its current and ended instructions and its procedures."""
        stats = await super().aget_stats()
        rules = await self.ainstructions(include_history=True)
        current = sum(1 for r in rules if is_current(r))
        stats.update(instructions=current, ended_instructions=len(rules) - current)
        stats["procedures"] = len(await self.aprocedures())
        return stats

    def prepare_item(self, item: MemoryItem) -> MemoryItem:
        """A plain add is an instruction unless it says it is a procedure."""
        if item.metadata.get("kind") in (INSTRUCTION, PROCEDURE):
            return item
        return item.model_copy(update={"metadata": {**item.metadata, **self._instruction_meta("do", None, [])}})

    # ------------------------------------------------------------------ instructions
    def _visible(self, item: MemoryItem) -> bool:
        scope = item.metadata.get("agent_id")
        return scope is None or self.agent_id is None or scope == self.agent_id

    def _instruction_meta(
        self, polarity: Polarity, condition: str | None, sources: Sequence[str], **extra: Any
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "kind": INSTRUCTION,
            "polarity": polarity,
            "valid_from": utcnow().isoformat(),
            "source_ids": list(sources),
            **extra,
        }
        if condition:
            meta["condition"] = condition
        if self.agent_id is not None:
            meta["agent_id"] = self.agent_id
        return meta

    async def ainstructions(self, *, include_history: bool = False) -> list[MemoryItem]:
        """This user's instructions (for this agent), oldest first: the current ones, or every one with history."""
        token = self.context.records.change_token()
        if token is None or self._rules is None or self._rules[0] != token:
            self._rules = (token, [i for i in await self.aquery(metadata={"kind": INSTRUCTION}) if self._visible(i)])
        items = list(self._rules[1])  # read again only after a commit (every get() asks: it shows them)
        return items if include_history else [i for i in items if is_current(i)]

    def instructions(self, *, include_history: bool = False) -> list[MemoryItem]:
        """Sync twin of :meth:`ainstructions`."""
        return self.blocking(self.ainstructions(include_history=include_history))

    async def aadd_instruction(
        self,
        text: str,
        *,
        condition: str | None = None,
        polarity: Polarity | None = None,
        source_ids: Sequence[str] = (),
        origin: str = "user",
    ) -> str:
        """Store a standing rule; the current rules it conflicts with end (kept as history). Returns its id.

        Raises :class:`MemoryValidationError` for a rule that reads as a prompt injection.
        """
        text = validate_content(text, "text")
        condition = _condition(condition)
        if is_prompt_injection(text) or (condition and is_prompt_injection(condition)):
            raise MemoryValidationError("text", "reads as a prompt injection, not a rule; it was not stored")
        if polarity not in (None, "do", "dont", "revoke"):
            raise MemoryValidationError("polarity", f"must be 'do', 'dont' or 'revoke', got {polarity!r}")
        if polarity is None:
            found = extract_instructions(text)
            polarity = found[0].polarity if found else "do"
        meta = self._instruction_meta(polarity, condition, source_ids, origin=origin, topic=topic_of(text))
        item = self.make_item(text, importance=0.9, metadata=meta).model_copy(update={"pinned": True})
        memory_id = (await self.aadd_items([item]))[0]
        await self._asupersede(item.model_copy(update={"id": memory_id}))
        return memory_id

    def add_instruction(self, text: str, **kwargs: Any) -> str:
        """Sync twin of :meth:`aadd_instruction`."""
        return self.blocking(self.aadd_instruction(text, **kwargs))

    async def _asupersede(self, newer: MemoryItem) -> list[str]:
        """End the current rules ``newer`` conflicts with; the ids ended."""
        ended: list[MemoryItem] = []
        polarity = newer.metadata.get("polarity", "do")
        for older in await self.ainstructions():
            if older.id == newer.id or older.metadata.get("condition") != newer.metadata.get("condition"):
                continue
            if conflicts(newer.content, polarity, older.content, older.metadata.get("polarity", "do")):
                meta = {"invalid_at": utcnow().isoformat(), "superseded_by": newer.id}
                await self.context.records.update(self.user_id, older.id, metadata={**older.metadata, **meta})
                ended.append(older)
        if ended:
            logger.debug("a new instruction ended %d older ones", len(ended))
            await self._arelease_sources(ended)
        return [e.id for e in ended]

    async def _arelease_sources(self, rules: Sequence[MemoryItem]) -> None:
        """Unpin the turns these (ended or deleted) rules came from that no current rule of any agent cites."""
        sources = {s for rule in rules for s in rule_sources(rule)}
        if not sources:
            return
        current = [i for i in await self.aquery(metadata={"kind": INSTRUCTION}) if is_current(i)]
        for turn_id in sources - {s for rule in current for s in rule_sources(rule)}:
            await self.context.records.update(self.user_id, turn_id, pinned=False)

    async def aremove_instruction(self, memory_id: str) -> bool:
        """Delete an instruction (through the deletion path: from every read path); False when absent."""
        item = await self.aget(self.check_id(memory_id))
        if item is None or item.metadata.get("kind") != INSTRUCTION or not self._visible(item):
            return False
        return await self.aremove(item.id)

    def remove_instruction(self, memory_id: str) -> bool:
        """Sync twin of :meth:`aremove_instruction`."""
        return self.blocking(self.aremove_instruction(memory_id))

    # ------------------------------------------------------------------ procedures
    async def aprocedures(self) -> list[MemoryItem]:
        """This user's procedures (for this agent), newest first."""
        return [i for i in await self.aquery(metadata={"kind": PROCEDURE}, order_by="-timestamp") if self._visible(i)]

    def procedures(self) -> list[MemoryItem]:
        """Sync twin of :meth:`aprocedures`."""
        return self.blocking(self.aprocedures())

    async def alearn(self, run: Run) -> str | None:
        """Write (or merge into the procedure of the same task) what ``run`` did; the procedure's id, if any."""
        vector = (await self.context.embeddings.aembed_texts([run.task]))[0]
        same = await self._asame_task(run.task, vector)
        steps = [s.as_dict() for s in run.steps if s.ok]
        failed = [s.as_dict() for s in run.steps if not s.ok]
        if same is None:
            if not run.succeeded:
                return None  # a procedure is learned from a run that worked; a failure only amends one
            meta = self._procedure_meta(run.task, steps, failed, 1, 1, run.turn_ids)
            item = self.make_item(procedure_text(run.task, steps, failed, 1, 1), importance=0.6, metadata=meta)
            return (await self.aadd_items([item], embeddings=[vector]))[0]
        meta = dict(same.metadata)
        runs, ok = int(meta.get("runs", 1)) + 1, int(meta.get("successes", 1)) + int(run.succeeded)
        kept_steps = steps if run.succeeded else list(meta.get("steps") or [])
        all_failed = [*(meta.get("failed") or []), *failed][-10:]
        sources = list(dict.fromkeys([*(meta.get("source_ids") or []), *run.turn_ids]))
        meta.update(self._procedure_meta(str(meta.get("task") or run.task), kept_steps, all_failed, runs, ok, sources))
        text = procedure_text(str(meta["task"]), kept_steps, all_failed, runs, ok)
        await self.aupdate(same.id, content=text, metadata=meta)
        return same.id

    def _procedure_meta(
        self,
        task: str,
        steps: list[dict[str, Any]],
        failed: list[dict[str, Any]],
        runs: int,
        ok: int,
        sources: Sequence[str],
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "kind": PROCEDURE,
            "task": task,
            "steps": steps,
            "failed": failed,
            "runs": runs,
            "successes": ok,
            "source_ids": list(sources),
            "last_run": utcnow().isoformat(),
        }
        if self.agent_id is not None:
            meta["agent_id"] = self.agent_id
        return meta

    async def _asame_task(self, task: str, vector: np.ndarray) -> MemoryItem | None:
        """The procedure whose task reads as ``task`` (calibrated similarity >= ``merge_match``), if any."""
        known = await self.aprocedures()
        if not known:
            return None
        records = {
            r.item.id: r
            for r in await self.context.records.get(self.user_id, [i.id for i in known], with_embeddings=True)
        }
        calibration = await acalibration(self.context.embeddings)
        best, best_score = None, self.settings.merge_match
        for item in known:
            record = records.get(item.id)
            if record is None or record.embedding is None or record.embedding.shape != vector.shape:
                continue
            score = float(
                calibration.calibrate(
                    float(np.dot(vector, record.embedding)), group_of(task), group_of(self.embedded_text(item))
                )
            )
            if score >= best_score:
                best, best_score = item, score
        return best

    # ------------------------------------------------------------------ what the memory puts
    async def aobserve(self, items: Sequence[MemoryItem], messages: Sequence[ChatMessage]) -> None:
        """Learn from turns just put (``items``, stored, with the ``messages`` they came from): rules from the
        user's turns, procedures from the runs they end. A failure here is logged; it never fails the put."""
        for item, message in zip(items, messages, strict=True):
            try:
                if self.settings.extract_instructions and item.metadata.get("role") == "user":
                    await self._aextract(item)
                if self.settings.learn_procedures:
                    run = self._runs.observe(item.id, item.content, message)
                    if run is not None:
                        await self.alearn(run)
            except MemoryValidationError as exc:
                logger.warning("procedural memory skipped a turn: %s", exc)

    async def _aextract(self, turn: MemoryItem) -> list[str]:
        """Store the rules a user's turn states (the LLM's reading when one is configured, else offline)."""
        found = await self._allm_rules(turn.content) if self._llm is not None and self.settings.use_llm else None
        origin = "llm" if found is not None else "offline"
        if found is None:
            found = extract_instructions(turn.content)
        ids = []
        for rule in found:
            if is_prompt_injection(rule.rule):
                continue
            ids.append(
                await self.aadd_instruction(
                    rule.rule, condition=rule.condition, polarity=rule.polarity, source_ids=[turn.id], origin=origin
                )
            )
        if ids:  # forgetting old turns keeps the one a standing rule came from
            await self.context.records.update(self.user_id, turn.id, pinned=True)
        return ids

    async def _allm_rules(self, text: str) -> list[ExtractedInstruction] | None:
        """The rules the LLM finds in ``text`` (only where a cue word is there), or None to fall back offline."""
        from llama_index_memory_hierarchy.extraction.instructions import allm_instructions  # LLM prompt: on use

        return await allm_instructions(self._llm, text)


def _condition(value: Any) -> str | None:
    """A rule's condition checked (a blank one is none); why: a 100,000-character one was refused as 'metadata'."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    value = validate_content(value, "condition")
    if len(value) > MAX_CONDITION_CHARS:
        raise MemoryValidationError("condition", f"longer than {MAX_CONDITION_CHARS} characters ({len(value)})")
    return value
