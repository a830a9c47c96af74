"""docs/serving.md, "Chinese and other text without spaces between words": its jieba client,
run as written against an exported model, shows the segmented tokens in `tokens`."""

import os
import re

import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.export import export_saved_model
from test_export_helpers import make_model_dir

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "serving.md")
SECTION = "## Chinese and other text without spaces between words"


def _client_code():
    text = open(DOC, encoding="utf-8").read()
    section = text[text.index(SECTION):]
    return re.search(r"```python\n(.*?)\n```", section, flags=re.S).group(1)


@pytest.mark.slow
def test_the_documented_jieba_client_runs_and_its_tokens_are_jieba_words(tmp_path):
    options, weights = make_model_dir(str(tmp_path / "model"))
    path = export_saved_model(keras_elmo.BiLM.from_weights(options, weights),
                              str(tmp_path / "elmo" / "1"))
    code = _client_code().replace('"serving/elmo/1"', repr(str(path)))
    namespace = {}
    exec(compile(code, "serving.md", "exec"), namespace)  # the client, as documented
    tokens = [[t.decode("utf-8") for t in row] for row in namespace["out"]["tokens"].numpy()]
    assert tokens == [["我", "爱", "北京", "天安门", "。"], ["他", "打篮球", "。", "", ""]]
    assert namespace["out"]["elmo"].shape[:2] == (2, 5)
    # Unsegmented, `default` sees one token per sentence: what the section warns about.
    raw = namespace["elmo"].signatures["default"](text=tf.constant(namespace["raw"]))
    assert raw["tokens"].shape == (2, 1)
