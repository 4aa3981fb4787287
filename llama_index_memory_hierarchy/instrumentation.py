"""LlamaIndex instrumentation of memory work: spans and events for put, get, retrieve, consolidation,
forgetting, deletion by id and erasure, so that tracing integrations (Arize Phoenix, Langfuse, ...) show what memory
did inside an agent trace.

Every operation opens a span named ``<Class>.<operation>`` under the caller's active span and emits
one :class:`MemoryEvent` subclass with counts and its duration. Neither carries memory contents
(messages, queries, retrieved text) nor the user id (only a digest) unless the memory's config sets
``trace_contents=True`` (``LMH_TRACE_CONTENTS=1``). For that reason the spans are opened through the
dispatcher's ``span_enter``/``span_exit`` with a bound-arguments object of our own, instead of
``@dispatcher.span``, which would hand the raw arguments (the messages) to every span handler.

``llama_index_instrumentation`` is the package behind ``llama_index.core.instrumentation`` (same
dispatcher tree, same ``BaseEvent``); importing it directly keeps ``import llama_index_memory_hierarchy``
light.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from contextvars import Token
from typing import Any, TypeVar

from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.base import BaseEvent
from llama_index_instrumentation.dispatcher import active_instrument_tags
from llama_index_instrumentation.event_handlers import NullEventHandler
from llama_index_instrumentation.events.span import SpanDropEvent
from llama_index_instrumentation.span import active_span_id
from llama_index_instrumentation.span_handlers import NullSpanHandler
from pydantic import Field

#: The package's dispatcher (a child of LlamaIndex's root dispatcher: root handlers see everything).
dispatcher = get_dispatcher("llama_index_memory_hierarchy")
logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])


class MemoryEvent(BaseEvent):
    """One memory operation finished: what it was, for whom (a digest), how long it took."""

    operation: str
    user: str = Field(description="A digest of the user id (the id itself with trace_contents).")
    session_id: str | None = None
    duration_ms: float = 0.0
    contents: dict[str, Any] | None = Field(default=None, description="Texts, only with trace_contents=True.")

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__


class MemoryPutEvent(MemoryEvent):
    """Messages were recorded (working + episodic)."""

    messages: int = 0
    tokens: int = 0


class MemoryGetEvent(MemoryEvent):
    """``get()`` assembled the chat history for the LLM."""

    messages: int = Field(default=0, description="Messages returned (history + the memory message).")
    history_messages: int = 0
    memory_message: bool = Field(default=False, description="Whether a system message of memories was injected.")
    memory_tokens: int = Field(default=0, description="Tokens of the injected memory message.")
    tokens: int = Field(default=0, description="Tokens of everything returned.")


class MemoryRetrieveEvent(MemoryEvent):
    """Memories were retrieved for a query."""

    results: int = 0
    limit: int = 0
    tiers: list[str] = Field(default_factory=list)
    memory_ids: list[str] = Field(default_factory=list)
    top_score: float | None = None


class MemoryConsolidationEvent(MemoryEvent):
    """A consolidation ran (promotion, distillation into facts, summaries, reflection)."""

    promoted: int = 0
    distilled: int = 0
    facts: int = 0
    summaries: int = 0
    insights: int = 0
    method: str = "none"


class MemoryForgetEvent(MemoryEvent):
    """Forgetting by a strategy ran (or, ``dry_run``, only selected)."""

    strategy: str = ""
    dry_run: bool = False
    forgotten: int = 0
    considered: int = 0
    per_tier: dict[str, int] = Field(default_factory=dict)


class MemoryDeleteEvent(MemoryEvent):
    """Memories were deleted by id, with what was derived only from them."""

    requested: int = 0
    deleted: int = 0
    not_found: int = 0
    derived: int = 0
    facts: int = 0
    summaries_regenerated: int = 0


class MemoryEraseEvent(MemoryEvent):
    """A user was erased from every store."""

    rows: int = 0
    live_memories: int = 0
    compacted: bool = False


def _digest(user_id: str | None) -> str:
    return hashlib.sha256((user_id or "").encode()).hexdigest()[:12]


def _config_of(owner: Any) -> Any:
    """The ``MemoryConfig`` reachable from the object an operation runs on (memory, tier, service, context)."""
    for path in (("config",), ("context", "config"), ("memory", "config"), ("deps", "config")):
        value = owner
        for name in path:
            value = getattr(value, name, None)
        if value is not None and hasattr(value, "trace_contents"):
            return value
    return None


def _tokens(text: str) -> int:
    from llama_index_memory_hierarchy.text import count_tokens

    return count_tokens(text)


def _text(message: Any) -> str:
    from llama_index_memory_hierarchy.messages import message_text

    return message_text(message)


# --------------------------------------------------------------------------- per-operation summaries
# Each takes the call's arguments and result and returns (event class, counts, contents).
def _put(args: dict[str, Any], result: Any) -> tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]:
    texts = [_text(m) for m in args.get("messages") or []]
    return MemoryPutEvent, {"messages": len(texts), "tokens": sum(map(_tokens, texts))}, {"messages": texts}


def _get(args: dict[str, Any], result: Any) -> tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]:
    messages = list(result or [])
    texts = [_text(m) for m in messages]
    # get() adds the memory message right after the latest user message: the last system message
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role.value == "system"), None)
    injected = at is not None
    counts = {
        "messages": len(messages),
        "history_messages": len(messages) - int(injected),
        "memory_message": injected,
        "memory_tokens": _tokens(texts[at]) if at is not None else 0,
        "tokens": sum(map(_tokens, texts)),
    }
    return MemoryGetEvent, counts, {"input": args.get("input"), "messages": texts}


def _retrieve(args: dict[str, Any], result: Any) -> tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]:
    items = list(result or [])
    tiers = args.get("tiers") or args.get("memory_types") or []
    if isinstance(tiers, str):
        tiers = [tiers]
    names = sorted({str(getattr(getattr(t, "memory_type", t), "value", getattr(t, "memory_type", t))) for t in tiers})
    counts = {
        "results": len(items),
        "limit": int(args.get("limit") or 0),
        "tiers": names,
        "memory_ids": [i.id for i in items],
        "top_score": items[0].score if items else None,
    }
    return MemoryRetrieveEvent, counts, {"query": args.get("query"), "results": [i.content for i in items]}


def _consolidate(args: dict[str, Any], result: Any) -> tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]:
    reflection = getattr(result, "reflection", None)
    counts = {
        "promoted": len(result.promoted),
        "distilled": len(result.distilled),
        "facts": len(result.facts),
        "summaries": len(result.summaries),
        "insights": len(getattr(reflection, "insights", None) or []),
        "method": result.method,
        "session_id": args.get("session_id"),
    }
    return MemoryConsolidationEvent, counts, {}


def _forget(args: dict[str, Any], result: Any) -> tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]:
    counts = {
        "strategy": result.strategy,
        "dry_run": result.dry_run,
        "forgotten": result.total,
        "considered": sum(t.considered for t in result.tiers.values()),
        "per_tier": {name: t.count for name, t in result.tiers.items()},
    }
    return MemoryForgetEvent, counts, {"forgotten": [i.content for t in result.tiers.values() for i in t.items]}


def _delete(args: dict[str, Any], result: Any) -> tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]:
    counts = {
        "requested": len(result.deleted) + len(result.not_found),
        "deleted": len(result.deleted),
        "not_found": len(result.not_found),
        "derived": len(result.derived),
        "facts": result.facts,
        "summaries_regenerated": len(result.summaries_regenerated),
    }
    return MemoryDeleteEvent, counts, {}


def _erase(args: dict[str, Any], result: Any) -> tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]:
    counts = {"rows": result.total_rows, "live_memories": result.live_memories, "compacted": result.compacted}
    return MemoryEraseEvent, counts, {}


_SUMMARIES: dict[str, Callable[[dict[str, Any], Any], tuple[type[MemoryEvent], dict[str, Any], dict[str, Any]]]] = {
    "put": _put,
    "get": _get,
    "retrieve": _retrieve,
    "consolidate": _consolidate,
    "forget": _forget,
    "delete": _delete,
    "erase_user": _erase,
}


def _span_arguments(operation: str, user: str, session_id: str | None) -> inspect.BoundArguments:
    """What span handlers see as the span's inputs: the operation and whose, never the raw arguments."""

    def memory_operation(operation: str, user: str, session_id: str | None) -> None:
        """Signature of the bound arguments handed to span handlers."""

    return inspect.signature(memory_operation).bind(operation, user, session_id)


def _heard() -> bool:
    """Whether a handler that does something (LlamaIndex's root has null ones) would see this package's events or
    spans, on its dispatcher or a parent it propagates to."""
    current: Any = dispatcher
    while current is not None:
        handlers = [*current.event_handlers, *current.span_handlers]
        if any(not isinstance(h, (NullEventHandler, NullSpanHandler)) for h in handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def traced(operation: str) -> Callable[[F], F]:
    """Decorate a memory coroutine: a span around it and, on success, one event with counts and duration."""
    summarise = _SUMMARIES[operation]

    def decorate(func: F) -> F:
        signature = inspect.signature(func)

        @functools.wraps(func)
        async def run(*args: Any, **kwargs: Any) -> Any:
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            arguments = dict(call.arguments)
            owner = next(iter(arguments.values()), None)
            if isinstance(owner, (list, tuple)) and owner:  # afuse_tiers(tiers, ...): the first tier
                owner = owner[0]
            config = _config_of(owner)
            with_contents = bool(config is not None and config.trace_contents)
            user_id = arguments.get("user_id") or getattr(owner, "user_id", None)
            if user_id is None:
                user_id = getattr(getattr(owner, "deps", None), "user_id", None)
            user = str(user_id) if with_contents else _digest(user_id)
            session_id = getattr(owner, "session_id", None)
            if session_id is None:
                session_id = getattr(getattr(owner, "deps", None), "session_id", None)
            name = type(owner).__name__ if "self" in arguments else "memory"
            span_id = f"{name}.{operation}-{uuid.uuid4()}"
            bound = _span_arguments(operation, user, session_id)
            token = active_span_id.set(span_id)
            parent = None if token.old_value is Token.MISSING else token.old_value
            dispatcher.span_enter(id_=span_id, bound_args=bound, parent_id=parent, tags=active_instrument_tags.get())
            start = time.perf_counter()
            try:
                result = await func(*args, **kwargs)
            except BaseException as exc:  # the error's type only: its message may quote the input
                dispatcher.event(SpanDropEvent(span_id=span_id, err_str=type(exc).__name__))
                dispatcher.span_drop(id_=span_id, bound_args=bound, err=exc)
                active_span_id.reset(token)
                raise
            event = None
            try:
                if _heard():  # else nobody would see the event: its counts (tokens of every message) are skipped
                    event_class, counts, contents = summarise(arguments, result)
                    event = event_class(
                        operation=operation,
                        user=user,
                        session_id=counts.pop("session_id", session_id),
                        duration_ms=round((time.perf_counter() - start) * 1000, 3),
                        contents=contents if with_contents else None,
                        **counts,
                    )
                    dispatcher.event(event)
            except Exception:  # tracing never breaks a memory operation
                logger.warning("instrumentation of %s failed", operation, exc_info=True)
            dispatcher.span_exit(id_=span_id, bound_args=bound, result=event)
            active_span_id.reset(token)
            return result

        return run  # type: ignore[return-value]

    return decorate
