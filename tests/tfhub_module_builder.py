"""Builds the TF1 Hub module fixtures of tests/fixtures/tfhub with code that is not ours.

    python tests/tfhub_module_builder.py --out tests/fixtures/tfhub

What it writes under --out:
- `input_model/`: `options.json` and `weights.hdf5` of a small random model in the published
  (bilm-tf / AllenNLP) layout, written here with h5py from a fixed seed, and `mix.json`, the
  trained mix each module stores.
- `google_elmo/`: a TF1 Hub module in the manner of TF Hub's google/elmo/1-3: signatures
  `tokens` (inputs `tokens` [batch, max_len] string padded with "", `sequence_len` [batch]
  int32) and `default` (one input, [batch] untokenised sentences, split on spaces in the
  graph); outputs `word_emb`, `lstm_outputs1`, `lstm_outputs2`, `elmo`, `default`. Mix
  variables `aggregation/weights` (3,) and `aggregation/scaling` (a scalar):
  `elmo = scaling * sum_j softmax(weights)_j h_j`, masked at padding; `default` is the mean
  of `elmo` over real tokens.
- `deeppavlov_elmo/`: a TF1 Hub module in the manner of DeepPavlov's elmo2tfhub.py: the same
  signatures, the `default` one's input named `strings`, a `version` output; the mix made by
  bilm-tf's own `weight_layers` inside `aggregation/` (`elmo_output_ELMo_W` (3,),
  `elmo_output_ELMo_gamma` (1,), softmax(W + 1/3)), `elmo` not masked at padding, `default`
  the masked mean of the mix without gamma.

Both checkpoints come out split over two data files, with no help from here: bilm-tf pins
`bilm/char_embed` to `/cpu:0` and leaves every other variable without a device, and TF Hub's
Saver is sharded, one data file per device (`variables.data-0000N-of-00002`).

The biLM graph of both is bilm-tf's own `BidirectionalLanguageModel` (PyPI `bilm==0.1.post5`,
patched as ../shared/peers/bilmtf.sh does: `import tensorflow.compat.v1 as tf` with v2
behaviour off) and the modules are exported by `tensorflow_hub==0.13.0`'s TF1 API
(`hub.create_module_spec`, `hub.Module(spec).export`), under TensorFlow 2's `tf.compat.v1`
with `TF_USE_LEGACY_KERAS=1` (tf_keras supplies `tf.compat.v1.nn.rnn_cell`). Both packages are
pip-installed into --cache on first use (`--no-deps`; the bilm sdist is downloaded and
patched there); `tensorflow_hub` 0.13.0 imports `tf.compat.v1.estimator`, gone since
TF 2.16, so a stand-in module is put in its place before the import.

The LSTM state buffers are allocated for `max_batch_size = 8` rows (bilm-tf's default is
128, DeepPavlov's 1024) to keep the fixtures small: callers of the modules pass batches of
at most 8 sentences. Everything is seeded: a rebuild writes the same weights.hdf5, the same
checkpoint files and the same graph; only saved_model.pb's bytes may differ, as TF1's while
contexts (a collection) hold protobuf maps, serialised in no fixed order.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import types

import numpy as np

HUB_VERSION = "0.13.0"
BILM_VERSION = "0.1.post5"
SEED = 57
MAX_BATCH_SIZE = 8
MAX_CHARACTERS_PER_TOKEN = 50
# Raw (unshifted) special char ids of bilm-tf's UnicodeCharsVocabulary; ids are fed + 1.
BEGIN_SENTENCE, END_SENTENCE, BEGIN_WORD, END_WORD, PADDING = 256, 257, 258, 259, 260

OPTIONS = {
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 4},
        "filters": [[1, 4], [2, 4], [3, 8], [4, 8], [5, 8]],
        "max_characters_per_token": MAX_CHARACTERS_PER_TOKEN,
        "n_characters": 262,
        "n_highway": 2,
    },
    "lstm": {
        "cell_clip": 3,
        "dim": 32,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 16,
        "use_skip_connections": True,
    },
}
MIX = {
    "google_elmo": {"aggregation/weights": [0.3, -0.2, 0.5], "aggregation/scaling": 1.7},
    "deeppavlov_elmo": {"aggregation/elmo_output_ELMo_W": [-0.4, 0.6, 0.1],
                        "aggregation/elmo_output_ELMo_gamma": [1.3]},
}
DEEPPAVLOV_VERSION = "from_dp_1"


# --- the input model: published-layout arrays from a fixed seed ---------------------------
def published_arrays(options, seed=SEED):
    """name -> float32 array of a random model, in weights.hdf5's layout and shapes."""
    rng = np.random.default_rng(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    embed_dim = cnn["embedding"]["dim"]
    n_filters = sum(num for _, num in cnn["filters"])
    proj, dim = lstm["projection_dim"], lstm["dim"]

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    arrays = {"char_embed": rng.uniform(-1.0, 1.0, (cnn["n_characters"] - 1, embed_dim))
              .astype(np.float32)}  # 261 rows: the file has no padding row
    for i, (width, num) in enumerate(cnn["filters"]):
        arrays[f"CNN/W_cnn_{i}"] = normal((1, width, embed_dim, num), 0.4)
        arrays[f"CNN/b_cnn_{i}"] = normal((num,), 0.1)
    for k in range(cnn["n_highway"]):
        arrays[f"CNN_high_{k}/W_carry"] = normal((n_filters, n_filters), 1 / np.sqrt(n_filters))
        arrays[f"CNN_high_{k}/b_carry"] = normal((n_filters,), 0.5)
        arrays[f"CNN_high_{k}/W_transform"] = normal((n_filters, n_filters),
                                                     1.0 / np.sqrt(n_filters))
        arrays[f"CNN_high_{k}/b_transform"] = normal((n_filters,), 0.1)
    arrays["CNN_proj/W_proj"] = normal((n_filters, proj), 1.0 / np.sqrt(n_filters))
    arrays["CNN_proj/b_proj"] = normal((proj,), 0.1)
    for direction in range(2):
        for layer in range(lstm["n_layers"]):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            arrays[prefix + "W_0"] = normal((2 * proj, 4 * dim), 0.6)
            arrays[prefix + "B"] = normal((4 * dim,), 0.2)
            arrays[prefix + "W_P_0"] = normal((dim, proj), 0.5)  # proj_clip 3 is reached
    return arrays


def write_input_model(directory, options=OPTIONS):
    """options.json, weights.hdf5 and mix.json in `directory`; returns the two model paths.
    `options`: the fixtures' sizes by default (benchmarks/tfhub_load.py passes the published
    ones)."""
    import h5py

    os.makedirs(directory, exist_ok=True)
    options_file = os.path.join(directory, "options.json")
    weight_file = os.path.join(directory, "weights.hdf5")
    with open(options_file, "w") as f:
        json.dump(options, f, indent=2, sort_keys=True)
        f.write("\n")
    with h5py.File(weight_file, "w") as f:
        for name, array in sorted(published_arrays(options).items()):
            f.create_dataset(name, data=array)
    with open(os.path.join(directory, "mix.json"), "w") as f:
        json.dump(MIX, f, indent=2)
        f.write("\n")
    return options_file, weight_file


# --- the tools: tensorflow_hub 0.13.0 and bilm-tf, each in its own folder -------------------
def ensure_tools(cache):
    """Installs tensorflow_hub and the patched bilm into `cache`; returns their sys.path entries."""
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    hub_dir = os.path.join(cache, f"hub-{HUB_VERSION}")
    if not os.path.isdir(os.path.join(hub_dir, "tensorflow_hub")):
        subprocess.run(pip + ["install", "--no-deps", "--target", hub_dir,
                              f"tensorflow_hub=={HUB_VERSION}"], check=True)
    bilm_root = os.path.join(cache, f"bilm-{BILM_VERSION}")
    if not os.path.isdir(os.path.join(bilm_root, "bilm")):
        download = os.path.join(cache, "download")
        subprocess.run(pip + ["download", "--no-deps", "--no-binary", ":all:",
                              f"bilm=={BILM_VERSION}", "-d", download], check=True)
        with tarfile.open(os.path.join(download, f"bilm-{BILM_VERSION}.tar.gz")) as archive:
            archive.extractall(cache, filter="data")
        for name in ("model.py", "elmo.py", "training.py"):  # the bilmtf.sh patch
            path = os.path.join(bilm_root, "bilm", name)
            with open(path) as f:
                text = f.read()
            text = text.replace("\nimport tensorflow as tf\n",
                                "\nimport tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n",
                                1)
            with open(path, "w") as f:
                f.write(text)
    return [hub_dir, bilm_root]


def import_tools(paths):
    """(tf (compat.v1), hub, bilm) with v2 behaviour off and the estimator stand-in."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    sys.path[:0] = paths
    import tensorflow.compat.v1 as tf

    tf.disable_v2_behavior()
    stand_in = types.ModuleType("tensorflow.compat.v1.estimator")
    stand_in.Exporter = type("Exporter", (), {})  # hub.LatestModuleExporter's base class
    sys.modules["tensorflow.compat.v1.estimator"] = stand_in
    tf.estimator = stand_in
    import bilm
    import tensorflow_hub as hub

    return tf, hub, bilm


# --- graph pieces both publishers share ---------------------------------------------------
def sentence_char_ids(tf, tokens, sequence_len, max_chars):
    """Batcher's ids in the graph: tokens [b, T] string, sequence_len [b] int32 ->
    [b, T + 2, max_chars] int32, <S> and </S> added, ids + 1, rows past each sentence 0."""
    shape = tf.shape(tokens)
    flat = tf.reshape(tokens, [-1])  # [b * T]
    body_len = max_chars - 2
    codes = tf.cast(tf.raw_ops.DecodePaddedRaw(input_bytes=flat, fixed_length=body_len,
                                               out_type=tf.uint8), tf.int32)  # [b*T, 48]
    n_bytes = tf.minimum(tf.strings.length(flat), body_len)[:, None]  # [b*T, 1]
    codes = tf.pad(codes, [[0, 0], [1, 1]])  # [b*T, 50]: byte k at position k + 1
    position = tf.range(max_chars)[None, :]  # [1, 50]
    ids = tf.where_v2(position <= n_bytes, codes, tf.fill(tf.shape(codes), PADDING))
    ids = tf.where_v2(tf.equal(position, n_bytes + 1), tf.fill(tf.shape(codes), END_WORD), ids)
    ids = tf.where_v2(tf.equal(position, 0), tf.fill(tf.shape(codes), BEGIN_WORD), ids) + 1
    ids = tf.reshape(ids, [shape[0], shape[1], max_chars])  # [b, T, 50]
    real = tf.sequence_mask(sequence_len, shape[1], dtype=tf.int32)  # [b, T]
    ids = ids * real[:, :, None]

    def special(char):  # [50]: BOW, char, EOW, padding..., all + 1
        row = np.full([max_chars], PADDING, np.int32)
        row[:3] = [BEGIN_WORD, char, END_WORD]
        return tf.constant(row + 1)

    zeros = tf.zeros([shape[0], 1, max_chars], tf.int32)
    bos = zeros + special(BEGIN_SENTENCE)
    ids = tf.concat([bos, ids, zeros], axis=1)  # [b, T + 2, 50]
    at_eos = tf.one_hot(sequence_len + 1, shape[1] + 2, dtype=tf.int32)  # [b, T + 2]
    return ids + at_eos[:, :, None] * special(END_SENTENCE)


def split_sentences(tf, strings):
    """[b] sentences -> (tokens [b, T] padded with "", sequence_len [b] int32), split on " "."""
    sparse = tf.string_split(strings)
    tokens = tf.sparse_to_dense(sparse.indices, sparse.dense_shape, sparse.values,
                                default_value="")
    sequence_len = tf.reduce_sum(tf.cast(tf.not_equal(tokens, ""), tf.int32), axis=-1)
    return tokens, sequence_len


def layer_outputs(tf, ops):
    """bilm-tf's ops -> (layers [3 x (b, T, 2P)], mask float (b, T, 1), word_emb (b, T, P))."""
    lm_embeddings = ops["lm_embeddings"]  # (b, 3, T, 2P)
    layers = [lm_embeddings[:, j] for j in range(lm_embeddings.shape[1])]
    half = int(lm_embeddings.shape[-1]) // 2
    mask = tf.cast(ops["mask"], tf.float32)[:, :, None]
    return layers, mask, layers[0][:, :, :half]


def masked_mean(tf, values, mask):
    """values (b, T, D), mask (b, T, 1) -> (b, D) mean over real tokens (0 for none)."""
    count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)  # (b, 1)
    return tf.reduce_sum(values * mask, axis=1) / count


# --- the two publishers -----------------------------------------------------------------
def google_module_fn(tf, hub, bilm, options_file, weight_file):
    def module_fn():
        model = bilm.BidirectionalLanguageModel(options_file, weight_file,
                                                max_batch_size=MAX_BATCH_SIZE)

        def outputs(tokens, sequence_len):
            ids = sentence_char_ids(tf, tokens, sequence_len, MAX_CHARACTERS_PER_TOKEN)
            layers, mask, word_emb = layer_outputs(tf, model(ids))
            with tf.variable_scope("aggregation", reuse=tf.AUTO_REUSE):
                weights = tf.get_variable("weights", [len(layers)],
                                          initializer=tf.zeros_initializer())
                scaling = tf.get_variable("scaling", [], initializer=tf.ones_initializer())
            normed = tf.unstack(tf.nn.softmax(weights))
            elmo = scaling * tf.add_n([w * h for w, h in zip(normed, layers)]) * mask
            return {"word_emb": word_emb, "lstm_outputs1": layers[1],
                    "lstm_outputs2": layers[2], "elmo": elmo,
                    "default": masked_mean(tf, elmo, mask)}

        tokens = tf.placeholder(tf.string, [None, None], name="tokens")
        sequence_len = tf.placeholder(tf.int32, [None], name="sequence_len")
        hub.add_signature("tokens", {"tokens": tokens, "sequence_len": sequence_len},
                          outputs(tokens, sequence_len))
        strings = tf.placeholder(tf.string, [None], name="strings")
        hub.add_signature("default", strings, outputs(*split_sentences(tf, strings)))

    return module_fn


def deeppavlov_module_fn(tf, hub, bilm, options_file, weight_file):
    def module_fn():
        model = bilm.BidirectionalLanguageModel(options_file, weight_file,
                                                max_batch_size=MAX_BATCH_SIZE)
        max_word_length = tf.constant(MAX_CHARACTERS_PER_TOKEN, name="max_word_length")
        version = tf.constant(DEEPPAVLOV_VERSION, name="version")

        def outputs(tokens, sequence_len, reuse):
            ids = sentence_char_ids(tf, tokens, sequence_len, MAX_CHARACTERS_PER_TOKEN)
            with tf.control_dependencies([tf.assert_equal(tf.shape(ids)[2], max_word_length)]):
                ids = tf.identity(ids)
            ops = model(ids)
            with tf.variable_scope("aggregation", reuse=reuse):
                elmo = bilm.weight_layers("elmo_output", ops, l2_coef=0.0)["weighted_op"]
            unscaled = elmo.op.inputs[0]  # weight_layers' sum_pieces, before "* gamma"
            layers, mask, word_emb = layer_outputs(tf, ops)
            return {"elmo": elmo, "default": masked_mean(tf, unscaled, mask),
                    "word_emb": word_emb, "lstm_outputs1": layers[1],
                    "lstm_outputs2": layers[2], "version": version}

        tokens = tf.placeholder(tf.string, [None, None], name="ph2tokens")
        sequence_len = tf.placeholder(tf.int32, [None], name="ph2sequence_len")
        hub.add_signature("tokens", {"tokens": tokens, "sequence_len": sequence_len},
                          outputs(tokens, sequence_len, reuse=False))
        strings = tf.placeholder(tf.string, None)  # DeepPavlov's: no static shape
        hub.add_signature("default", {"strings": strings},
                          outputs(*split_sentences(tf, strings), reuse=True))

    return module_fn


def export_module(tf, hub, module_fn, directory, mix):
    """hub.Module(spec) in a fresh graph, the mix assigned, exported to `directory`."""
    spec = hub.create_module_spec(module_fn)
    with tf.Graph().as_default():
        tf.set_random_seed(SEED)
        module = hub.Module(spec)
        variables = module.variable_map
        assigns = [tf.assign(variables[name], np.asarray(value, np.float32))
                   for name, value in mix.items()]
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            session.run(assigns)
            if os.path.exists(directory):
                shutil.rmtree(directory)
            module.export(directory, session)
    return sorted(variables)


def build(out, cache):
    """Writes input_model/, google_elmo/ and deeppavlov_elmo/ under `out`."""
    tf, hub, bilm = import_tools(ensure_tools(cache))
    options_file, weight_file = write_input_model(os.path.join(out, "input_model"))
    names = export_module(tf, hub, google_module_fn(tf, hub, bilm, options_file, weight_file),
                          os.path.join(out, "google_elmo"), MIX["google_elmo"])
    print("google_elmo:", len(names), "variables")

    module_fn = deeppavlov_module_fn(tf, hub, bilm, options_file, weight_file)
    names = export_module(tf, hub, module_fn,
                          os.path.join(out, "deeppavlov_elmo"), MIX["deeppavlov_elmo"])
    print("deeppavlov_elmo:", len(names), "variables")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Build the TF1 Hub ELMo module fixtures (Google's and DeepPavlov's "
                    "conventions) with tensorflow_hub 0.13.0 and bilm-tf.")
    parser.add_argument("--out",
                        default=os.path.join(os.path.dirname(__file__), "fixtures", "tfhub"),
                        help="output folder (default: tests/fixtures/tfhub)")
    parser.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache",
                                                        "keras_elmo_tfhub_builder"),
                        help="where tensorflow_hub and bilm are installed (default: %(default)s)")
    args = parser.parse_args(argv)
    build(os.path.abspath(args.out), os.path.abspath(args.cache))


if __name__ == "__main__":
    main()
