"""The inspector's Instructions page: the standing instructions (current and replaced) and the learned procedures."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.tiers.procedural import is_current
from llama_index_memory_hierarchy.ui.inspector import Inspector

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


async def procedural(request: Request) -> Response:
    """GET: the standing instructions (current, then replaced) and the learned procedures; POST (edits): add
    an instruction as ``add_instruction`` would (a newer rule on the same matter replaces the older)."""
    app: Inspector = request.app.state.inspector
    tier = app.memory.procedural
    form: dict[str, str] = {}
    error = None
    if request.method == "POST":
        form = await app.check_edit(request)
        try:
            condition = (form.get("condition") or "").strip() or None
            memory_id = await tier.aadd_instruction(form.get("text") or "", condition=condition, origin="inspector")
        except MemoryValidationError as exc:
            error = str(exc)
        else:
            logger.info("inspector: added instruction %s", memory_id)
            return RedirectResponse("/procedural", status_code=303)
    rules = await tier.ainstructions(include_history=True)
    return app.page(
        request,
        "procedural.html",
        status_code=400 if error else 200,
        title="Instructions and procedures",
        standing=[r for r in rules if is_current(r)],
        replaced=[r for r in rules if not is_current(r)],
        procedures=await tier.aprocedures(),
        form=form,
        error=error,
    )
