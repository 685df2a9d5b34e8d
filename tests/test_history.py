"""Every criterion has a history, and its code cannot change without a new entry."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from assign_add.report.claims import CLAIMS
from assign_add.report.history import CRITERION_CODE, HISTORY, INTRODUCED, criterion_hash
from conftest import REPO


def test_every_claim_has_a_history_starting_when_it_was_written():
    assert set(HISTORY) == {c.id for c in CLAIMS} == set(CRITERION_CODE)
    for cid, changes in HISTORY.items():
        assert changes[0] == INTRODUCED or changes[0].what.startswith("criterion written before"), cid
        dates = [c.date for c in changes]
        assert dates == sorted(dates), f"{cid}: history out of order"
        assert all(c.what and c.data_seen.split(":")[0] in ("no", "yes") for c in changes), cid


@pytest.mark.parametrize("cid", [c.id for c in CLAIMS])
def test_criterion_code_matches_its_last_history_entry(cid):
    now, recorded = criterion_hash(cid), HISTORY[cid][-1].source_hash
    assert now == recorded, (
        f"{cid}'s criterion code changed (hash {now}, last recorded {recorded}): add a Change to "
        f"report/history.py saying what changed, when, in which commit, and whether its data had been seen, "
        f"with source_hash={now!r}")


def test_a_changed_criterion_changes_its_hash(monkeypatch):
    import assign_add.report.history as H

    before = criterion_hash("C5")
    monkeypatch.setattr(H, "source_of", lambda fn: H.inspect.getsource(fn) + ("# edited" if fn.__name__ == "c5" else ""))
    assert criterion_hash("C5") != before and criterion_hash("C4") == HISTORY["C4"][-1].source_hash


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="no git checkout")
def test_every_commit_named_in_a_history_exists():
    shallow = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"], capture_output=True,
                             text=True).stdout.strip()
    if shallow != "false":
        pytest.skip("a shallow clone does not hold the older commits")
    commits = {c.commit for changes in HISTORY.values() for c in changes}
    missing = [c for c in sorted(commits)
               if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{c}^{{commit}}"],
                                 capture_output=True).returncode != 0]
    assert not missing, f"commits not in this repository: {missing}"
