"""How the newest methods' rounds are told (workbench/methods/): SpecDec++'s stop and traversal verification's walk,
each in one line from its round's record."""

from beyond.specdec_pp import SpecDecDetails
from beyond.traversal import TraversalDetails
from workbench.methods.sampling import specdec_reason_line
from workbench.methods.trees import traversal_reason_line


def show(ids):
    return " ".join(f"#{t}" for t in ids)


def test_specdec_says_why_drafting_stopped():
    d = SpecDecDetails(8, 2, [], max_risk=0.3, chances=[0.9, 0.7], stop="head")
    assert specdec_reason_line(d) == ("SpecDec++: a_1=0.90, a_2=0.70: 1 - Π a = 0.37 > γ = 0.3, drafting stopped "
                                      "after 2 drafts")
    d = SpecDecDetails(2, 2, [], max_risk=0.5, chances=[0.9, 0.8], stop="n_draft")
    assert specdec_reason_line(d) == "SpecDec++: a_1=0.90, a_2=0.80: 1 - Π a = 0.28 <= γ = 0.5; 2 drafts, the most a round"


def test_traversal_tells_its_walk_from_the_leaves():
    d = TraversalDetails([-1, 0], [], [0.5, 0.5], tests=[
        {"node": 1, "token": 9, "w": 0.25, "r": 0.5, "passed": False, "deleted": 0},
        {"node": 0, "token": 8, "w": 0.2, "r": 0.7, "passed": False, "deleted": 1}],
        last={"token": 4, "node": -1, "from": "residual", "prob": 0.5})
    assert traversal_reason_line(d, show) == (
        "from the leaves: node 1 #9 w=0.25 r=0.5 fails, node 0 #8 w=0.2 (after 1 child subtree rejected) r=0.7 fails; "
        "kept 0 drafts: #4 drawn from the root's residual (prob 0.5)")
