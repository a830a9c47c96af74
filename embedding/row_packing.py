"""`plan_calls`: sentences packed into the rows of biLM calls, back to back.

A biLM call runs `rows` sequences side by side for `steps` recurrent steps, and a step costs
about as much as `ROW_OVERHEAD + rows` rows: the rows themselves, plus a fixed part (the
recurrent weights' read, the loop's own small ops) worth a few rows. A row need not hold a
single sentence: the encoder restarts from a zero state wherever a new sentence begins in a
row (`ResidualBiLSTM`'s `sequence_starts`), so short sentences share a row, one after the
other, each framed by its own `<S>` ... `</S>`. Packed rows are nearly full, whatever the
mix of lengths: no padding to a batch's longest sentence, and a long sentence shares its
call with many short ones instead of running in a narrow batch of its own.

The unit of packing is a piece: a sentence of at most `max_length` tokens is one piece of
`n + 2` positions; a longer one is cut into its windows (`keras_elmo.text.sentence_windows`),
each a piece of its own, all of them in the same call; an empty sentence is no piece (it has
no vector to compute). A call holds at most `max_rows` rows and `max_positions` positions
(rows x steps), except that a piece longer than that alone still runs, alone.

Planning is greedy and fast (best fit, longest pieces first): each call takes
`max_rows` rows of `max_positions // max_rows` steps (or of the longest piece left, if
longer) and fills them, the longest pieces first, each into the fullest row it still fits;
the last call of a window is as short as lets its rows hold what is left. The sentences of
a window come back in the calls' order.

Imports no TensorFlow.

Example:
>>> plan = plan_calls([3, 0, 5, 2], max_rows=2, max_positions=None, max_length=512)
>>> [[[piece.sentence for piece in row] for row in call] for call in plan]
[[[2], [0, 3]]]
"""

import bisect
import collections

from keras_elmo.text.sentence_windows import windows
from keras_elmo.validation import check_int

#: A recurrent step's fixed cost in rows: the per-step time of a batch of B rows is about
#: that of B + 6 on both CPU classes (docs/performance.md).
ROW_OVERHEAD = 6
#: Positions a piece adds to its row beside its tokens: its `<S>` and `</S>`.
FRAME = 2
#: How much a last call's steps grow when its rows cannot hold what is left.
_GROWTH = 1.05

#: Tokens `[start, stop)` of sentence `sentence` (an index into the planned list), run as
#: one sequence `<S> tokens </S>`.
Piece = collections.namedtuple("Piece", ["sentence", "start", "stop"])


def piece_size(piece):
    """Positions a piece takes in its row: its tokens and its frame."""
    return piece.stop - piece.start + FRAME


def plan_calls(lengths, max_rows, max_positions, max_length):
    """The biLM calls of sentences of these lengths.

    Args:
        lengths: ints >= 0, tokens per sentence (any order).
        max_rows: int >= 1, most rows per call.
        max_positions: int >= 1 or None, most positions (rows x steps) per call; None: no
            limit (then one call of `max_rows` rows holds every single-window sentence).
        max_length: int >= 1, tokens per window: a longer sentence runs in windows, all of
            them in one call.

    Returns:
        list of calls; a call is a list of rows, a row a list of `Piece`s in row order.
        Every sentence with tokens appears in exactly one call (all its pieces there, in
        order of its windows); empty sentences appear in none.
    """
    check_int("max_rows", max_rows)
    check_int("max_positions", max_positions, optional=True)
    check_int("max_length", max_length)
    calls = []
    singles = []
    for sentence, length in enumerate(lengths):
        if length > max_length:  # its windows together, a row each, in a call of their own
            calls.append([[Piece(sentence, start, stop)]
                          for start, stop in windows(length, max_length)])
        elif length > 0:
            singles.append(Piece(sentence, 0, length))
    singles.sort(key=lambda piece: -piece_size(piece))
    packed = []
    while singles:
        rows, singles = _fill_call(singles, max_rows, max_positions)
        packed.append(rows)
    return packed + calls


def call_shape(call):
    """`(rows, steps)` of a planned call."""
    return len(call), max(sum(piece_size(p) for p in row) for row in call)


def call_cost(call):
    """The cost model's units of a call: `(rows + ROW_OVERHEAD) * steps`."""
    rows, steps = call_shape(call)
    return (rows + ROW_OVERHEAD) * steps


def _fill_call(pieces, max_rows, max_positions):
    """One call from pieces sorted longest first: `(rows, pieces left for later calls)`."""
    longest = piece_size(pieces[0])
    if max_positions is None:  # no budget: the rows grow as long as it takes
        rows, full_steps = max_rows, None
    else:
        rows = max(1, min(max_rows, max_positions // longest))
        full_steps = max(longest, max_positions // rows)
    total = sum(piece_size(p) for p in pieces)
    # The fewest steps that could hold everything left in `rows` rows (at least the longest
    # piece); grown until they do, up to a full call's steps.
    steps = max(longest, -(-total // rows))
    if full_steps is not None:
        steps = min(steps, full_steps)
    while True:
        layout, left = _best_fit(pieces, rows, steps)
        if not left or (full_steps is not None and steps >= full_steps):
            return layout, left
        steps = max(steps + 1, int(steps * _GROWTH))
        if full_steps is not None:
            steps = min(steps, full_steps)


def _best_fit(pieces, rows, steps):
    """Pieces (longest first) into at most `rows` rows of `steps` positions, each into the
    fullest row it fits (a new row when none does): `(rows of pieces, pieces left over)`."""
    layout, left = [], []
    free = []  # sorted (room left, row index)
    for piece in pieces:
        size = piece_size(piece)
        slot = bisect.bisect_left(free, (size, -1))
        if slot < len(free):
            room, row = free.pop(slot)
            layout[row].append(piece)
            bisect.insort(free, (room - size, row))
        elif len(layout) < rows and size <= steps:
            layout.append([piece])
            bisect.insort(free, (steps - size, len(layout) - 1))
        else:
            left.append(piece)
    return layout, left
