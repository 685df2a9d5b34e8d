"""What a run's model card states about it: its phases and the claims' verdicts on its saved analysis
(the ``export`` command hands these rows to :func:`assign_add.interop.export.export_run`)."""

from __future__ import annotations

from assign_add.analysis.dynamics import phase_marks
from assign_add.io import read_json_object
from assign_add.report.claims import BY_ID, evaluate_claims
from assign_add.run import RunDir


def phase_rows(run: RunDir) -> list[tuple[str, str]]:
    """(phase, step) from the run's training curves, for the model card."""
    records = run.metrics() if run.exists() else []
    if not records:
        return []
    last = records[-1]["step"]
    return [(k, f"{v:,}" if v is not None else f"not seen by {last:,}") for k, v in phase_marks(records).items()]


def claim_rows(run: RunDir) -> list[tuple[str, str, str]]:
    """(claim, statement, verdict) from the run's saved analysis, for the model card (none without one)."""
    path = run.root / "analysis.json"
    if not path.is_file():
        return []
    results = evaluate_claims(read_json_object(path, "analysis.json"), robustness=False)
    return [(cid, BY_ID[cid].statement, r.verdict) for cid, r in results.items()]
