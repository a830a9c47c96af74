"""`BiLM(zero_init=True)`: a biLM built for a weight file starts at zeros, the file's values
land in those buffers, and the process holds one copy of the model."""

import os
import subprocess
import sys

import numpy as np

import weight_fixtures
from keras_elmo.models.bilm import BiLM
from keras_elmo.models.elmo_layer import ElmoLayer
from keras_elmo.formats.weight_file import bilm_weight_arrays, load_bilm_weights


def test_with_zero_init_every_file_weight_is_zero_and_without_none_is():
    options = weight_fixtures.make_options()
    zeros = BiLM(options, zero_init=True)
    drawn = BiLM(options)
    for name, array in bilm_weight_arrays(zeros).items():
        assert not np.any(array), f"{name} is not zero with zero_init=True"
    # Without it the initializers draw (biases start at 0, the carry bias -2).
    drawn_arrays = bilm_weight_arrays(drawn)
    assert np.all(drawn_arrays["CNN_high_0/b_carry"] == -2.0)
    for name in ("char_embed", "CNN/W_cnn_2", "CNN_high_0/W_carry", "CNN_proj/W_proj",
                 "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0",
                 "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"):
        assert np.count_nonzero(drawn_arrays[name]) == drawn_arrays[name].size, name


def test_the_scalar_mix_keeps_its_initial_values():
    """`ElmoLayer.from_weights` holds a zero-initialised biLM: gamma must still start at 1."""
    layer = ElmoLayer(BiLM(weight_fixtures.make_options(), zero_init=True),
                      num_output_representations=2)
    layer(np.array([["a", "bc"]]))
    for mix in layer.scalar_mixes:
        np.testing.assert_array_equal(mix.gamma.numpy(), 1.0)
        np.testing.assert_array_equal(mix.scalar_parameters.numpy(), np.zeros(3))


def test_filled_zeros_and_assigned_random_weights_give_the_same_model(tmp_path):
    """The in-place path (zeros + file) and the assign path (a drawn model) load the same
    numbers, and the two models give the same outputs."""
    options = weight_fixtures.make_options()
    arrays = weight_fixtures.random_weight_arrays(options, seed=21)
    arrays["CNN_high_0/b_transform"][:3] = [0.0, -0.0, 1e-38]  # zeros and a subnormal
    options_file, weight_file = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    filled = BiLM.from_weights(options_file, weight_file)
    assigned = BiLM(options)
    load_bilm_weights(assigned, weight_file)
    for name, array in bilm_weight_arrays(filled).items():
        np.testing.assert_array_equal(array, arrays[name], err_msg=name)
        np.testing.assert_array_equal(bilm_weight_arrays(assigned)[name], arrays[name])
    ids = np.random.default_rng(0).integers(1, 262, size=(2, 4, 50)).astype("int32")
    np.testing.assert_array_equal(filled(ids)["layers"].numpy(), assigned(ids)["layers"].numpy())
    # Loading again into an already filled model takes the assign path: same numbers.
    load_bilm_weights(filled, weight_file)
    np.testing.assert_array_equal(bilm_weight_arrays(filled)["char_embed"], arrays["char_embed"])


# Resident anonymous MiB after `import tensorflow, keras` and after `from_weights`, printed as
# "before after weights".
_LOAD = r"""
import sys
import tensorflow, keras, numpy as np
from keras_elmo.models.bilm import BiLM
def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            return int(line.split()[1]) / 1024
before = anon()
bilm = BiLM.from_weights(sys.argv[1], sys.argv[2])
print(before, anon(), sum(int(np.prod(v.shape)) * 4 for v in bilm.weights) / 2**20)
"""


def _start_load(options_file, weight_file, onednn):
    """The `_LOAD` process with TensorFlow's oneDNN switch set to `onednn`, started."""
    return subprocess.Popen([sys.executable, "-c", _LOAD, options_file, weight_file],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                 "TF_ENABLE_ONEDNN_OPTS": onednn})


def _anon_growth(process):
    """`(MiB the process grew by in BiLM.from_weights, MiB of weights)` of a `_start_load`
    process, once it ended."""
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    before, after, weights = map(float, out.split()[-3:])
    return after - before, weights


def test_from_weights_holds_one_copy_of_the_model(tmp_path):
    """An 81 MiB model: `from_weights` grows the process by the weights and less than half as
    much again (the loader's freed blocks, which glibc keeps for later allocations), on every
    CPU class: never a second copy (what the user gets; whether an allocator would have kept
    random draws made first depends on the allocator, oneDNN's pool or not, so it is not
    asserted)."""
    if not sys.platform.startswith("linux"):
        return
    options = weight_fixtures.make_options(dim=2048, projection_dim=256, n_highway=1,
                                           filters=((1, 256), (2, 256), (3, 512)))
    arrays = weight_fixtures.random_weight_arrays(options, seed=3)
    options_file, weight_file = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    # Eigen's allocator (AVX2 CPUs by default) and oneDNN's pool, each in a process of its
    # own, both at once (each is mostly on one core; the growth measured is its own).
    processes = {onednn: _start_load(options_file, weight_file, onednn) for onednn in ("0", "1")}
    try:
        for onednn, process in processes.items():
            filled, weights = _anon_growth(process)
            assert weights > 50, weights  # large enough to stand out of the noise
            assert filled < 1.5 * weights, (f"TF_ENABLE_ONEDNN_OPTS={onednn}: from_weights "
                                             f"grew {filled:.0f} MiB for {weights:.0f} MiB of "
                                             "weights")
    finally:
        for process in processes.values():  # the other one, when one failed
            if process.poll() is None:
                process.kill()
                process.communicate()
