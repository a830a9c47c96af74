"""`Highway`: the highway layers of ELMo's character encoder."""

import keras
from keras import ops

from keras_elmo.file_filled_weights import file_weight_initializer

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

    def __init__(self, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer) \
            if kernel_initializer is not None else None

    def build(self, input_shape):
        dim = int(input_shape[-1])
        default = keras.initializers.RandomNormal(stddev=(1.0 / dim) ** 0.5)
        init = file_weight_initializer(self.kernel_initializer or default)
        self.carry_kernel = self.add_weight(name="carry_kernel", shape=(dim, dim), initializer=init)
        self.carry_bias = self.add_weight(
            name="carry_bias", shape=(dim,),
            initializer=file_weight_initializer(
                keras.initializers.Constant(_CARRY_BIAS_INIT)))
        self.transform_kernel = self.add_weight(name="transform_kernel", shape=(dim, dim),
                                                initializer=init)
        self.transform_bias = self.add_weight(name="transform_bias", shape=(dim,),
                                              initializer="zeros")

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
