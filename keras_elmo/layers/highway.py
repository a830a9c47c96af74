"""`Highway`: the highway layers of ELMo's character encoder."""

import keras
from keras import ops

from keras_elmo.layers.host_initializers import HostZeros

#: bilm-tf initialises the carry bias to this value (the gate starts mostly closed).
_CARRY_BIAS_INIT = -2.0


@keras.saving.register_keras_serializable(package="keras_elmo")
class Highway(keras.layers.Layer):
    """One highway layer, as the published weight files define it.

    `carry = sigmoid(x W_carry + b_carry)`,
    `output = carry * relu(x W_transform + b_transform) + (1 - carry) * x`
    (the nonlinearity is always relu, whatever the char CNN's activation is).

    Args:
        kernel_initializer: initializer of both `(dim, dim)` kernels. Defaults to a normal
            distribution with stddev `sqrt(1 / dim)` (bilm-tf's choice).
        zero_init: bool, create the kernels and the carry bias as zeros instead of drawing
            them, for a layer whose weights a file fills next (`BiLM.from_weights`); how
            this object is built, not in the config.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: float tensor `(..., dim)`.

    Returns:
        float tensor `(..., dim)`.

    Example:
    >>> layer = Highway()
    >>> layer(np.ones((2, 3, 8), "float32")).shape
    (2, 3, 8)
    """

    def __init__(self, kernel_initializer=None, zero_init=False, **kwargs):
        super().__init__(**kwargs)
        self._zero_init = bool(zero_init)
        self.kernel_initializer = keras.initializers.get(kernel_initializer) \
            if kernel_initializer is not None else None

    def build(self, input_shape):
        dim = int(input_shape[-1])
        default = keras.initializers.RandomNormal(stddev=(1.0 / dim) ** 0.5)
        init = HostZeros() if self._zero_init else (self.kernel_initializer or default)
        carry_init = (HostZeros() if self._zero_init
                      else keras.initializers.Constant(_CARRY_BIAS_INIT))
        self.carry_kernel = self.add_weight(name="carry_kernel", shape=(dim, dim), initializer=init)
        self.carry_bias = self.add_weight(name="carry_bias", shape=(dim,), initializer=carry_init)
        self.transform_kernel = self.add_weight(name="transform_kernel", shape=(dim, dim),
                                                initializer=init)
        self.transform_bias = self.add_weight(name="transform_bias", shape=(dim,),
                                              initializer=HostZeros())

    def call(self, inputs):
        carry = ops.sigmoid(ops.matmul(inputs, self.carry_kernel) + self.carry_bias)
        transform = ops.relu(ops.matmul(inputs, self.transform_kernel) + self.transform_bias)
        return carry * transform + (1.0 - carry) * inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = (keras.initializers.serialize(self.kernel_initializer)
                                        if self.kernel_initializer is not None else None)
        return config
