"""Token Recycling (beyond/recycling.py): after a pass every token read has as its row the top k of the oracle's
logits after it; the tree follows the template through the matrix; greedy verification gives greedy decoding's
text on random checkpoints and the learned pair, with a fresh matrix and with one kept across runs."""

import numpy as np
import pytest

import beyond.recycling as rc
from beyond.recycling import (EMPTY, TEMPLATE, RecyclingDetails, check_template, draft_from_table, new_table, recycling_generate,
                              template_parents, update_table)
from beyond.sequoia import expected_tokens
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt

TEMPLATES = {"default": TEMPLATE, "chain": ([0], [0, 0], [0, 0, 0]), "wide": ([0], [1], [2], [3], [4], [5], [6], [7]),
             "one": ([0],)}


def test_the_update_writes_the_top_k_of_each_row():
    table = new_table(6, 3)
    logits = np.array([[0, 5, 1, 4, 2, 3], [9, 8, 7, 0, 0, 0], [1, 1, 1, 1, 5, 0]], np.float32)
    assert update_table(table, [2, 4, 2], logits) == 2
    assert table[4].tolist() == [0, 1, 2]
    assert table[2].tolist()[0] == 4  # the later row of token 2 overwrote the earlier one
    assert (table[[0, 1, 3, 5]] == EMPTY).all()


def test_the_tree_follows_the_template_through_the_table():
    table = new_table(10, 3)
    table[1] = [2, 3, 4]
    table[2] = [5, 6, 7]
    paths = sorted([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)], key=lambda p: (len(p), p))
    nodes, ranks = draft_from_table(table, 1, paths)
    # (1,) is 3 and (2,) is 4, whose rows are empty: (1, 0) is not drafted; (0, 0) is 5, whose row is empty too.
    assert [(n.token, n.parent, n.depth) for n in nodes] == [(2, -1, 1), (3, -1, 1), (4, -1, 1), (5, 0, 2), (6, 0, 2)]
    assert ranks == [0, 1, 2, 0, 1]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("template, n_successors", [("default", 4), ("default", 8), ("chain", 1), ("chain", 4), ("wide", 8),
                                         ("one", 1)])
def test_greedy_text_is_greedy_decodings(oracle, seed, template, n_successors):
    ids = prompt(oracle, 8, seed)
    want = list(greedy_generate(oracle, ids, 30))
    table = new_table(oracle.vocab_size, n_successors)
    for run in range(2):  # a fresh matrix, then the same one again, warm
        stats = Stats(trace=[])
        got = list(recycling_generate(oracle, ids, 30, template=TEMPLATES[template], n_successors=n_successors, table=table, stats=stats))
        assert_same_greedy(want, got, oracle, ids)
        for r in stats.trace:
            assert r.cached["oracle"] == r.context_length + len(r.new) - 1 and isinstance(r.details, RecyclingDetails)
            assert len(r.drafted) <= len(TEMPLATES[template])
    assert stats.accepted > 0  # warm, the matrix knows this text


def test_after_a_pass_each_row_is_the_top_k_of_the_oracles_logits(oracle):
    """Every row a run wrote equals the top k of the oracle's own logits after that token where the run last read it,
    recomputed by a plain forward pass over the text and the node's path (the root's: the text itself)."""
    ids = prompt(oracle, 8, 2)
    table = new_table(oracle.vocab_size, 4)
    list(recycling_generate(oracle, ids, 20, n_successors=4, table=table))  # warm the matrix: the second run drafts
    stats = Stats(trace=[])
    out = list(recycling_generate(oracle, ids, 20, n_successors=4, table=table, stats=stats))
    read = {}  # token -> the context it was last read in (a later reading overwrote its row)
    for r in stats.trace:
        text = ids + out[:r.context_length - len(ids)]
        read[text[-1]] = text
        for i in range(len(r.drafted)):
            path, at = [], i
            while at != -1:
                path.append(r.drafted[at])
                at = r.details.parents[at]
            read[r.drafted[i]] = text + path[::-1]
    assert stats.drafted > 0
    checked = 0
    for token, context in read.items():
        logits = oracle.forward(context)[-1]
        order = np.argsort(-logits, kind="stable")
        if logits[order[3]] - logits[order[4]] < 1e-4:
            continue  # a near-tie at the k-th place: another kernel may round it the other way
        assert set(table[token].tolist()) == set(order[:4].tolist())
        assert all(logits[a] >= logits[b] - 1e-4 for a, b in zip(table[token], table[token][1:]))  # best first
        checked += 1
    assert checked >= len(read) - 1 and checked >= 5


def test_the_row_test_catches_an_update_off_by_one(oracle, monkeypatch):
    """Negative control: writing each row from the logits of the position before (the parent's) breaks the rows."""
    real = rc.update_table
    monkeypatch.setattr(rc, "update_table", lambda table, fed, logits: real(table, fed, np.roll(logits, 1, axis=0)))
    with pytest.raises(AssertionError):
        test_after_a_pass_each_row_is_the_top_k_of_the_oracles_logits(oracle)


def test_the_equality_test_catches_a_walk_that_keeps_a_wrong_branch(oracle, monkeypatch):
    monkeypatch.setattr(rc, "accepted_path", lambda nodes, choice: [0] if nodes else [])
    ids = prompt(oracle, 8, 0)
    table = new_table(oracle.vocab_size, 8)
    list(recycling_generate(oracle, ids, 10, table=table))
    assert list(recycling_generate(oracle, ids, 24, table=table)) != list(greedy_generate(oracle, ids, 24))


@pytest.mark.parametrize("n_new", range(0, 5))
def test_exactly_n_new_tokens(oracle, n_new):
    ids = prompt(oracle, 5, 0)
    assert list(recycling_generate(oracle, ids, n_new)) == list(greedy_generate(oracle, ids, n_new))


def test_bad_settings_are_refused(oracle):
    for bad in ({"n_successors": 0}, {"template": ()}, {"template": ([0, 0],)}, {"template": ([8],)}, {"template": ([-1],)},
                {"table": new_table(5, 8)}):
        with pytest.raises(GenerationError):
            list(recycling_generate(oracle, [1, 2], 4, **bad))
    check_template(TEMPLATE, 8)


def test_the_prediction_from_the_template():
    parents = template_parents(TEMPLATE)
    assert len(parents) == 15 and parents[:4] == [-1] * 4
    assert expected_tokens(parents, [1.0] + [0.0] * 7) == 5.0  # rank 1 always right: the deepest chain, 4 + 1


@pytest.mark.parametrize("template", ["default", "chain"])
def test_greedy_text_on_the_learned_pair(demo_dirs, template):
    from workbench.speed.accelerate import load_fast
    oracle = load_fast(demo_dirs["oracle"])
    ids = [464, 2163, 5860, 257, 1351]
    want = list(greedy_generate(oracle, ids, 40))
    table = new_table(oracle.vocab_size)
    stats = Stats()
    for _ in range(2):
        assert_same_greedy(want, list(recycling_generate(oracle, ids, 40, template=TEMPLATES[template], table=table,
                                                         stats=stats)), oracle, ids)
    assert stats.accepted > 0
