"""Adding `<S>`/`</S>` around each sentence and removing them from the outputs (section 1).

The biLM runs over `<S> t1 ... tn </S>`; callers give only `t1 ... tn` and get back
representations of those. Both layers assume real tokens come first in each row (the
layout `batch_to_ids` and the string converters produce).
"""

import keras
import numpy as np
from keras import ops

from keras_elmo import constants
from keras_elmo.text.characters import token_to_char_ids


@keras.saving.register_keras_serializable(package="keras_elmo")
class AddSentenceBoundaries(keras.layers.Layer):
    """Puts the `<S>` token before and the `</S>` token after each sentence's tokens.

    Works on any ids with one token per position on axis 1: char ids `(batch, T, chars)`,
    whose boundary tokens are char rows, or a vocabulary model's word ids `(batch, T)`,
    whose boundary tokens are single ids (`BiLM` frames both with one layer each).

    Args:
        max_characters_per_token: int, chars per token (50); sizes the default rows.
        begin_sentence: the `<S>` token's model ids (shifted), the shape of one position of
            the input: a list of `max_characters_per_token` char ids, or an int word id.
            None: a byte model's `<S>` row (`token_to_char_ids("<S>")`).
        end_sentence: the same for `</S>`; given together with `begin_sentence`.

    Call arguments:
        inputs: int `(batch, T, ...)`; a position whose ids are all zero is padding, and
            padding follows the real tokens.

    Returns:
        int32 `(batch, T + 2, ...)`: position 0 is `<S>`, 1..n the tokens, n + 1 `</S>`,
        zeros after. An empty sentence becomes `<S> </S>`.

    Example:
    >>> AddSentenceBoundaries()(keras_elmo.batch_to_ids([["a"], []])).shape
    (2, 3, 50)
    >>> AddSentenceBoundaries(begin_sentence=3, end_sentence=4)(np.array([[7, 0]])).numpy()
    array([[3, 7, 4, 0]], dtype=int32)
    """

    def __init__(self, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN,
                 begin_sentence=None, end_sentence=None, **kwargs):
        super().__init__(**kwargs)
        self.max_characters_per_token = int(max_characters_per_token)
        if (begin_sentence is None) != (end_sentence is None):
            raise ValueError("AddSentenceBoundaries takes begin_sentence and end_sentence "
                             f"together; received begin_sentence={begin_sentence!r}, "
                             f"end_sentence={end_sentence!r}.")
        self.begin_sentence = _token_ids("begin_sentence", begin_sentence)
        self.end_sentence = _token_ids("end_sentence", end_sentence)
        if begin_sentence is not None and np.shape(self.begin_sentence) != np.shape(
                self.end_sentence):
            raise ValueError("begin_sentence and end_sentence must have one shape; received "
                             f"{np.shape(self.begin_sentence)} and "
                             f"{np.shape(self.end_sentence)}.")

    def _boundaries(self):
        """`(begin, end)` ids, each the shape of one position of the input."""
        if self.begin_sentence is None:
            return (token_to_char_ids(constants.BOS_TOKEN, self.max_characters_per_token),
                    token_to_char_ids(constants.EOS_TOKEN, self.max_characters_per_token))
        return self.begin_sentence, self.end_sentence

    def call(self, inputs):
        ids = ops.cast(inputs, "int32")
        rank = len(ids.shape)
        present = ops.not_equal(ids, 0)
        if rank > 2:
            present = ops.any(present, axis=tuple(range(2, rank)))  # (batch, T)
        lengths = ops.sum(ops.cast(present, "int32"), axis=1)  # (batch,)
        padded = ops.pad(ids, ((0, 0), (1, 1)) + ((0, 0),) * (rank - 2))  # (batch, T + 2, ...)
        trailing = (1,) * (rank - 2)
        positions = ops.reshape(ops.arange(ops.shape(padded)[1]), (1, -1) + trailing)
        at_eos = ops.equal(positions, ops.reshape(lengths + 1, (-1, 1) + trailing))
        begin, end = (ops.convert_to_tensor(ids_, "int32") for ids_ in self._boundaries())
        with_eos = ops.where(at_eos, end, padded)
        return ops.where(ops.equal(positions, 0), begin, with_eos)

    def compute_output_shape(self, input_shape):
        steps = None if input_shape[1] is None else input_shape[1] + 2
        return (input_shape[0], steps) + tuple(input_shape[2:])

    def get_config(self):
        config = super().get_config()
        config.update(max_characters_per_token=self.max_characters_per_token,
                      begin_sentence=self.begin_sentence, end_sentence=self.end_sentence)
        return config


def _token_ids(name, value):
    """None, an int, or a list of ints (config-ready)."""
    if value is None:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    array = np.asarray(value)
    if array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be an int (a word id) or a list of ints (a char row); "
                         f"received {value!r}.")
    return [int(v) for v in array]


@keras.saving.register_keras_serializable(package="keras_elmo")
class RemoveSentenceBoundaries(keras.layers.Layer):
    """Drops the `<S>` and `</S>` positions again and zeroes everything past each sentence.

    Call arguments:
        inputs: float `(batch, ..., T + 2, dim)`, time on axis -2.
        mask: bool `(batch, T + 2)`, True on `<S>`, the tokens and `</S>`.

    Returns:
        float `(batch, ..., T, dim)`, exactly zero past each sentence's end.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask):
        mask = ops.cast(mask, "bool")
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1) - 2  # tokens per sentence
        steps = ops.shape(inputs)[-2] - 2
        inner = inputs[..., 1:-1, :]  # (batch, ..., T, dim)
        keep = ops.arange(steps)[None, :] < lengths[:, None]  # (batch, T)
        shape = [-1] + [1] * (len(inputs.shape) - 3) + [steps, 1]
        keep = ops.reshape(keep, shape)  # (batch, 1.., T, 1)
        return ops.where(keep, inner, ops.zeros_like(inner))

    def compute_mask(self, inputs, mask=None):
        return None  # the caller's token mask is the meaningful one

    def compute_output_shape(self, input_shape):
        steps = None if input_shape[-2] is None else input_shape[-2] - 2
        return tuple(input_shape[:-2]) + (steps, input_shape[-1])
