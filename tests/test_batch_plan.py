"""`plan_batches`: every sentence once and in order, the limits kept, rows on the quantum,
and the least cost of all allowed cuttings (checked against trying every one)."""

import itertools

import numpy as np
import pytest

from keras_elmo.embedding.batch_plan import ROW_OVERHEAD, ROW_QUANTUM, plan_batches


def cost(plan, widths, rows):
    """The plan's cost under the module's model: steps x (fixed rows + the batch's rows)."""
    return sum((widths[stop - 1] + 1) * (ROW_OVERHEAD + sum(rows[start:stop]))
               for start, stop in plan)


def allowed(plan, widths, rows, batch_size, max_tokens):
    """Whether a plan keeps the limits and the quantum rule the docstring states."""
    for start, stop in plan:
        width, batch_rows = widths[stop - 1], sum(rows[start:stop])
        if stop - start > batch_size:
            return False
        if max_tokens is not None and stop - start > 1 and batch_rows * width > max_tokens:
            return False
        any_size = batch_size < ROW_QUANTUM or (
            max_tokens is not None and ROW_QUANTUM * width > max_tokens)
        if start > 0 and batch_rows % ROW_QUANTUM and not any_size:
            return False
    return True


def every_plan(count):
    """All ways to cut `count` items into consecutive non-empty batches."""
    for cuts in itertools.product([False, True], repeat=count - 1):
        bounds = [0] + [i + 1 for i, cut in enumerate(cuts) if cut] + [count]
        yield list(zip(bounds[:-1], bounds[1:]))


def check_covers(plan, count):
    assert plan[0][0] == 0 and plan[-1][1] == count
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(plan, plan[1:]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("batch_size, max_tokens", [(4, None), (3, 12), (64, 40)])
def test_plan_is_the_cheapest_allowed_one(seed, batch_size, max_tokens):
    rng = np.random.default_rng(seed)
    widths = sorted(int(w) for w in rng.integers(0, 15, size=11))
    rows = [1] * len(widths)
    plan = plan_batches(widths, batch_size, max_tokens)
    check_covers(plan, len(widths))
    assert allowed(plan, widths, rows, batch_size, max_tokens)
    best = min(cost(p, widths, rows) for p in every_plan(len(widths))
               if allowed(p, widths, rows, batch_size, max_tokens))
    assert cost(plan, widths, rows) == best


def test_rows_on_the_quantum_except_the_first_and_budget_bound_batches():
    widths = sorted([3] * 37 + [9] * 70 + [40] * 45 + [200] * 5)
    plan = plan_batches(widths, batch_size=64, max_tokens=1536)
    check_covers(plan, len(widths))
    for start, stop in plan[1:]:
        width = widths[stop - 1]
        if ROW_QUANTUM * width <= 1536:
            assert (stop - start) % ROW_QUANTUM == 0, (start, stop, width)
        assert (stop - start) * width <= 1536 or stop - start == 1
    # the five 200-token sentences make one batch off the quantum (1,000 positions)
    assert [stop - start for start, stop in plan if widths[start] == 200] == [5]


def test_windows_count_as_rows_of_the_budget():
    widths, rows = [2, 4, 4, 4], [1, 1, 3, 3]  # two sentences run as 3 windows each
    plan = plan_batches(widths, batch_size=8, max_tokens=16, rows=rows)
    check_covers(plan, 4)
    assert all(sum(rows[a:b]) * widths[b - 1] <= 16 or b - a == 1 for a, b in plan)


def test_a_jump_in_length_is_a_cut_and_flat_lengths_are_not():
    assert plan_batches([2] * 20 + [30] * 16, batch_size=64, max_tokens=None) == [
        (0, 20), (20, 36)]
    assert plan_batches([5] * 40, batch_size=64, max_tokens=None) == [(0, 40)]
    assert plan_batches([], batch_size=4, max_tokens=None) == []


def test_unsorted_widths_are_refused():
    with pytest.raises(ValueError, match="sorted in non-decreasing order; received"):
        plan_batches([3, 1], batch_size=4, max_tokens=None)


def test_windows_that_leave_no_plan_on_the_quantum_still_get_one():
    # Sentences of 1-3 windows whose rows no batch after the first (of at most 16
    # sentences) can sum to a multiple of 16: the plan takes any rows, within batch_size.
    rows = [2, 1, 1, 1, 1, 3, 3, 2, 2, 1, 1, 3, 1, 1, 1, 1, 3, 3, 3, 2, 3, 3, 2, 3, 1, 1, 3]
    plan = plan_batches([5] * len(rows), batch_size=16, max_tokens=None, rows=rows)
    check_covers(plan, len(rows))
    assert all(stop - start <= 16 for start, stop in plan), plan
