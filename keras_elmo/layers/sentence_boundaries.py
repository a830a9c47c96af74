"""Adding `<S>`/`</S>` around each sentence and removing them from the outputs (section 1).

The biLM runs over `<S> t1 ... tn </S>`; callers give only `t1 ... tn` and get back
representations of those. Both layers assume real tokens come first in each row (the
layout `batch_to_ids` and the string converters produce).
"""

import keras
from keras import ops

from keras_elmo import constants
from keras_elmo.text.characters import token_mask, token_to_char_ids


@keras.saving.register_keras_serializable(package="keras_elmo")
class AddSentenceBoundaries(keras.layers.Layer):
    """Puts the `<S>` token before and the `</S>` token after each sentence's tokens.

    Args:
        max_characters_per_token: int, chars per token (50).

    Call arguments:
        inputs: int `(batch, T, max_characters_per_token)`; all-zero rows are padding and
            follow the real tokens.

    Returns:
        int32 `(batch, T + 2, max_characters_per_token)`: row 0 is `<S>`, rows 1..n the
        tokens, row n + 1 `</S>`, zeros after. An empty sentence becomes `<S> </S>`.

    Example:
    >>> AddSentenceBoundaries()(keras_elmo.batch_to_ids([["a"], []])).shape
    (2, 3, 50)
    """

    def __init__(self, max_characters_per_token=constants.MAX_CHARACTERS_PER_TOKEN, **kwargs):
        super().__init__(**kwargs)
        self.max_characters_per_token = int(max_characters_per_token)

    def call(self, inputs):
        ids = ops.cast(inputs, "int32")
        lengths = ops.sum(ops.cast(token_mask(ids), "int32"), axis=1)  # (batch,)
        padded = ops.pad(ids, ((0, 0), (1, 1), (0, 0)))  # (batch, T + 2, chars)
        positions = ops.arange(ops.shape(padded)[1])[None, :, None]  # (1, T + 2, 1)
        bos = ops.convert_to_tensor(
            token_to_char_ids(constants.BOS_TOKEN, self.max_characters_per_token), "int32")
        eos = ops.convert_to_tensor(
            token_to_char_ids(constants.EOS_TOKEN, self.max_characters_per_token), "int32")
        with_eos = ops.where(ops.equal(positions, lengths[:, None, None] + 1), eos, padded)
        return ops.where(ops.equal(positions, 0), bos, with_eos)

    def compute_output_shape(self, input_shape):
        steps = None if input_shape[1] is None else input_shape[1] + 2
        return (input_shape[0], steps, input_shape[2])

    def get_config(self):
        config = super().get_config()
        config["max_characters_per_token"] = self.max_characters_per_token
        return config


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
