"""SavedModel export (export/): signatures, equality with the eager Keras model, edge cases.

The artifact is loaded in this process here; tests/test_export_tf_only.py loads it in a
fresh process that has TensorFlow only.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.export import (ElmoModule, build_mix, export_model_dir, export_saved_model,
                    load_mix_weights, save_mix_weights)
from test_export_helpers import BATCHES, MIX, assert_outputs_close, eager_reference, padded

OUTPUTS = ["default", "elmo", "lstm_outputs1", "lstm_outputs2", "sequence_mask", "word_emb"]


@pytest.fixture(scope="module")
def model(exported_tiny_model):
    """Tiny model dir with a scalar_mix.json, exported to base/1 (once per session,
    conftest.py) and loaded."""
    return dict(exported_tiny_model, loaded=tf.saved_model.load(exported_tiny_model["path"]))


def _call(loaded, signature, sentences):
    fn = loaded.signatures[signature]
    if signature == "tokens":
        tokens, lengths = padded(sentences)
        return fn(tokens=tf.constant(tokens.astype(str).reshape(tokens.shape), tf.string),
                  sequence_len=tf.constant(lengths))
    if signature in ("default", "serving_default"):
        return fn(text=tf.constant([" ".join(s) for s in sentences], tf.string))
    return fn(char_ids=tf.constant(keras_elmo.batch_to_ids(sentences)))


def _numpy(outputs):
    return {name: value.numpy() for name, value in outputs.items()}


def test_signatures_have_the_documented_names_and_shapes(model):
    signatures = model["loaded"].signatures
    assert sorted(signatures) == ["char_ids", "default", "serving_default", "tokens"]
    inputs = {name: {k: (v.dtype, v.shape.as_list())
                     for k, v in fn.structured_input_signature[1].items()}
              for name, fn in signatures.items()}
    assert inputs["tokens"] == {"tokens": (tf.string, [None, None]),
                                "sequence_len": (tf.int32, [None])}
    assert inputs["default"] == inputs["serving_default"] == {"text": (tf.string, [None])}
    assert inputs["char_ids"] == {"char_ids": (tf.int32, [None, None, 50])}
    for name, fn in signatures.items():
        outputs = {k: (v.dtype, v.shape.as_list()) for k, v in fn.structured_outputs.items()}
        expected = {k: (tf.float32, [None, None, 16]) for k in
                    ("lstm_outputs1", "lstm_outputs2", "elmo")}
        # TF Hub's shapes: word_emb is the token layer (P = 8), not [x; x].
        expected.update(word_emb=(tf.float32, [None, None, 8]), default=(tf.float32, [None, 16]),
                        sequence_mask=(tf.bool, [None, None]))
        if name in ("default", "serving_default"):
            expected["tokens"] = (tf.string, [None, None])
        assert outputs == expected, name


@pytest.mark.parametrize("batch", [0, 1], ids=["batch3_len4", "batch1_len5"])
@pytest.mark.parametrize("signature", ["tokens", "default", "serving_default", "char_ids"])
def test_every_signature_equals_the_eager_keras_model(model, signature, batch):
    sentences = BATCHES[batch]
    expected = eager_reference(model["options"], model["weights"], sentences, mix=MIX)
    outputs = _numpy(_call(model["loaded"], signature, sentences))
    assert_outputs_close(outputs, expected, f"{signature} {batch}")
    if signature in ("default", "serving_default"):
        tokens, _ = padded(sentences)
        assert [[t.decode() for t in row] for row in outputs["tokens"]] == tokens.tolist()


def test_without_mix_file_the_even_mix_is_exported(model):
    bilm = keras_elmo.BiLM.from_weights(model["options"], model["weights"])
    module = ElmoModule(bilm)  # the tf.functions saved as signatures, called before saving
    expected = eager_reference(model["options"], model["weights"], BATCHES[0])
    tokens, lengths = padded(BATCHES[0])
    outputs = module.tokens(tf.constant(tokens.astype(str).reshape(tokens.shape)),
                            tf.constant(lengths))
    assert_outputs_close(_numpy(outputs), expected, "even mix")


def test_every_signature_runs_in_a_tf1_session_as_tf_serving_loads_it(model):
    """TF Serving and `saved_model_cli run` restore variables through the SavedModel's saver
    into a graph session; exporting Keras variable wrappers instead of the tf.Variables the
    graph reads made this fail ("Could not find variable ...") while TF2 loading worked."""
    sentences = BATCHES[0]
    tokens, lengths = padded(sentences)
    feeds = {"tokens": {"tokens": tokens.astype(str).reshape(tokens.shape),
                        "sequence_len": lengths},
             "default": {"text": np.array([" ".join(s) for s in sentences])},
             "char_ids": {"char_ids": keras_elmo.batch_to_ids(sentences)}}
    expected = eager_reference(model["options"], model["weights"], sentences, mix=MIX)
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], model["path"])
        for name, inputs in feeds.items():
            signature = meta_graph.signature_def[name]
            outputs = session.run(
                {k: v.name for k, v in signature.outputs.items()},
                {signature.inputs[k].name: v for k, v in inputs.items()})
            assert_outputs_close(outputs, expected, f"TF1 session {name}")


def test_empty_sentences_give_zero_vectors_and_false_mask(model):
    fns = model["loaded"].signatures
    for outputs, shape in [
            (fns["default"](text=tf.constant(["", "   "])), (2, 0)),  # max_len 0
            (fns["default"](text=tf.constant([""])), (1, 0)),
            (fns["tokens"](tokens=tf.constant([["", ""], ["", ""]]),
                           sequence_len=tf.constant([0, 0])), (2, 2)),
            (fns["tokens"](tokens=tf.zeros([3, 0], tf.string),
                           sequence_len=tf.constant([0, 0, 0])), (3, 0)),
            (fns["char_ids"](char_ids=tf.zeros([2, 3, 50], tf.int32)), (2, 3)),
            # A batch of no sentences at all.
            (fns["default"](text=tf.zeros([0], tf.string)), (0, 0)),
            (fns["tokens"](tokens=tf.zeros([0, 2], tf.string),
                           sequence_len=tf.zeros([0], tf.int32)), (0, 2)),
            (fns["char_ids"](char_ids=tf.zeros([0, 2, 50], tf.int32)), (0, 2))]:
        assert outputs["sequence_mask"].shape == shape
        assert not outputs["sequence_mask"].numpy().any()
        for name in OUTPUTS[:-2] + ["word_emb"]:
            assert not np.any(outputs[name].numpy()), name
        assert outputs["default"].shape == (shape[0], 16)


def test_empty_row_next_to_real_rows(model):
    outputs = model["loaded"].signatures["default"](text=tf.constant(["a b", ""]))
    assert outputs["sequence_mask"].numpy().tolist() == [[True, True], [False, False]]
    assert not outputs["elmo"].numpy()[1].any() and not outputs["default"].numpy()[1].any()
    assert np.abs(outputs["default"].numpy()[0]).sum() > 0


def test_tokens_past_sequence_len_are_padding_even_if_not_empty(model):
    fn = model["loaded"].signatures["tokens"]
    junk = _numpy(fn(tokens=tf.constant([["The", "cat", "JUNK", "MORE"], list("wxyz")]),
                     sequence_len=tf.constant([2, 4])))
    clean = eager_reference(model["options"], model["weights"], [["The", "cat"], list("wxyz")],
                            mix=MIX)
    assert_outputs_close(junk, clean, "sequence_len")
    assert junk["sequence_mask"].tolist() == [[True, True, False, False], [True] * 4]


def _with_no_token_at(outputs, position):
    """Outputs of a compacted batch with a no-token position inserted in every row."""
    result = {}
    for name, value in outputs.items():
        if name == "default":
            result[name] = value
            continue
        gap = np.zeros_like(value[:, :1])  # (batch, 1, ...): zeros, False
        result[name] = np.concatenate([value[:, :position], gap, value[:, position:]], axis=1)
    return result


def test_an_empty_string_token_is_no_token_in_every_signature(model):
    """`"a  b".split(" ")`: the middle `""` is no token, as in `batch_to_ids` and
    `ElmoLayer`; `a` and `b` get the vectors of the sentence `a b`, the gap zeros."""
    fns = model["loaded"].signatures
    compact = eager_reference(model["options"], model["weights"], [["a", "b"], ["c", "d"]],
                              mix=MIX)
    expected = _with_no_token_at(compact, 1)
    tokens = _numpy(fns["tokens"](tokens=tf.constant([["a", "", "b"], ["c", "", "d"]]),
                                  sequence_len=tf.constant([3, 3])))
    chars = _numpy(fns["char_ids"](char_ids=tf.constant(
        keras_elmo.batch_to_ids([["a", "", "b"], ["c", "", "d"]]))))
    assert_outputs_close(tokens, expected, "tokens with an empty string")
    assert_outputs_close(chars, expected, "char_ids with an all-zero row")
    assert tokens["sequence_mask"].tolist() == [[True, False, True]] * 2


def test_in_graph_tokenisation_and_char_ids_equal_the_python_path(model):
    fns = model["loaded"].signatures
    texts = ["a\u00a0b\u3000c\u2003d", "tab\there\nnew\x1cline", "x\u200by \ufeffz",
             " <S> lead  trail ", "w" * 60 + " \u00e9t\u00e9 \U0001F600"]
    graph = _numpy(fns["default"](text=tf.constant(texts)))
    sentences = [t.split() for t in texts]  # Python's whitespace split
    python = _numpy(fns["char_ids"](char_ids=tf.constant(keras_elmo.batch_to_ids(sentences))))
    assert_outputs_close(graph, python, "text vs python split + batch_to_ids")
    tokens, _ = padded(sentences)
    assert [[t.decode() for t in row] for row in graph["tokens"]] == tokens.tolist()


def test_unicode_whitespace_splits_like_python(model):
    text = "a\u00a0b\u3000c\u2028d\x85e x\u200by"
    tokens = model["loaded"].signatures["default"](text=tf.constant([text]))["tokens"]
    assert [t.decode() for t in tokens.numpy()[0]] == text.split() == \
        ["a", "b", "c", "d", "e", "x\u200by"]


def test_invalid_utf8_stays_a_token_its_bytes_dropped_inside_it(model):
    """Issue 27: `b"\\xfe"` between spaces was dropped (three tokens in, two vectors out).
    The raw bytes are split first (an invalid byte is never a space), then the char ids drop
    the invalid bytes inside each token: `\\xfe` is the empty word."""
    fns = model["loaded"].signatures
    raw = b"ab\xff c \xfe d \xff\xfe"
    graph = _numpy(fns["default"](text=tf.constant([raw])))
    sentence = [t.encode("utf-8", "surrogateescape")
                for t in raw.decode("utf-8", "surrogateescape").split()]
    assert graph["tokens"].tolist() == [sentence] == [[b"ab\xff", b"c", b"\xfe", b"d",
                                                       b"\xff\xfe"]]
    assert graph["sequence_mask"].tolist() == [[True] * 5]
    # Python's char ids of the same bytes tokens (an empty string would be no token).
    python = _numpy(fns["char_ids"](char_ids=tf.constant(keras_elmo.batch_to_ids(
        [sentence]))))
    assert_outputs_close(graph, python, "invalid utf-8")


def test_sentences_longer_than_max_length_run_in_windows_in_every_signature(model):
    """Issue 27: a sentence over max_length failed its whole batch ("Graph execution
    error:"). Now it runs in windows of max_length tokens, one vector per token."""
    bilm = keras_elmo.BiLM.from_weights(model["options"], model["weights"])
    module = ElmoModule(bilm, max_length=3)
    words = list("abcdefg")
    alone = [np.asarray(bilm(keras_elmo.batch_to_ids([w]))["layers"])[0]
             for w in (words[0:3], words[3:6], words[6:7])]
    windows = np.concatenate(alone, axis=1)  # (L + 1, 7, 2P)
    short = np.asarray(bilm(keras_elmo.batch_to_ids([["x", "y"]]))["layers"])[0]
    calls = {
        "default": module.default(tf.constant(["a b c d e f g", "x y"])),
        "tokens": module.tokens(tf.constant([words, ["x", "y", "", "", "", "", ""]]),
                                tf.constant([7, 2])),
        "char_ids": module.char_ids(tf.constant(keras_elmo.batch_to_ids([words, ["x", "y"]])))}
    for name, out in calls.items():
        assert out["sequence_mask"].numpy().sum(axis=1).tolist() == [7, 2], name
        for j in (1, 2):
            np.testing.assert_allclose(out[f"lstm_outputs{j}"][0], windows[j], atol=1e-5,
                                       err_msg=name)
            np.testing.assert_allclose(out[f"lstm_outputs{j}"][1, :2], short[j], atol=1e-5,
                                       err_msg=name)
        assert not out["elmo"][1, 2:].numpy().any(), name
    # Padding past the real tokens does not count.
    wide = module.tokens(tf.constant([["a", "b", "", "", ""]]), tf.constant([2]))
    assert wide["elmo"].shape == (1, 5, 16)


@pytest.mark.parametrize("signature, inputs, message", [
    ("tokens", dict(tokens=tf.constant([[1, 2]]), sequence_len=tf.constant([2])),
     "expected to be a string tensor but is a int32"),
    ("tokens", dict(tokens=tf.constant(["a", "b"]), sequence_len=tf.constant([2])),
     r"Shape of tensor tokens \[2\] is not compatible with expected shape \[\?,\?\]"),
    ("tokens", dict(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant(2)),
     r"Shape of tensor sequence_len \[\] is not compatible"),
    ("tokens", dict(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant([2, 1])),
     "sequence_len must have one entry per row of tokens"),
    ("tokens", dict(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant([3])),
     "sequence_len is larger than max_len"),
    ("tokens", dict(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant([-1])),
     "sequence_len must be >= 0"),
    ("default", dict(text=tf.constant([["a b"]])),
     r"Shape of tensor text \[1,1\] is not compatible with expected shape \[\?\]"),
    ("char_ids", dict(char_ids=tf.zeros([1, 2, 49], tf.int32)),
     r"Shape of tensor char_ids \[1,2,49\] is not compatible with expected shape \[\?,\?,50\]"),
    ("char_ids", dict(char_ids=tf.fill([1, 2, 50], 262)), "char ids must be < 262"),
    ("char_ids", dict(char_ids=tf.fill([1, 2, 50], -1)), "char ids must be >= 0"),
])
def test_wrong_inputs_fail_at_the_signature_boundary(model, signature, inputs, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        model["loaded"].signatures[signature](**inputs)


def test_saved_model_wraps_as_tfsm_layer_in_a_new_keras_model(model):
    import keras

    text = keras.Input(shape=(), dtype="string", name="text")
    elmo = keras.layers.TFSMLayer(model["path"], call_endpoint="default")(text)["default"]
    scores = keras.layers.Dense(2, kernel_initializer="ones", name="classifier")(elmo)
    classifier = keras.Model(text, scores)
    sentences = BATCHES[0]
    got = classifier(tf.constant([" ".join(s) for s in sentences])).numpy()
    expected = eager_reference(model["options"], model["weights"], sentences, mix=MIX)
    np.testing.assert_allclose(got, expected["default"].sum(-1, keepdims=True).repeat(2, -1),
                               atol=1e-4)

    tokens_in = keras.Input(shape=(None,), dtype="string", name="tokens")
    lengths_in = keras.Input(shape=(), dtype="int32", name="sequence_len")
    layer = keras.layers.TFSMLayer(model["path"], call_endpoint="tokens")
    tagger = keras.Model([tokens_in, lengths_in],
                         layer(tokens_in, sequence_len=lengths_in)["elmo"])
    tokens, lengths = padded(BATCHES[1])
    got = tagger([tf.constant(tokens.astype(str).reshape(tokens.shape)), tf.constant(lengths)])
    expected = eager_reference(model["options"], model["weights"], BATCHES[1], mix=MIX)
    np.testing.assert_allclose(got.numpy(), expected["elmo"], atol=1e-5)


def test_export_writes_metadata_and_options_in_assets_extra(model):
    extra = os.path.join(model["path"], "assets.extra")
    metadata = json.load(open(os.path.join(extra, "keras_elmo_export.json")))
    assert metadata["max_length"] == 512
    assert metadata["signatures"] == ["tokens", "default", "char_ids", "serving_default"]
    assert metadata["scalar_mix"]["scalar_parameters"] == pytest.approx(MIX["scalar_parameters"])
    assert metadata["scalar_mix"]["gamma"] == pytest.approx(MIX["gamma"])
    assert keras_elmo.BiLMOptions.from_file(os.path.join(extra, "options.json")) == \
        keras_elmo.BiLMOptions.from_file(model["options"])
    assert not [n for n in os.listdir(os.path.dirname(model["path"])) if n.startswith(".")]


@pytest.mark.slow  # a second export
def test_export_from_an_elmo_layer_uses_its_trained_mix(model, tmp_path):
    layer = keras_elmo.ElmoLayer.from_weights(model["options"], model["weights"])
    layer.build()
    layer.scalar_mixes[0].scalar_parameters.assign(MIX["scalar_parameters"])
    layer.scalar_mixes[0].gamma.assign(MIX["gamma"])
    save_mix_weights(layer.scalar_mixes[0], tmp_path / "mix.json")
    assert load_mix_weights(tmp_path / "mix.json", 3).gamma.numpy() == pytest.approx(1.6)
    path = export_saved_model(layer, tmp_path / "sm", max_length=8)
    outputs = _numpy(tf.saved_model.load(path).signatures["default"](text=tf.constant(["a b"])))
    expected = eager_reference(model["options"], model["weights"], [["a", "b"]], mix=MIX)
    assert_outputs_close(outputs, expected, "from ElmoLayer")


def test_export_refuses_bad_requests(model, tmp_path):
    bilm = keras_elmo.BiLM.from_weights(model["options"], model["weights"])
    with pytest.raises(ValueError, match="already exists and is not empty"):
        export_saved_model(bilm, model["path"])
    with pytest.raises(ValueError, match="stateless BiLM"):
        ElmoModule(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny(), stateful=True))
    with pytest.raises(ValueError, match="max_length must be a positive int; received 0"):
        ElmoModule(bilm, max_length=0)
    with pytest.raises(ValueError, match="scalar_mix must be built over the biLM's 3 layers"):
        ElmoModule(bilm, scalar_mix=build_mix(2))
    with pytest.raises(ValueError, match="expects a keras_elmo.BiLM, ElmoLayer or"):
        export_saved_model("model", tmp_path / "x")
    with pytest.raises(ValueError, match="version must be an int >= 0"):
        export_model_dir(os.path.dirname(model["options"]), tmp_path / "x", version=-1)
    (tmp_path / "mix.json").write_text('{"scalar_parameters": [0, 0], "gamma": 1}')
    with pytest.raises(ValueError, match="has 2 scalar_parameters; the biLM has 3 layers"):
        load_mix_weights(tmp_path / "mix.json", 3)
    with pytest.raises(FileNotFoundError, match="has no options.json"):
        export_model_dir(tmp_path, tmp_path / "out")
