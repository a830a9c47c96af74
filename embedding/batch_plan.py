"""`plan_batches`: where to cut a length-sorted list of sentences into biLM calls.

A biLM call over `rows` sentences padded to `width` tokens runs `width + 1` recurrent steps
(`<S>` and `</S>` framed, the last step skipped), and a step costs about as much as
`ROW_OVERHEAD + rows` rows: the rows themselves, plus a fixed part (the recurrent weights'
read, the loop's own small ops) worth a few rows. Cutting a sorted list where the lengths
jump wastes less padding; cutting too often pays the fixed part more often. The plan that
costs least under that model is found exactly by dynamic programming over the cut points,
within the caller's limits (`batch_size` sentences, `max_tokens` padded positions).

Rows come in multiples of `ROW_QUANTUM` (16): the matrix kernels of a recurrent step work
on 16 columns at a time, and products of other widths run at a fraction of their rate
(docs/performance.md, "Figures behind the code's choices"). Off the quantum are only the first batch
(the shortest sentences take the remainder) and batches whose width leaves room for fewer
than 16 rows in the budget (all of them when `batch_size` is below 16). Should sentences
run in several windows leave no plan whose rows keep to that, the plan takes any rows.

Imports no TensorFlow.

Example:
>>> plan_batches([2] * 20 + [30] * 16, batch_size=64, max_tokens=None)
[(0, 20), (20, 36)]
"""

import math

#: A recurrent step's fixed cost in rows: the per-step time of a batch of B rows is about
#: that of B + 6 on both CPU classes (docs/performance.md).
ROW_OVERHEAD = 6
#: Rows of a batch come in multiples of this (see the module docstring).
ROW_QUANTUM = 16


def plan_batches(widths, batch_size, max_tokens, rows=None):
    """Cut points of the cheapest batching of sorted sentences.

    Args:
        widths: non-decreasing ints, each sentence's tokens per row (a sentence run in
            windows: the window length).
        batch_size: int >= 1, most sentences per batch.
        max_tokens: int >= 1 or None, most padded positions per batch (rows x the widest
            row); a sentence over the budget on its own runs alone.
        rows: ints >= 1 or None, each sentence's rows (windows); None: one each.

    Returns:
        list of `(start, stop)` index ranges covering `widths` in order.
    """
    count = len(widths)
    rows = [1] * count if rows is None else list(rows)
    if any(b < a for a, b in zip(widths, widths[1:])):
        raise ValueError("plan_batches needs widths sorted in non-decreasing order; received "
                         f"{list(widths)[:10]}...")
    plan = _cheapest(widths, rows, batch_size, max_tokens, ROW_QUANTUM)
    if plan is None:  # sentences of several windows can leave no sum of rows on the quantum
        plan = _cheapest(widths, rows, batch_size, max_tokens, 1)
    return plan


def _cheapest(widths, rows, batch_size, max_tokens, quantum):
    """The least-cost plan with rows in multiples of `quantum` (see the module docstring),
    or None if there is none."""
    count = len(widths)
    total_rows = [0]
    for r in rows:
        total_rows.append(total_rows[-1] + r)

    def any_size(width):
        """Whether a batch of this width may hold a number of rows off the quantum."""
        return batch_size < quantum or (max_tokens is not None and quantum * width > max_tokens)

    best = [0.0] + [math.inf] * count  # best[j]: least cost of the first j sentences
    start_of = [0] * (count + 1)
    for stop in range(1, count + 1):
        width = widths[stop - 1]  # the widest row of any batch ending here
        for size in range(1, min(batch_size, stop) + 1):
            start = stop - size
            batch_rows = total_rows[stop] - total_rows[start]
            if size > 1 and max_tokens is not None and batch_rows * width > max_tokens:
                break  # larger batches ending here only hold more rows
            if start > 0 and batch_rows % quantum and not any_size(width):
                continue
            cost = best[start] + (width + 1) * (ROW_OVERHEAD + batch_rows)
            if cost < best[stop]:
                best[stop], start_of[stop] = cost, start
    if count and best[count] == math.inf:
        return None
    cuts, stop = [], count
    while stop > 0:
        cuts.append((start_of[stop], stop))
        stop = start_of[stop]
    return cuts[::-1]
