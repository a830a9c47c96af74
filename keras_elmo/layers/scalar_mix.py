"""`ScalarMix`: the task-specific weighting of biLM layers (docs/model.md section 5)."""

import keras
import numpy as np
from keras import ops

from keras_elmo import constants
from keras_elmo.validation import check_fraction
from keras_elmo.layers.host_initializers import HostConstant


@keras.saving.register_keras_serializable(package="keras_elmo")
class ScalarMix(keras.layers.Layer):
    """`ELMo_k = gamma * sum_j softmax(s)_j * h_{k,j}`.

    `s` starts at zeros (an even average) and `gamma` at 1.0; both are trainable per task.
    With `do_layer_norm`, each layer is first normalised with ONE scalar mean and ONE scalar
    variance taken over all real (unmasked) positions of the batch and all features:
    `(h_j - mean_j) / sqrt(var_j + 1e-12)`, no gain or bias.

    Args:
        do_layer_norm: bool, normalise each layer before mixing (False).
        dropout: float, dropout on the mixed output during training (0.0).
        l2_coef: float, adds `l2_coef * sum(s ** 2)` to the layer's losses, as bilm-tf's
            `weight_layers` does (0.0: no penalty).
        initial_scalar_parameters: list of floats, starting `s` (one per layer); zeros when
            None.
        initial_gamma: float, starting `gamma` (1.0).
        trainable: bool, whether `s` and `gamma` are trained (True).
        **kwargs: base layer arguments.

    Call arguments:
        inputs: float `(batch, num_layers, num_tokens, dim)`, the stacked biLM layers.
        mask: bool `(batch, num_tokens)`, True on real tokens; only used by the layer norm.
            Defaults to all True.
        training: bool, enables dropout.

    Returns:
        float `(batch, num_tokens, dim)`.

    Example:
    >>> mix = ScalarMix(do_layer_norm=True)
    >>> mix(np.random.rand(2, 3, 5, 16).astype("float32")).shape
    (2, 5, 16)

    Reference:
    - [Peters et al., 2018](https://arxiv.org/abs/1802.05365), equation (1).
    """

    def __init__(self, do_layer_norm=False, dropout=0.0, l2_coef=0.0,
                 initial_scalar_parameters=None, initial_gamma=1.0, **kwargs):
        super().__init__(**kwargs)
        dropout = check_fraction("dropout", dropout)
        if float(l2_coef) < 0:
            raise ValueError(f"l2_coef must be >= 0; received {l2_coef}.")
        self.do_layer_norm = bool(do_layer_norm)
        self.dropout = float(dropout)
        self.l2_coef = float(l2_coef)
        self.initial_scalar_parameters = (None if initial_scalar_parameters is None
                                          else [float(v) for v in initial_scalar_parameters])
        self.initial_gamma = float(initial_gamma)
        self.supports_masking = True
        if self.dropout > 0:
            self.seed_generator = keras.random.SeedGenerator(seed=None)

    def build(self, input_shape):
        num_layers = input_shape[1]
        if len(input_shape) != 4 or num_layers is None:
            raise ValueError("ScalarMix expects inputs (batch, num_layers, num_tokens, dim) with "
                             f"a known num_layers; received shape {tuple(input_shape)}.")
        initial = self.initial_scalar_parameters
        if initial is not None and len(initial) != num_layers:
            raise ValueError(f"initial_scalar_parameters has {len(initial)} values but the "
                             f"inputs have {num_layers} layers.")
        regularizer = keras.regularizers.L2(self.l2_coef) if self.l2_coef > 0 else None
        self.scalar_parameters = self.add_weight(
            name="scalar_parameters", shape=(num_layers,), regularizer=regularizer,
            initializer=HostConstant(0.0 if initial is None else initial))
        self.gamma = self.add_weight(name="gamma", shape=(),
                                     initializer=HostConstant(self.initial_gamma))

    def call(self, inputs, mask=None, training=False):
        layers = ops.cast(inputs, self.compute_dtype)
        if self.do_layer_norm:
            layers = _masked_layer_norm(layers, mask)
        weights = ops.softmax(ops.cast(self.scalar_parameters, self.compute_dtype))  # (L,)
        mixed = ops.einsum("l,bltd->btd", weights, layers)  # (batch, T, dim)
        mixed = mixed * ops.cast(self.gamma, self.compute_dtype)
        if training and self.dropout > 0:
            mixed = keras.random.dropout(mixed, self.dropout, seed=self.seed_generator)
        return mixed

    def layer_weights(self):
        """`softmax(s)` as a numpy array `(num_layers,)` (without `gamma`); the layer must be
        built."""
        return np.asarray(ops.convert_to_numpy(ops.softmax(self.scalar_parameters)))

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2], input_shape[3])

    def get_config(self):
        config = super().get_config()
        config.update(do_layer_norm=self.do_layer_norm, dropout=self.dropout,
                      l2_coef=self.l2_coef,
                      initial_scalar_parameters=self.initial_scalar_parameters,
                      initial_gamma=self.initial_gamma)
        return config


def _masked_layer_norm(layers, mask):
    """One mean and variance per layer over real positions and features.

    `layers` `(batch, L, T, dim)`, `mask` `(batch, T)` or None -> same shape as `layers`.
    """
    if mask is None:
        mask = ops.ones(ops.shape(layers)[:1] + ops.shape(layers)[2:3], "bool")  # (batch, T)
    keep = ops.cast(mask, "bool")[:, None, :, None]  # (batch, 1, T, 1)
    weight = ops.cast(keep, layers.dtype)
    dim = ops.cast(ops.shape(layers)[-1], layers.dtype)
    count = ops.maximum(ops.sum(weight) * dim, 1.0)  # real positions x features
    mean = ops.sum(layers * weight, axis=(0, 2, 3), keepdims=True) / count  # (1, L, 1, 1)
    variance = ops.sum(ops.square(layers - mean) * weight, axis=(0, 2, 3),
                       keepdims=True) / count  # (1, L, 1, 1)
    normed = (layers - mean) / ops.sqrt(variance + constants.LAYER_NORM_EPSILON)
    return ops.where(keep, normed, ops.zeros_like(normed))
