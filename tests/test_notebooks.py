"""Every notebook in ``notebooks/`` runs top to bottom, offline, on the embedded default.

Each runs with nbclient in a fresh kernel (this interpreter) in a temporary working folder,
with a per-notebook timeout. The committed notebooks must carry no outputs (they are written
by ``scripts/make_notebooks.py``). ``pytest --nbmake notebooks/`` runs them the same way.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
#: Seconds for a whole notebook (each takes seconds to a minute; model loading included).
NOTEBOOK_TIMEOUT = 300


def test_notebooks_exist() -> None:
    names = {path.name for path in NOTEBOOKS}
    for topic in ("quickstart", "tiers", "knowledge_graph", "knowledge_base", "lifecycle", "scaling_out"):
        assert any(topic in name for name in names), f"no notebook about {topic}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stripped(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: outputs committed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=NOTEBOOK_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError naming the cell and the error
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
