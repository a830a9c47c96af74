"""`plan_calls`: every sentence once, a long one's windows together, the limits kept, rows
nearly full; no TensorFlow."""

import random

import pytest

from keras_elmo.embedding.row_packing import (FRAME, ROW_OVERHEAD, Piece, call_cost,
                                              call_shape, piece_size, plan_calls)
from keras_elmo.text.sentence_windows import windows


def _check(plan, lengths, max_rows, max_positions, max_length):
    """The plan's invariants; returns {sentence: call index}."""
    seen = {}
    for number, call in enumerate(plan):
        assert call and all(call), call  # no empty call, no empty row
        rows, steps = call_shape(call)
        sentences = {p.sentence for row in call for p in row}
        alone = len(sentences) == 1
        assert rows <= max_rows or alone, (rows, max_rows)
        if max_positions is not None:
            assert rows * steps <= max_positions or rows == 1 or alone, (rows, steps)
        for sentence in sentences:
            assert sentence not in seen, f"sentence {sentence} in two calls"
            seen[sentence] = number
            pieces = [(p.start, p.stop) for row in call for p in row if p.sentence == sentence]
            assert pieces == windows(lengths[sentence], max_length)
    assert sorted(seen) == [i for i, n in enumerate(lengths) if n > 0]
    return seen


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_rows, max_positions, max_length",
                         [(64, 8192, 512), (4, 40, 6), (3, None, 5), (1, 30, 512), (16, 7, 4)])
def test_every_sentence_once_within_the_limits(seed, max_rows, max_positions, max_length):
    rng = random.Random(seed)
    lengths = [rng.choice([0, 1, 2, 3, 8, 20, 45, 130]) + rng.randrange(5) * (seed % 2)
               for _ in range(rng.randrange(1, 300))]
    plan = plan_calls(lengths, max_rows, max_positions, max_length)
    _check(plan, lengths, max_rows, max_positions, max_length)


def test_rows_are_nearly_full_on_text_like_lengths():
    """Zipf-like sentence lengths (a long tail): the calls' rows x steps hold the pieces with
    little room left, and cost less than one row per sentence in length order, padded to
    each batch's longest, under the same limits."""
    rng = random.Random(7)
    lengths = [min(int(rng.paretovariate(2.0) * 12), 150) for _ in range(2048)]
    plan = plan_calls(lengths, max_rows=64, max_positions=8192, max_length=512)
    _check(plan, lengths, 64, 8192, 512)
    held = sum(n + FRAME for n in lengths if n)
    room = sum(rows * steps for rows, steps in map(call_shape, plan))
    assert held / room > 0.97, held / room
    padded, batch = 0, []
    for n in sorted(n for n in lengths if n) + [None]:  # greedy batches, longest last
        if batch and (n is None or (len(batch) + 1) * (n + FRAME) > 8192 or len(batch) == 64):
            padded += (ROW_OVERHEAD + len(batch)) * (batch[-1] + FRAME)
            batch = []
        batch.append(n)
    assert sum(call_cost(call) for call in plan) < 0.95 * padded  # 0.92 here


def test_no_budget_is_one_call_of_the_rows():
    lengths = [5, 1, 9, 3, 3, 0, 7]
    plan = plan_calls(lengths, max_rows=3, max_positions=None, max_length=512)
    assert len(plan) == 1 and len(plan[0]) == 3
    _check(plan, lengths, 3, None, 512)
    # as many rows as pieces: each piece its own row unless two fit beside the longest
    plan = plan_calls(lengths, max_rows=6, max_positions=None, max_length=512)
    assert len(plan) == 1 and call_shape(plan[0])[1] == 9 + FRAME


def test_long_sentences_run_as_their_windows_in_one_call():
    plan = plan_calls([3, 11, 2], max_rows=8, max_positions=100, max_length=4)
    assert plan[-1] == [[Piece(1, 0, 4)], [Piece(1, 4, 8)], [Piece(1, 8, 11)]]
    assert piece_size(Piece(1, 8, 11)) == 5
    _check(plan, [3, 11, 2], 8, 100, 4)


def test_examples_and_edges():
    plan = plan_calls([3, 0, 5, 2], max_rows=2, max_positions=None, max_length=512)
    assert [[[p.sentence for p in row] for row in call] for call in plan] == [[[2], [0, 3]]]
    assert plan_calls([], 4, None, 512) == []
    assert plan_calls([0, 0], 4, 100, 512) == []
    # a piece over the budget runs alone, in a row of its own
    assert plan_calls([50, 1], 4, 10, 512) == [[[Piece(0, 0, 50)]], [[Piece(1, 0, 1)]]]


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_rows=0, max_positions=None, max_length=4), "max_rows must be a positive int"),
    (dict(max_rows=2, max_positions=0, max_length=4), "max_positions must be a positive int"),
    (dict(max_rows=2, max_positions=None, max_length=0), "max_length must be a positive int"),
])
def test_bad_limits_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_calls([1, 2], **kwargs)
