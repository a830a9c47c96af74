"""An independent plain-numpy ELMo, written from docs/model.md sections 1-6 only.

It never imports `keras_elmo`: every number below is re-derived from the spec text, so a
test that compares the library with this module checks the library against the spec, not
against itself. Everything takes the raw weight-file arrays (a dict from dataset name, e.g.
`"CNN/W_cnn_0"`, to numpy array, exactly as stored in `weights.hdf5`) and the
`options.json` dict. Computation is in float64; compare float32 library outputs at 1e-5.

Example:
>>> ids = token_char_ids("a", max_characters_per_token=6)
>>> ids  # [BOW, 'a', EOW, pad, pad, pad] + 1
[259, 98, 260, 261, 261, 261]
"""

import numpy as np

# Section 1, raw (unshifted) char ids.
BEGIN_SENTENCE = 256
END_SENTENCE = 257
BEGIN_WORD = 258
END_WORD = 259
PADDING = 260
SHIFT = 1
BOS_TEXT = "<S>"
EOS_TEXT = "</S>"
LAYER_NORM_EPS = 1e-12
FORGET_BIAS = 1.0


# --- section 1: characters -------------------------------------------------------------
def token_bytes(token):
    """UTF-8 bytes of `token` (str or bytes) with invalid code points dropped."""
    if isinstance(token, bytes):
        return token.decode("utf-8", errors="ignore").encode("utf-8")
    return token.encode("utf-8", errors="ignore")  # drops lone surrogates


def token_char_ids(token, max_characters_per_token=50):
    """Shifted char ids (list of `max_characters_per_token` ints) of one token."""
    bos, eos = (BOS_TEXT, EOS_TEXT) if isinstance(token, str) else (b"<S>", b"</S>")
    is_bos, is_eos = token == bos, token == eos
    if is_bos or is_eos:
        body = [BEGIN_SENTENCE if is_bos else END_SENTENCE]
    else:
        body = list(token_bytes(token)[: max_characters_per_token - 2])
    raw = [BEGIN_WORD] + body + [END_WORD]
    raw += [PADDING] * (max_characters_per_token - len(raw))
    return [c + SHIFT for c in raw]


def sentence_char_ids(tokens, max_characters_per_token=50):
    """(len(tokens), max_characters_per_token) int32 shifted ids."""
    out = np.zeros((len(tokens), max_characters_per_token), np.int32)
    for k, token in enumerate(tokens):
        out[k] = token_char_ids(token, max_characters_per_token)
    return out


def batch_char_ids(sentences, max_characters_per_token=50):
    """(batch, max_len, max_characters_per_token) int32; rows past a sentence's end are 0."""
    max_len = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), max_len, max_characters_per_token), np.int32)
    for b, tokens in enumerate(sentences):
        out[b, : len(tokens)] = sentence_char_ids(tokens, max_characters_per_token)
    return out


# --- section 2: char CNN -------------------------------------------------------------------
def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def _f64(arrays, name):
    return np.asarray(arrays[name], dtype=np.float64)


def char_cnn(arrays, options, char_ids):
    """Token encoder: shifted char ids (..., max_chars) -> (..., projection_dim) float64."""
    cnn = options["char_cnn"]
    projection_dim = options["lstm"]["projection_dim"]
    char_ids = np.asarray(char_ids)
    file_table = _f64(arrays, "char_embed")  # (261, E), row r = raw id r
    table = np.concatenate([np.zeros((1, file_table.shape[1])), file_table], axis=0)  # (262, E)
    emb = table[char_ids]  # (..., C, E)
    num_chars = emb.shape[-2]
    pooled = []
    for i, (width, _) in enumerate(cnn["filters"]):
        w = _f64(arrays, f"CNN/W_cnn_{i}")[0]  # (width, E, n)
        b = _f64(arrays, f"CNN/b_cnn_{i}")  # (n,)
        positions = num_chars - width + 1
        # windows[..., p, k, e] = emb[..., p + k, e]
        windows = np.stack([emb[..., k: k + positions, :] for k in range(width)], axis=-2)
        conv = np.einsum("...pke,kef->...pf", windows, w) + b  # (..., positions, n)
        maxed = conv.max(axis=-2)  # max over positions, THEN the activation
        pooled.append(relu(maxed) if cnn["activation"] == "relu" else np.tanh(maxed))
    x = np.concatenate(pooled, axis=-1)  # (..., F)
    for k in range(cnn.get("n_highway", 0)):
        carry = sigmoid(x @ _f64(arrays, f"CNN_high_{k}/W_carry") + _f64(arrays, f"CNN_high_{k}/b_carry"))
        transform = relu(x @ _f64(arrays, f"CNN_high_{k}/W_transform")
                         + _f64(arrays, f"CNN_high_{k}/b_transform"))
        x = carry * transform + (1.0 - carry) * x
    if x.shape[-1] != projection_dim:
        x = x @ _f64(arrays, "CNN_proj/W_proj") + _f64(arrays, "CNN_proj/b_proj")
    return x


# --- section 3: LSTM ------------------------------------------------------------------------
def _clip(x, value):
    return x if value is None else np.clip(x, -value, value)


def lstm_cell_arrays(arrays, direction, layer):
    """(W (2P, 4D), B (4D,), W_P (D, P)) float64 of one direction and layer."""
    prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
    return _f64(arrays, prefix + "W_0"), _f64(arrays, prefix + "B"), _f64(arrays, prefix + "W_P_0")


def lstm_step(x, h, c, W, B, W_P, cell_clip, proj_clip):
    """One step: x (P_in,), h (P,), c (D,) -> (h, c). Gates i, j, f, o; forget +1."""
    dim = c.shape[-1]
    z = np.concatenate([x, h], axis=-1) @ W + B  # (4D,)
    z_i, z_j, z_f, z_o = (z[..., g * dim: (g + 1) * dim] for g in range(4))
    i, f = sigmoid(z_i), sigmoid(z_f + FORGET_BIAS)
    j, o = np.tanh(z_j), sigmoid(z_o)
    c = _clip(f * c + i * j, cell_clip)
    h = _clip((o * np.tanh(c)) @ W_P, proj_clip)
    return h, c


def lstm_direction(arrays, options, direction, x):
    """One direction over one sentence in its reading order: x (n, P) -> (L, n, P)."""
    lstm = options["lstm"]
    dim, proj = lstm["dim"], lstm["projection_dim"]
    inputs = np.asarray(x, np.float64)
    layers = []
    for layer in range(lstm["n_layers"]):
        W, B, W_P = lstm_cell_arrays(arrays, direction, layer)
        h, c = np.zeros(proj), np.zeros(dim)
        outputs = np.zeros((inputs.shape[0], proj))
        for t in range(inputs.shape[0]):
            h, c = lstm_step(inputs[t], h, c, W, B, W_P, lstm.get("cell_clip"), lstm.get("proj_clip"))
            outputs[t] = h  # the recurrent h never includes the residual
        if lstm.get("use_skip_connections") and layer > 0:
            outputs = outputs + inputs
        layers.append(outputs)
        inputs = outputs
    return np.stack(layers) if layers else np.zeros((0, inputs.shape[0], proj))


def bilstm_sentence(arrays, options, x):
    """Both directions over one sentence: x (n, P) -> (L, n, 2P)."""
    forward = lstm_direction(arrays, options, 0, x)
    backward = lstm_direction(arrays, options, 1, np.asarray(x)[::-1])[:, ::-1]
    return np.concatenate([forward, backward], axis=-1)


def contextual_encoder(arrays, options, x, lengths):
    """x (batch, T, P), lengths (batch,) -> (batch, L, T, 2P), zero past each length."""
    lstm = options["lstm"]
    batch, steps = x.shape[:2]
    out = np.zeros((batch, lstm["n_layers"], steps, 2 * lstm["projection_dim"]))
    for b, n in enumerate(lengths):
        out[b, :, :n] = bilstm_sentence(arrays, options, x[b, :n])
    return out


# --- section 4: the biLM ----------------------------------------------------------------------
def bilm_sentence(arrays, options, tokens):
    """One sentence (list of str/bytes tokens) -> (L + 1, n, 2P); adds and drops <S>, </S>."""
    max_chars = options["char_cnn"].get("max_characters_per_token", 50)
    ids = sentence_char_ids([BOS_TEXT] + list(tokens) + [EOS_TEXT], max_chars)
    x = char_cnn(arrays, options, ids)  # (n + 2, P)
    contextual = bilstm_sentence(arrays, options, x)[:, 1:-1]  # (L, n, 2P)
    layer0 = np.concatenate([x, x], axis=-1)[1:-1][None]  # (1, n, 2P)
    return np.concatenate([layer0, contextual], axis=0)


def bilm(arrays, options, sentences):
    """Sentences -> (layers (batch, L + 1, T, 2P) float64, mask (batch, T) bool)."""
    lstm = options["lstm"]
    steps = max((len(s) for s in sentences), default=0)
    layers = np.zeros((len(sentences), lstm["n_layers"] + 1, steps, 2 * lstm["projection_dim"]))
    mask = np.zeros((len(sentences), steps), bool)
    for b, tokens in enumerate(sentences):
        layers[b, :, : len(tokens)] = bilm_sentence(arrays, options, tokens)
        mask[b, : len(tokens)] = True
    return layers, mask


# --- section 5: ScalarMix ----------------------------------------------------------------------
def scalar_mix(layers, mask, scalar_parameters, gamma, do_layer_norm=False):
    """layers (batch, L + 1, T, D), mask (batch, T) -> gamma * sum_j softmax(s)_j h_j."""
    layers = np.asarray(layers, np.float64)
    s = np.asarray(scalar_parameters, np.float64)
    weights = np.exp(s - s.max())
    weights = weights / weights.sum()
    m = np.asarray(mask, np.float64)[..., None]  # (batch, T, 1)
    count = m.sum() * layers.shape[-1]
    out = np.zeros(layers.shape[:1] + layers.shape[2:])
    for j in range(layers.shape[1]):
        h = layers[:, j]  # (batch, T, D)
        if do_layer_norm:
            mean = (h * m).sum() / count
            var = (((h - mean) * m) ** 2).sum() / count
            h = (h - mean) / np.sqrt(var + LAYER_NORM_EPS)
        out = out + weights[j] * h
    return gamma * out
