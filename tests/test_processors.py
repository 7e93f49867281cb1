"""The logits processors on tiny distributions whose answers can be worked out by hand."""

import numpy as np
import pytest

from decoding import GenerationError
from processors import (PROCESSORS, Processor, make_processor, nucleus_filtered, parse_processor, temperature_scaled,
                        top_k_filtered)
from gpt2 import softmax

# softmax(log x) = x / sum(x): logits whose probabilities are 0.1, 0.2, 0.3, 0.4
LOGITS = np.log(np.array([1, 2, 3, 4], np.float32))


def assert_probs(got, expected):
    """float32, the expected values, and exact zeros where the expected value is 0."""
    assert got.dtype == np.float32
    expected = np.asarray(expected, np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    assert ((got == 0) == (expected == 0)).all()


def test_multinomial_and_temperature():
    assert_probs(Processor()(LOGITS), [0.1, 0.2, 0.3, 0.4])
    assert_probs(Processor(temperature=0.5)(LOGITS), np.array([1, 4, 9, 16]) / 30)  # logits / 0.5 = log x^2
    assert_probs(Processor(temperature=2)(LOGITS), np.sqrt([1, 2, 3, 4]) / np.sqrt([1, 2, 3, 4]).sum())


@pytest.mark.parametrize("temperature", [1e-40, 1e-30, 1e-45, 1e-60])  # 1e-60 is 0 in float32
def test_a_tiny_temperature_approaches_greedy(temperature):
    logits = np.array([1.0, 3.0, 2.0, 0.0], np.float32)
    assert_probs(Processor(temperature)(logits), [0, 1, 0, 0])
    # Tied largest logits keep their shared mass (the limit as temperature -> 0).
    assert_probs(Processor(temperature)(np.array([0.0, 5.0, 5.0, 1.0], np.float32)), [0, 0.5, 0.5, 0])


def test_temperature_zero_is_exactly_greedy():
    assert_probs(Processor(0)(np.array([1.0, 3.0, 2.0, 0.0], np.float32)), [0, 1, 0, 0])
    assert_probs(Processor(0)(np.array([0.0, 5.0, 5.0, 1.0], np.float32)), [0, 1, 0, 0])  # the first argmax
    assert make_processor("greedy", temperature=0.7) == Processor(0)  # greedy ignores the temperature


def test_temperature_scaled_puts_the_largest_at_zero():
    scaled = temperature_scaled(np.array([1.0, 3.0, 2.0], np.float32), 0.5)
    assert scaled.dtype == np.float32 and scaled.tolist() == [-4.0, 0.0, -2.0]


def test_top_k():
    assert_probs(make_processor("topk", 2)(LOGITS), [0, 0, 3 / 7, 4 / 7])
    assert_probs(make_processor("topk", 1)(LOGITS), [0, 0, 0, 1])
    for k in (4, 5, 100):  # k >= V cuts nothing
        np.testing.assert_array_equal(make_processor("topk", k)(LOGITS), Processor()(LOGITS))
    # Logits tied with the k-th largest all survive.
    ties = np.array([1.0, 2.0, 2.0, 0.0], np.float32)
    assert (top_k_filtered(ties, 2) > -np.inf).tolist() == [False, True, True, False]
    assert (top_k_filtered(ties, 1) > -np.inf).tolist() == [False, True, True, False]
    assert (top_k_filtered(ties, 3) > -np.inf).tolist() == [True, True, True, False]


def test_nucleus():
    assert_probs(make_processor("nucleus", 0.5)(LOGITS), [0, 0, 3 / 7, 4 / 7])      # 0.4 before the 0.3: kept
    assert_probs(make_processor("nucleus", 0.75)(LOGITS), [0, 2 / 9, 3 / 9, 4 / 9])  # 0.7 before the 0.2: kept
    assert_probs(make_processor("nucleus", 1e-9)(LOGITS), [0, 0, 0, 1])             # a tiny p: the top token only
    np.testing.assert_array_equal(make_processor("nucleus", 1)(LOGITS), Processor()(LOGITS))
    # Tokens tied with the last one kept stay too.
    assert_probs(nucleus_filtered(np.array([0.1, 0.45, 0.45], np.float32), 1e-9), [0, 0.5, 0.5])
    assert_probs(nucleus_filtered(np.array([0.1, 0.2, 0.4, 0.2, 0.1], np.float32), 0.5), [0, 0.25, 0.5, 0.25, 0])
    assert_probs(nucleus_filtered(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], np.float32), 0.55),
                 [[0, 0.375, 0.625], [1, 0, 0]])


def test_top_k_then_nucleus():
    # top-2 leaves 3/7, 4/7; nucleus 0.5 then keeps 4/7 only (4/7 > 0.5 before the 3/7).
    assert_probs(make_processor("topknucleus", 2, 0.5)(LOGITS), [0, 0, 0, 1])
    assert_probs(make_processor("topknucleus", 3, 0.6)(LOGITS), [0, 0, 3 / 7, 4 / 7])  # 4/9 < 0.6 before 3/9
    assert_probs(make_processor("topknucleus", 3, 0.6, temperature=0.5)(LOGITS),      # 4, 9, 16 of 29:
                 [0, 0, 9 / 25, 16 / 25])                                               # 16/29 < 0.6 before 9/29


def test_the_steps_compose_in_hugging_faces_order():
    logits = np.random.default_rng(0).standard_normal((3, 2, 50)).astype(np.float32) * 3
    processor = make_processor("topknucleus", 10, 0.7, temperature=0.6)
    expected = nucleus_filtered(softmax(top_k_filtered(temperature_scaled(logits, 0.6), 10)), 0.7)
    np.testing.assert_array_equal(processor(logits), expected)


@pytest.mark.parametrize("spec", ["greedy", "multinomial", "topk 20", "nucleus 0.9", "topknucleus 20 0.9"])
@pytest.mark.parametrize("temperature", [1e-40, 0.7, 1.0, 3.0])
def test_every_processor_on_gpt2_sized_logits(spec, temperature):
    logits = np.random.default_rng(1).standard_normal((3, 50257)).astype(np.float32) * 10
    before = logits.copy()
    probs = parse_processor(spec, temperature=temperature)(logits)
    np.testing.assert_array_equal(logits, before)  # the input is not modified
    assert probs.dtype == np.float32 and probs.shape == logits.shape
    assert np.isfinite(probs).all() and (probs >= 0).all()
    np.testing.assert_allclose(probs.sum(axis=-1), 1, atol=1e-5)
    if spec == "greedy" or temperature == 1e-40:
        assert (probs.argmax(axis=-1) == logits.argmax(axis=-1)).all() and (probs.max(axis=-1) == 1).all()


def test_construction_from_names_and_strings():
    assert parse_processor("greedy") == Processor(0)
    assert parse_processor("multinomial", temperature=0.8) == Processor(0.8)
    assert parse_processor("topk 20") == Processor(top_k=20)
    assert parse_processor("  nucleus   0.9 ") == Processor(top_p=0.9)
    assert parse_processor("topknucleus 20 0.9", temperature="0.8") == Processor(0.8, 20, 0.9)
    assert make_processor("topknucleus", 20, 0.9, temperature=0.8) == Processor(0.8, 20, 0.9)
    for name in PROCESSORS:
        assert make_processor(name, *[{"top_k": 5, "top_p": 0.5}[f] for f in PROCESSORS[name]]).name == name
    # str shows what parse_processor reads back, then the temperature
    processor = Processor(0.8, 20, 0.9)
    assert str(processor) == "topknucleus 20 0.9, temperature 0.8" and str(Processor(0)) == "greedy"
    assert parse_processor(str(processor).split(",")[0], temperature=0.8) == processor


@pytest.mark.parametrize("spec, temperature, message", [
    ("beam", 1.0, "unknown processor 'beam'; the processors are: greedy, multinomial, topk, nucleus, topknucleus"),
    ("", 1.0, "unknown processor ''"),
    ("topk", 1.0, r"processor topk takes 1 value\(s\) \(topk <top_k>\), got 0"),
    ("greedy 3", 1.0, "processor greedy takes 0 value"),
    ("topknucleus 0.9 20", 1.0, "top_k must be a whole number, got '0.9'"),
    ("topk 2.5", 1.0, "top_k must be a whole number, got '2.5'"),
    ("topk 0", 1.0, "top_k must be a whole number >= 1, got 0"),
    ("nucleus 0", 1.0, r"top_p must be a number in \(0, 1\], got 0.0"),
    ("nucleus 1.5", 1.0, r"top_p must be a number in \(0, 1\]"),
    ("nucleus x", 1.0, "top_p must be a number, got 'x'"),
    ("multinomial", -1.0, "temperature must be a number >= 0, got -1.0"),
    ("multinomial", float("nan"), "temperature must be a number >= 0"),
    ("multinomial", "inf", "temperature must be a number >= 0, got inf"),
    ("multinomial", "hot", "temperature must be a number, got 'hot'"),
])
def test_bad_names_and_values(spec, temperature, message):
    with pytest.raises(GenerationError, match=message):
        parse_processor(spec, temperature=temperature)
