"""TrainingConfig: options.json round trip, presets, validation, resume conflicts."""

import json

import pytest

from keras_elmo.formats.options import BiLMOptions
from keras_elmo.training.config import TrainingConfig, merge_dicts


def test_round_trip_through_options_json(tmp_path):
    config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=50, n_train_tokens=1234,
                                                    train_prefix="data/*.txt")
    path = tmp_path / "options.json"
    config.save(path)
    assert TrainingConfig.from_file(path) == config
    data = json.loads(path.read_text())
    # The published keys at the top level, the architecture under lstm / char_cnn.
    for key in ("n_tokens_vocab", "batch_size", "dropout", "n_negative_samples_batch",
                "all_clip_norm_val", "n_epochs", "n_train_tokens", "bidirectional"):
        assert key in data
    assert data["lstm"]["projection_dim"] == 8 and data["char_cnn"]["n_characters"] == 262
    # The file is also a valid BiLM options.json.
    assert BiLMOptions.from_file(path) == BiLMOptions.tiny()


def test_presets_and_published_recipe():
    published = TrainingConfig.preset("published")
    assert published.options == BiLMOptions.published()
    assert (published.learning_rate, published.initial_accumulator_value,
            published.all_clip_norm_val, published.dropout,
            published.n_negative_samples_batch) == (0.2, 1.0, 10.0, 0.1, 8192)
    assert published.optimizer == "adagrad"
    assert TrainingConfig.preset("small").options == BiLMOptions.small(lstm_units=384)
    with pytest.raises(ValueError, match="size must be one of"):
        TrainingConfig.preset("huge")


def test_softmax_choice_and_sample_cap():
    config = TrainingConfig.preset("tiny")  # full softmax up to 1024 words, 64 negatives
    assert not config.replace(n_tokens_vocab=1024).use_sampled_softmax
    assert config.replace(n_tokens_vocab=1025).use_sampled_softmax
    assert config.replace(n_tokens_vocab=20).num_sampled == 19
    assert config.replace(n_tokens_vocab=5000).num_sampled == 64


@pytest.mark.parametrize("changes, message", [
    ({"dropout": 1.0}, "dropout"),
    ({"batch_tokens": 10}, "batch_tokens"),
    ({"tokenizer": "chars"}, "tokenizer"),  # jieba is a tokenizer since issue 17
    ({"bidirectional": False}, "bidirectional"),
    ({"n_tokens_vocab": 2}, "n_tokens_vocab"),
    ({"learning_rate": 0.0}, "learning_rate"),
    ({"optimizer": "sgd"}, "optimizer must be one of"),
])
def test_rejects_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig.preset("tiny").replace(**changes)


def test_conflicts_ignore_resumable_keys():
    config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=50)
    assert config.conflicts(config.replace(n_epochs=7, checkpoint_every_steps=3)) == []
    assert config.conflicts(config.replace(batch_tokens=512)) == [("batch_tokens", 256, 512)]
    other = config.replace(options=BiLMOptions.tiny(projection_dim=6))
    assert ("lstm.projection_dim", 8, 6) in config.conflicts(other)


def test_merge_dicts_is_deep():
    merged = merge_dicts({"lstm": {"dim": 4, "n_layers": 2}, "dropout": 0.1},
                         {"lstm": {"dim": 8}, "seed": 3})
    assert merged == {"lstm": {"dim": 8, "n_layers": 2}, "dropout": 0.1, "seed": 3}
