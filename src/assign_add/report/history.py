"""Every claim's criterion with its history: when it changed, in which commit, what changed, and whether
the data it is judged on had been seen before the change.

A criterion is the code that turns measurements into a verdict: the claim's function in
:mod:`assign_add.report.claims` and the helpers it decides with.  Each history's last entry stores a
hash of that code (:func:`criterion_hash`); a test fails when the code changes without a new entry,
so no criterion is rewritten silently.  Number cuts keep their own record (``Cut.previous`` in
:mod:`assign_add.report.cuts`), and the report shows the verdict under a cut's earlier value.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from typing import Callable

from assign_add.analysis import spike
from assign_add.report import claims as C
from assign_add.report import verdicts as V
from assign_add.report.sweep_claims import sweep_claim


@dataclass(frozen=True)
class Change:
    date: str
    commit: str
    what: str
    data_seen: str  # "no", or "yes: what had been seen"
    source_hash: str = ""  # criterion_hash(cid) after the change (the last entry's is checked)


# the code each claim decides with: its function and the helpers that carry its criterion
CRITERION_CODE: dict[str, tuple[Callable, ...]] = {
    "B": (C.binding, C.is_bound),
    "C1": (C.c1,),
    "C2a": (C.c2a, spike.largest_rise),
    "C2b": (C.c2b, C._grid_changes, spike.grid_change, spike.on_grid),
    "C2c": (C.c2c, C._grid_changes, spike.grid_change, spike.on_grid),
    "C3": (C.c3, C.later_jump),
    "C4": (C.c4,),
    "C5": (C.c5,),
    "C6": (C.c6, sweep_claim),
    "C7": (C.c7, sweep_claim),
    "C8": (C.c8, C._cosine_gap),
    "C9": (C.c9,),
    "C10": (C.c10,),
    "C11": (C.c11, C.gradient_leads),
    "C1b": (C.c1b, C._circuits),
    "C3b": (C.c3b, C.c3, C.later_jump, spike.grid_change, spike.on_grid),
    "C5b": (C.c5b, C._c5_variable),
    "C5c": (C.c5c, C._c5_variable),
    "C12": (C.c12, C._circuits, C._ablated),
    "C13": (C.c13, C._circuits),
}
# the rules shared by every claim: how verdicts become one over seeds, and when a verdict is at the edge
SHARED_CODE: tuple[Callable, ...] = (C.evaluate_claims, C.mark_edge, V.aggregate)

INTRODUCED = Change("2026-12-02", "a88bd27", "criterion written with the reproduction's first report", "no")
# the causal claims and C5's variable forms: criteria committed before they were run on any source
CAUSAL_WRITTEN = ("2026-12-07", "d3cd36e", "criterion written before its measurement was run on any source (the "
                  "released checkpoints included)", "no")
EDGE_AND_PHASES = ("2026-12-07", "4132c89")
EDGE_TEXT = ("a verdict that flips when one of its cuts moves within ±20 % reads 'at the edge' (was: holds or "
             "does not hold, with 'fragile' beside it); over seeds 'holds in k of n judged' with a Wilson interval")
EDGE_SEEN = ("yes: a 3-seed main job on 2026-12-07 read C1 'mixed' from a seed at 0.899 against the 0.90 cut")

C2_BEFORE = [INTRODUCED,
             Change("2026-12-04", "2f78d66", "three parts (the spike; the routing circuit and the previous-token head "
                    "each changing fastest per step at the spike)", "yes: the released run's and seeds 42–44's curves"),
             Change("2026-12-04", "18dacd1", "rates over checkpoints at least 100 steps apart (500/512 gave "
                    "noise-driven rates); uneven checkpoint intervals said beside the verdict",
                    "yes: seeds 42–44's rates at steps 500 and 512")]
SPLIT = ("2026-12-07", "09f02f3")
SPLIT_SEEN = ("yes: the released run passed the previous-token part only because its checkpoints are 100 steps "
              "apart at the spike and 1,000 elsewhere (its argmax share was 0.91 at 2,001 and 1.00 at 3,001)")

SWEEP_RULE = ("2026-12-07", "79fcf8e", "the threshold's interval must also be at most C6_C7_MAX_WIDTH (0.20) wide, "
              "else 'not resolved'; no interval (one seed per value) is 'not resolved' (was: a one-seed threshold "
              "read as its own interval; any width passed once widened by ±0.10); fixed before the multi-seed "
              "sweeps were run", "yes: a one-seed r sweep's interval [0.113, 0.371], from a sweep no longer on record")

HISTORY: dict[str, list[Change]] = {
    "B": [INTRODUCED,
          Change("2026-12-04", "2a28fa0", "binding as its own row, censored at a run's last step ('not bound by T') "
                 "instead of failing", "yes: seeds that had not bound by 20,000 steps"),
          Change(*EDGE_AND_PHASES, "over seeds, the rule shared by every claim: " + EDGE_TEXT + " (B itself is an "
                 "event with a step, never at the edge)", EDGE_SEEN, "0dd7d70d4880a080")],
    "C1": [INTRODUCED,
           Change(*EDGE_AND_PHASES, "addition never reached by the end reads 'not finished by T' (was: does not "
                  "hold); " + EDGE_TEXT, EDGE_SEEN, "632bccb49c29a5ee")],
    "C2a": [*C2_BEFORE, Change(*SPLIT, "C2's first part as its own claim, read over 100-step intervals only "
                               "(the finest spacing every source has at its spike), with rise / (1 − accuracy "
                               "before) beside it; " + EDGE_TEXT, SPLIT_SEEN, "c4dc3c373094b492")],
    "C2b": [*C2_BEFORE, Change(*SPLIT, "C2's second part as its own claim: fastest change over equal 1,000-step "
                               "intervals on every source (was: per-step rates over uneven intervals); layer-2 routing "
                               "onto the summands as C10 reads it, the bound value alone shown", SPLIT_SEEN, "593955fa298c0ae1")],
    "C2c": [*C2_BEFORE, Change(*SPLIT, "C2's third part as its own claim: the previous-token mean weight's fastest "
                               "change over equal 1,000-step intervals on every source (was: per-step rates over "
                               "uneven intervals); its argmax share shown", SPLIT_SEEN, "fa96004dd4760635")],
    "C3": [INTRODUCED,
           Change("2026-12-04", "2f78d66", "judged per restricted (variable, side) curve, with a plateau after binding "
                  "before its jump; holds when any curve has a later jump",
                  "yes: seed 43's forbidden positions rose to 0.65 with the spike"),
           Change(*EDGE_AND_PHASES, "a curve still on its plateau at the end reads 'not finished by T' (was: does not "
                  "hold); " + EDGE_TEXT, "yes: seed 42's b-as-right-operand at 0.681 at 40,000, its refinement under "
                  "way from 20,200", "f02861633900c4f1")],
    "C4": [INTRODUCED,
           Change(*EDGE_AND_PHASES, "judged only once every restricted curve has reached the refinement level "
                  "(else 'not finished by T'; was: the final accuracy against the cut in every run); " + EDGE_TEXT,
                  "yes: seed 42's b-as-right-operand at 0.681 at 40,000, its refinement under way from 20,200", "d4453c39a0782f9c")],
    "C5": [INTRODUCED, Change(*EDGE_AND_PHASES, EDGE_TEXT, EDGE_SEEN, "fc2017eb11bb7807"),
           Change("2026-12-07", "694518a", "judged only once the addition phase finished (else 'not finished by T'; was: the final accuracy against the cut however short the run)", "yes: a 400-step smoke run read 'does not hold' before addition had happened", "d67f27ecaeb37ae5")],
    "C6": [INTRODUCED,
           Change("2026-12-03", "7b86be6", "from the sweep summary with its protocol and convergence flag", "yes: the f "
                  "sweep's first points"),
           Change(*EDGE_AND_PHASES, EDGE_TEXT, EDGE_SEEN, "c5c5104a1e333eac"),
           Change(*SWEEP_RULE, "354b4556daf4195a")],
    "C7": [INTRODUCED,
           Change("2026-12-03", "7b86be6", "from the sweep summary with its protocol and convergence flag", "yes: the r "
                  "sweep's first points"),
           Change(*EDGE_AND_PHASES, EDGE_TEXT, EDGE_SEEN, "d6aac08f93dcdbd8"),
           Change(*SWEEP_RULE, "68670ce57fea8780")],
    "C8": [INTRODUCED,
           Change("2026-12-04", "21b58c0", "made stricter: centred cosines above two nulls (shuffled; same prefix, other "
                  "sum) on training and held-out pairs, and the 1-/2-var grids' correlation with the 0-var grid (moved "
                  "here from C9)", "yes: raw cosines near 1 for shuffled pairs in the released run"),
           Change(*EDGE_AND_PHASES, EDGE_TEXT, EDGE_SEEN, "fbf70eb7dd40d628")],
    "C9": [INTRODUCED,
           Change("2026-12-04", "21b58c0", "against the initial weights' share of frequency neurons; the grid test moved "
                  "to C8", "yes: the released run's frequency neurons"),
           Change(*EDGE_AND_PHASES, EDGE_TEXT, EDGE_SEEN, "47ba08c8a34b09cf")],
    "C10": [INTRODUCED,
            Change("2026-12-04", "2f78d66", "with layer-2 routing accuracy", "yes: the released run's attention"),
            Change("2026-12-06", "dacaef5", "layer 2 routes both summands: the ='s top two keys are the summands' value "
                   "tokens (C10_SUMMANDS keeps the verdict under the earlier measure)",
                   "yes: routing to the bound value alone at 0.5 in runs that answer correctly"),
            Change(*EDGE_AND_PHASES, EDGE_TEXT, EDGE_SEEN, "06d3f2d7ce93c72a")],
    "C11": [INTRODUCED,
            Change("2026-12-03", "eed06ce", "narrowed to the checkpoints before binding where the theory's "
                   "preconditions hold (previous-token head; 1-var sequences whose = carries the variable), three "
                   "disjoint samples, the full-mixture figure beside it", "yes: the full-mixture gradients"),
            Change(*EDGE_AND_PHASES, "the gradient must predict the final QK₂ better than the checkpoint's own QK₂ "
                   "(by more than their spread over the disjoint samples, one comparison per window), else 'the blocks "
                   "form; the gradient does not lead them'; " + EDGE_TEXT,
                   "yes: in seeds 42 and 43 the checkpoint's own QK₂ predicted the final QK₂ as well as the gradient",
                   "519b159f6f582b8f")],
    "C3b": [Change("2026-12-07", "8142797", "criterion written before its measurement was run on any source "
                   "(the released checkpoints included)", "no", "a77a895336527b83"),
            Change("2026-12-07", "601f906", "a jump with no 1,000-step checkpoint interval around it is 'not measured' (was: "
                   "does not hold)", "yes: a --quick run's analysis of 12 released checkpoints, whose grid has no such "
                   "intervals, read 'does not hold'", "93f46eaf6e1061ff"),
            Change("2026-12-07", "a4eb5df", "routing that changes most in the interval holding binding no longer counts "
                   "as 'next to' a later jump (a counterexample now), and a jump inside binding's own interval is not "
                   "judged (switch cut C3B_APART_FROM_BINDING keeps the verdict under the rule as first written)",
                   "yes: on the released run the a and l curves passed only through binding's interval (5,001-6,001), "
                   "next to their jumps", "2cb04c5214b5cbf9")],
    "C1b": [Change(*CAUSAL_WRITTEN, "df4b9fe1df8bf9dc"),
            Change("2026-12-07", "a4eb5df", "a run needs a judged checkpoint before binding (the addition step or the "
                   "last before binding; the end only where the run never bound), else 'not measured' (was: judged on "
                   "the end alone)", "yes: the released run's verdict, which the change does not move (5,301 is judged)",
                   "a2780db3476385d4")],
    "C5b": [Change(*CAUSAL_WRITTEN, "98d02bb0fb61c73b")],
    "C5c": [Change(*CAUSAL_WRITTEN, "f904aa73b2d308b9")],
    "C12": [Change(*CAUSAL_WRITTEN, "07d9abb37b05b6fd")],
    "C13": [Change(*CAUSAL_WRITTEN, "aa99dc3a846be411"),
            Change("2026-12-07", "f9f0b1e", "the random-frequency null removes only its directions' part orthogonal to "
                   "the key frequencies' directions (C13_NULL_ORTHOGONAL keeps the verdict under the null as first "
                   "written)", "yes: on the released run the first null took 0-var held-out to 0.01, as the key "
                   "frequencies did", "6faec58eee7ff0b2"),
            Change("2026-12-07", "a4eb5df", "a non-finite interchange rate (no pair with different sums) is 'not "
                   "measured' (it counted as a pass)", "yes: the released run's verdict, which the change does not move",
                   "5da140c47e86c49a")],
}


def source_of(fn: Callable) -> str:
    return inspect.getsource(fn)


def criterion_hash(cid: str) -> str:
    """16 hex digits of SHA-256 over the claim's criterion code and the shared rules."""
    text = "\n".join(source_of(f) for f in (*CRITERION_CODE[cid], *SHARED_CODE))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def history_rows(cid: str) -> list[list[str]]:
    """The report's rows for one claim: date, commit, what changed, data seen before the change."""
    return [[c.date, c.commit, c.what, c.data_seen] for c in HISTORY[cid]]
