"""A model's ids checked on the host, before Keras dispatches the call.

Keras re-raises an exception from a layer's `call` inside a multi-line message with ANSI
colour codes, and under `jax.jit` a failed check inside the call arrives as a "CpuCallback
error" trace. So `BiLM.__call__` and `ElmoLayer.__call__` check ids whose values are at hand
(a numpy array, nested lists of numbers, a concrete JAX array, a torch tensor, an eager
TensorFlow tensor) here first: a bad input is refused with our one-line `ValueError`, which
says what was received and what this backend accepts. Ids being traced (`jax.jit`,
`tf.function`, `torch.compile`, a functional model being built) have no values yet: the
checks inside the call stay for them (`keras_elmo.backend.check_id_range`).

    host_values(x)                      numpy values of `x`, or None while traced
    accepted_inputs(who, options, ...)  what `who` takes on this backend, in words
    check_model_inputs(inputs, bilm, who, accepts_strings=False)

Example:
>>> check_model_inputs(np.zeros((2, 3, 49), "int32"), bilm, "BiLM")  # doctest: +SKIP
ValueError: BiLM expects int char ids (batch, num_tokens, 50) ...; received dtype int32,
shape (2, 3, 49).
"""

import sys

import numpy as np

from keras_elmo import backend
from keras_elmo.layers.char_cnn_embedder import check_char_id_range

#: The keys of a model's dict input.
CHAR_IDS, WORD_IDS = "char_ids", "word_ids"
#: Ranks of char ids `(batch, num_tokens, chars)` and word ids `(batch, num_tokens)`.
CHAR_IDS_RANK, WORD_IDS_RANK = 3, 2


def host_values(x):
    """`x`'s values as a numpy array when they are at hand (numpy, nested lists of numbers,
    a concrete JAX array, a torch tensor, an eager TensorFlow tensor); None for anything
    traced or symbolic, and for what numpy cannot hold as one numeric array."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (list, tuple)):
        try:
            values = np.asarray(x)
        except ValueError:  # ragged nested lists: left to Keras
            return None
        return values if values.dtype.kind in "biuf" else None
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        return None if isinstance(x, jax.core.Tracer) else np.asarray(x)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if torch.compiler.is_compiling() or x.is_meta:
            return None
        return x.detach().cpu().numpy()
    if type(x).__name__ == "EagerTensor":  # TensorFlow's, outside tf.function
        return x.numpy()
    return None


def accepted_inputs(who, options, accepts_strings=False):
    """What `who` ("BiLM", "ElmoLayer") takes on this backend, in words, for a message:
    tf.string tokens first where it takes them (`accepts_strings` on TensorFlow), else the
    ids and where strings go instead."""
    chars = options.max_characters_per_token
    ids = (f"int char ids (batch, num_tokens, {chars}) or a word model's dict "
           f'{{"{CHAR_IDS}": ..., "{WORD_IDS}": (batch, num_tokens)}}')
    if accepts_strings and backend.NAME == "tensorflow":
        return (f"{who} expects tf.string tokens (batch, num_tokens), padded with \"\" or "
                f"ragged, {ids}")
    strings = ("string tokens become ids first, through keras_elmo.ElmoPreprocessor"
               if accepts_strings else "from keras_elmo.batch_to_ids or bilm.batch_to_ids")
    return f"{who} expects {ids} on Keras' {backend.NAME} backend ({strings})"


def check_model_inputs(inputs, bilm, who, accepts_strings=False):
    """Refuses ids that `bilm` cannot take, where their values are at hand (`host_values`):
    not an int dtype, not `(batch, num_tokens, max_characters_per_token)` char ids (or a
    dict of them and `(batch, num_tokens)` word ids), or ids out of the model's range.
    Traced inputs and string tokens pass untouched (the call checks them).

    Raises:
        ValueError: one line, naming what was received and what `who` expects.
    """
    if isinstance(inputs, dict):
        unknown = sorted(set(inputs) - {CHAR_IDS, WORD_IDS})
        if CHAR_IDS not in inputs or unknown:
            raise ValueError(f"{accepted_inputs(who, bilm.options, accepts_strings)}; "
                             f"received a dict with keys {sorted(inputs)}.")
        char_ids, word_ids = inputs[CHAR_IDS], inputs.get(WORD_IDS)
    else:
        char_ids, word_ids = inputs, None
    chars = host_values(char_ids)
    if chars is not None:
        if bilm.word_embedder is not None and word_ids is None:
            raise ValueError(f"{accepted_inputs(who, bilm.options, accepts_strings)}; this "
                             f'word model needs "{WORD_IDS}" too: received char ids alone.')
        _check_shape(chars, (None,) * (CHAR_IDS_RANK - 1) + (
            bilm.options.max_characters_per_token,), who, bilm, accepts_strings)
        check_char_id_range(chars, bilm.options.num_characters)
    words = None if word_ids is None else host_values(word_ids)
    if words is not None:  # (batch, num_tokens), as the char ids' when they are at hand
        steps = (None,) * WORD_IDS_RANK if chars is None else chars.shape[:WORD_IDS_RANK]
        _check_shape(words, steps, who, bilm, accepts_strings, what=f'"{WORD_IDS}" ')
        if bilm.word_embedder is not None:  # the model's own layer, its own words
            bilm.word_embedder._check_id_range(words)  # pylint: disable=protected-access


def _check_shape(values, shape, who, bilm, accepts_strings, what=""):
    """Refuses `values` that are not ints of `shape` (None: any size there)."""
    fits = (values.dtype.kind in "iu" and len(values.shape) == len(shape)
            and all(want is None or got == want for got, want in zip(values.shape, shape)))
    if not fits:
        raise ValueError(f"{accepted_inputs(who, bilm.options, accepts_strings)}; received "
                         f"{what}dtype {values.dtype.name}, shape {tuple(values.shape)}.")
