"""Empty string tokens in Python token lists: no token, at their own positions.

As everywhere in keras-elmo (docs/model.md section 1), an empty string in a sentence is no
token: the biLM reads the sentence without it, and its position gets zeros. The embedders
run the sentences without their empty tokens and put zero columns back where they stood, so
each output still has one column per input token.

Example:
>>> kept, positions = drop_empty_tokens([["人民", "", "日报"], ["好"]])
>>> kept, positions[0], positions[1]
([['人民', '日报'], ['好']], ([0, 2], 3), None)
>>> restore_empty_tokens(np.ones((3, 2, 4), "float32"), positions[0])[0, :, 0]
array([1., 0., 1.], dtype=float32)
"""

import numpy as np


def is_empty_token(token):
    """Whether `token` is an empty `str` or `bytes` (anything else is left to the char ids'
    own check)."""
    return isinstance(token, (str, bytes)) and len(token) == 0


def drop_empty_tokens(sentences):
    """`(kept, positions)`: each sentence without its empty string tokens, and for each
    either None (nothing dropped) or `(kept positions, number of tokens)`."""
    kept, positions = [], []
    for sentence in sentences:
        sentence = list(sentence)
        if not any(is_empty_token(token) for token in sentence):
            kept.append(sentence)
            positions.append(None)
            continue
        where = [k for k, token in enumerate(sentence) if not is_empty_token(token)]
        kept.append([sentence[k] for k in where])
        positions.append((where, len(sentence)))
    return kept, positions


def restore_empty_tokens(layers, positions, axis=1):
    """A sentence's outputs `(..., n_kept, ...)` (tokens on `axis`) with zeros put back at
    its empty tokens' positions: `(..., n, ...)`; `positions` as `drop_empty_tokens` gave
    it (None: returned as it is)."""
    if positions is None:
        return layers
    where, length = positions
    layers = np.asarray(layers)
    shape = list(layers.shape)
    shape[axis] = length
    full = np.zeros(shape, layers.dtype)
    index = [slice(None)] * layers.ndim
    index[axis] = where
    full[tuple(index)] = layers
    return full
