"""Every notebook in ``notebooks/`` is committed executed, with clean outputs, and still runs.

The committed notebooks are written by ``python scripts/make_notebooks.py --execute``: they must hold
exactly the cells the script defines, every code cell executed, no error, no stderr (progress bars)
and no machine path. Each notebook also runs again here with nbclient in a fresh kernel, offline, in a
temporary folder, and its cleaned outputs must have the same shape as the committed ones (the same
cells with output, of the same kinds), not the same bytes: timestamps, ids and scores move as the
library changes. ``pytest --nbmake notebooks/`` runs them the same way.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
REGENERATE = "python scripts/make_notebooks.py --execute"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("make_notebooks", ROOT / "scripts" / "make_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_notebooks = _script()


def shape(notebook: Any) -> list[tuple[str, ...]]:
    """Per code cell, the sorted kinds of its outputs (``stream:stdout``, ``execute_result``, ...)."""
    kinds = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            kinds.append(tuple(sorted({f"{o.output_type}:{o.get('name', '')}".rstrip(":") for o in cell.outputs})))
    return kinds


def test_notebooks_exist() -> None:
    names = {path.name for path in NOTEBOOKS}
    for topic in ("quickstart", "tiers", "knowledge_graph", "knowledge_base", "lifecycle", "scaling_out"):
        assert any(topic in name for name in names), f"no notebook about {topic}"
    assert names == set(make_notebooks.ALL), f"notebooks/ and scripts/make_notebooks.py differ: run {REGENERATE}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_executed_and_clean(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    expected = make_notebooks.build(make_notebooks.ALL[path.name])
    cells = [(c.cell_type, c.source) for c in notebook.cells]
    assert cells == [(c.cell_type, c.source) for c in expected.cells], f"{path.name}: cells changed; run {REGENERATE}"
    counts = [c.execution_count for c in notebook.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: not executed top to bottom; run {REGENERATE}"
    assert any(c.outputs for c in notebook.cells if c.cell_type == "code"), f"{path.name}: no outputs"
    text = nbformat.writes(notebook)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", f"{path.name}: an error is committed"
            assert output.get("name") != "stderr", f"{path.name}: stderr (progress bars, warnings) committed"
    for leak in ("/tmp/", "/home/", "/root/", "/Users/", str(ROOT), "\\u001b[", "it/s]"):
        assert leak not in text, f"{path.name}: {leak!r} in the outputs"
    # a link to a file of the run's temporary folder is dead once the notebook is saved
    assert "lmh-notebook-" not in text.replace('prefix=\\"lmh-notebook-\\"', ""), f"{path.name}: links a temporary file"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_with_outputs_of_the_same_shape(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    make_notebooks.execute(notebook, tmp_path)  # raises CellExecutionError naming the cell and the error
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    committed = nbformat.read(path, as_version=4)
    assert shape(make_notebooks.clean(notebook, tmp_path)) == shape(committed), (
        f"{path.name}: outputs changed shape; run {REGENERATE} and commit"
    )
    if path.name == "01_quickstart.ipynb":  # the point of the quickstart: session 2 answers from session 1
        printed = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
        assert "I remember: I'm Zhang San" in printed, "the quickstart's second session did not recall the first"
