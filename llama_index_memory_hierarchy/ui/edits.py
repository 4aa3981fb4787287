"""The inspector's edits (with ``--allow-edits``): create, edit, pin, forget after a confirmation page, and
forget everything."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.browse import tags_of, validate_tags
from llama_index_memory_hierarchy.types import (
    parse_moment,
    validate_content,
    validate_importance,
)
from llama_index_memory_hierarchy.ui.inspector import Inspector, local_target

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.types import MemoryItem

logger = logging.getLogger(__name__)


#: What the create form may write (perceptions come from files, working notes from a session).
CREATE_TIERS = ("semantic", "episodic")


async def forget_page(request: Request) -> Response:
    """GET /memory/{id}/forget: what forgetting it removes, and the button that does it (edits only)."""
    app: Inspector = request.app.state.inspector
    if not app.allow_edits:
        raise HTTPException(403, "read-only: start the inspector with --allow-edits to change memories")
    item = await app.find(request.path_params["memory_id"])
    relations = await app.memory.manager.arelations(item)
    back = local_target(request.query_params.get("next"), f"/memory/{item.id}")
    return app.page(request, "forget.html", title="Forget a memory", item=item, relations=relations, back=back)


async def create(request: Request) -> Response:
    """GET /new: the form; POST /new: store a memory as an agent's ``remember`` would, then show it."""
    app: Inspector = request.app.state.inspector
    if request.method == "GET":
        if not app.allow_edits:
            raise HTTPException(403, "read-only: start the inspector with --allow-edits to change memories")
        return app.page(request, "new.html", title="New memory", tiers=CREATE_TIERS, form={}, error=None)
    form = await app.check_edit(request)
    try:
        tier = form.get("tier") or "semantic"
        if tier not in CREATE_TIERS:
            raise MemoryValidationError("tier", f"must be one of {', '.join(CREATE_TIERS)}")
        when = (form.get("occurred_at") or "").strip()
        metadata: dict[str, Any] = {"source": "inspector"}
        if tags := _form_tags(form):
            metadata["tags"] = tags
        memory_id = await app.memory.tiers([tier])[0].aadd(
            validate_content(form.get("content")),
            importance=_importance(form),
            metadata=metadata,
            timestamp=parse_moment(when, "occurred_at") if when else None,
        )
    except MemoryValidationError as exc:
        return app.page(
            request, "new.html", status_code=400, title="New memory", tiers=CREATE_TIERS, form=form, error=str(exc)
        )
    logger.info("inspector: created %s memory %s", tier, memory_id)
    return RedirectResponse(f"/memory/{memory_id}", status_code=303)


def _importance(form: dict[str, str]) -> float:
    try:
        return validate_importance(float(form.get("importance") or 0.5), "importance")
    except ValueError:
        raise MemoryValidationError("importance", "must be a number from 0 to 1") from None


def _form_tags(form: dict[str, str]) -> list[str]:
    """The comma-separated tags of a form."""
    return validate_tags([t for t in (form.get("tags") or "").split(",") if t.strip()])


async def edit(request: Request) -> Response:
    """POST /memory/{id}/pin, /unpin or /forget, then back to the page the form was on."""
    app: Inspector = request.app.state.inspector
    action = request.path_params["action"]
    if action not in ("pin", "unpin", "forget", "edit"):
        raise HTTPException(404, "not found")
    form = await app.check_edit(request)
    item = await app.find(request.path_params["memory_id"])
    manager = app.memory.manager
    if action == "edit":
        return await _edit(request, app, item, form)
    if action == "pin":
        await manager.apin(item.id)
    elif action == "unpin":
        await manager.aunpin(item.id)
    else:
        report = await manager.aforget_memories([item.id])  # with what was derived only from it
        logger.info("inspector: forgot %s memory %s (%d derived)", item.memory_type.value, item.id, len(report.derived))
    target = local_target(form.get("next"), f"/memory/{item.id}" if action != "forget" else "/")
    if action == "forget" and target.startswith(f"/memory/{item.id}"):
        target = "/"
    return RedirectResponse(target, status_code=303)


async def _edit(request: Request, app: Inspector, item: MemoryItem, form: dict[str, str]) -> Response:
    """Apply the edit form: content, importance and tags in one update, then the pin."""
    tier = app.memory.tiers([item.memory_type])[0]
    try:
        content = validate_content(form.get("content"))
        importance, tags = _importance(form), _form_tags(form)
        await tier.aupdate(  # an instruction's new text is read again (see ProceduralMemory.aupdate)
            item.id,
            content=content if content != item.content else None,
            importance=importance if importance != item.importance else None,
            metadata={"tags": tags} if tags != tags_of(item) else None,
        )
    except MemoryValidationError as exc:
        relations = await app.memory.manager.arelations(item)
        return app.page(
            request,
            "memory.html",
            status_code=400,
            title="Memory",
            item=item,
            explanation=[],
            relations=relations,
            tags=tags_of(item),
            error=str(exc),
        )
    pinned = form.get("pinned") == "on"
    if pinned != item.pinned:
        await app.memory.manager.apin(item.id, pinned)
    logger.info("inspector: edited %s memory %s", item.memory_type.value, item.id)
    return RedirectResponse(f"/memory/{item.id}", status_code=303)


async def forget_everything(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    if request.method == "GET":
        return app.page(request, "forget_everything.html", title="Forget everything", report=None, error=None)
    form = await app.check_edit(request)
    if form.get("confirm") != app.user_id:
        return app.page(
            request,
            "forget_everything.html",
            status_code=400,
            title="Forget everything",
            report=None,
            error="type the user id exactly to confirm; nothing was erased",
        )
    report = await app.memory.manager.aforget_user()
    return app.page(request, "forget_everything.html", title="Forget everything", report=report, error=None)
