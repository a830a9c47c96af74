"""Over-long sentences: the one rule of the Python path, `keras-elmo embed` and the SavedModel.

A sentence of `n > max_length` tokens is embedded as consecutive windows of `max_length`
tokens (the last one shorter): tokens `[0, M)`, `[M, 2M)`, ... each run through the biLM as
a sentence of its own (its own `<S>` ... `</S>`, a zero LSTM state), and the windows'
vectors are put back side by side. `n` tokens in, `n` vectors out: never an error, never a
token dropped. A token near a window's edge sees only its own window's context, so its
vectors differ from a whole-sentence run; choose `max_length` above your longest sentence
to avoid that (the published models were trained on sentences of any length).

Imports no TensorFlow (the command line checks its options before loading it).

Example:
>>> windows(7, 3)
[(0, 3), (3, 6), (6, 7)]
>>> windows(0, 3)  # an empty sentence is one empty window
[(0, 0)]
"""

#: Tokens per window unless told otherwise (`max_length`, `--max-length`).
DEFAULT_MAX_LENGTH = 512


def check_max_length(max_length, name="max_length"):
    """`max_length` if it is an int >= 1, else a `ValueError` naming what was received."""
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
        raise ValueError(f"{name} must be a positive int; received {max_length!r} (tokens "
                         "per biLM window: a longer sentence runs in windows of that many).")
    return max_length


def windows(num_tokens, max_length):
    """`(start, stop)` token ranges of a sentence's windows; one `(0, 0)` for no tokens."""
    return [(start, min(start + max_length, num_tokens))
            for start in range(0, max(num_tokens, 1), max_length)]


def num_windows(num_tokens, max_length):
    """How many windows `windows(num_tokens, max_length)` gives (at least 1)."""
    return max(-(-num_tokens // max_length), 1)
