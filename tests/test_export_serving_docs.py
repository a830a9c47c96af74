"""docs/serving.md: every REST request body is accepted by the exported signatures.

Each ```json request is converted to tensors as TF Serving does (row format `instances`:
one object per batch row, or bare values for a one-input signature; columnar `inputs`)
and fed through the loaded SavedModel. Each response example that follows a row-format
request must have exactly the signature's outputs, with the nesting of the real outputs
(vectors are shortened in the document, so only their last axis may differ), and the
model-independent outputs (`sequence_mask`, `tokens`) must equal the real ones.
"""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.export import load_mix_weights

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "serving.md")


def _json_blocks():
    with open(DOC, encoding="utf-8") as f:
        return [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", f.read(),
                                                          flags=re.S)]


@pytest.fixture(scope="module")
def loaded(exported_tiny_model):
    """The tiny model's export (once per session, conftest.py), loaded: the documents'
    requests fit any export, their response checks are of shapes and of model-independent
    outputs."""
    return tf.saved_model.load(exported_tiny_model["path"])


def _feed(function, request):
    """The request's tensors, by input name, as TF Serving builds them."""
    specs = function.structured_input_signature[1]
    if "instances" in request:
        rows = request["instances"]
        if rows and not isinstance(rows[0], dict):
            (name,) = specs  # bare values: only for a one-input signature
            columns = {name: rows}
        else:
            columns = {name: [row[name] for row in rows] for name in rows[0]}
    else:
        columns = request["inputs"]
        if not isinstance(columns, dict):
            (name,) = specs
            columns = {name: columns}
    assert sorted(columns) == sorted(specs), (sorted(columns), sorted(specs))
    return {name: tf.constant(value, dtype=specs[name].dtype) for name, value in columns.items()}


def _nested_shape(value):
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def _check_response(response, outputs):
    predictions = response["predictions"]
    assert len(predictions) == outputs["default"].shape[0]
    for row, prediction in enumerate(predictions):
        assert sorted(prediction) == sorted(outputs), (sorted(prediction), sorted(outputs))
        for name, value in prediction.items():
            real = outputs[name].numpy()[row]
            shape = _nested_shape(value)
            if real.dtype.kind == "f":  # vectors are shortened to a few numbers
                assert shape[:-1] == list(real.shape[:-1]) and len(shape) == real.ndim, name
            else:
                expected = [t.decode() for t in real] if real.dtype == object else real.tolist()
                assert value == expected, (name, value, expected)


def test_documented_requests_are_accepted_and_responses_match_the_outputs(loaded):
    blocks = _json_blocks()
    requests = [b for b in blocks if "instances" in b or "inputs" in b]
    responses = [b for b in blocks if "predictions" in b]
    signatures = {r.get("signature_name", "serving_default") for r in requests}
    assert signatures == {"default", "tokens", "char_ids"}
    assert len(responses) == 3
    last_row_outputs = None
    checked = 0
    for block in blocks:
        if "instances" in block or "inputs" in block:
            function = loaded.signatures[block.get("signature_name", "serving_default")]
            outputs = function(**_feed(function, block))
            if "instances" in block:
                last_row_outputs = outputs
        elif "predictions" in block:
            _check_response(block, last_row_outputs)
            checked += 1
    assert checked == 3


def test_documented_char_ids_are_those_of_batch_to_ids():
    (request,) = [b for b in _json_blocks() if b.get("signature_name") == "char_ids"]
    ids = request["instances"][0]["char_ids"]
    assert ids == keras_elmo.batch_to_ids([["Hi"]])[0].tolist()


def test_documented_mix_file_loads(tmp_path):
    (mix,) = [b for b in _json_blocks() if "scalar_parameters" in b]
    (tmp_path / "scalar_mix.json").write_text(json.dumps(mix))
    loaded_mix = load_mix_weights(tmp_path / "scalar_mix.json", num_layers=3)
    np.testing.assert_allclose(loaded_mix.scalar_parameters.numpy(), mix["scalar_parameters"])
