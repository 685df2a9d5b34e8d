"""The walkthrough notebook runs top to bottom on the released checkpoints (no cell may raise), and
is kept in git without outputs."""

from __future__ import annotations

import nbformat
import pytest

from conftest import REPO

NOTEBOOK = REPO / "notebooks" / "walkthrough.ipynb"


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert 8 <= len(code) <= 15
    assert all(not c.outputs and c.execution_count is None for c in code), "strip outputs before committing"


def _tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_notebook_executes_on_the_released_checkpoints_without_writing(monkeypatch, released_run):
    """On the session's imported released run (ASSIGN_ADD_RUN): every cell runs, and the run directory is
    byte for byte what it was (the notebook uses only the read-only API)."""
    from nbclient import NotebookClient

    monkeypatch.setenv("ASSIGN_ADD_RUN", str(released_run.root))
    before = _tree(released_run.root)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()  # raises on any cell error
    assert _tree(released_run.root) == before, "the notebook wrote into the run"
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    assert len(images) >= 3, "the toolkit's figures are drawn"
    assert html, "CircuitsVis renders the attention view"
    text = "".join(o.get("text", "") for o in outputs)
    assert "binding 5401" in text and "jumps at binding" in text
    assert "c=1, b=17, a=42, b+19= " in text, "predict answers plain prompts"
