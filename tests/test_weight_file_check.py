"""A weight file checked against its options without building a model: the shapes it lists
are the ones `save_published` writes and the spec's table gives, for byte and vocabulary
models; a file cut short, a dataset missing, of another shape or extra is one line."""

import h5py
import pytest

import keras_elmo
import weight_fixtures
from keras_elmo.formats.options import BiLMOptions
from keras_elmo.formats.weight_file import bilm_weight_arrays
from keras_elmo.formats.weight_file_check import check_weight_file, published_shapes

VARIANTS = {
    "tiny": BiLMOptions.tiny(),
    "no highway, one layer": BiLMOptions.tiny(num_highway=0, num_layers=1),
    "filters total the projection (no CNN_proj)": BiLMOptions.tiny(
        filters=((1, 4), (2, 4)), projection_dim=8),
    "vocabulary model with words": BiLMOptions.tiny(
        char_vocabulary=True, num_characters=30, begin_word_char=1, end_word_char=2,
        padding_char=3, begin_sentence_char=4, end_sentence_char=5, word_vocabulary_size=9,
        word_embedding_dim=6, begin_sentence_word=1, end_sentence_word=2, forget_bias=0.0),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_shapes_are_the_ones_save_published_writes(name):
    options = VARIANTS[name]
    written = {k: v.shape for k, v in bilm_weight_arrays(keras_elmo.BiLM(options)).items()}
    assert published_shapes(options) == written


def test_the_shapes_are_the_spec_tables():
    options = weight_fixtures.make_options()
    assert published_shapes(BiLMOptions.from_dict(options)) == {
        name: tuple(shape) for name, shape in weight_fixtures.weight_shapes(options).items()}


def test_a_whole_file_passes_and_a_cut_one_is_refused(tmp_path):
    options = BiLMOptions.tiny()
    keras_elmo.save_published(keras_elmo.BiLM(options), str(tmp_path / "m"))
    check_weight_file(options, tmp_path / "m" / "weights.hdf5")
    data = (tmp_path / "m" / "weights.hdf5").read_bytes()
    (tmp_path / "cut.hdf5").write_bytes(data[:len(data) - 1000])
    with pytest.raises(ValueError, match=r"cut.hdf5 is not a readable HDF5 file \(.*truncated"):
        check_weight_file(options, tmp_path / "cut.hdf5")
    (tmp_path / "page.hdf5").write_bytes(b"<!DOCTYPE html><html></html>")
    with pytest.raises(ValueError, match="page.hdf5 is not a readable HDF5 file"):
        check_weight_file(options, tmp_path / "page.hdf5")


def test_a_missing_wrong_or_extra_dataset_is_refused(tmp_path):
    options = BiLMOptions.tiny()
    keras_elmo.save_published(keras_elmo.BiLM(options), str(tmp_path / "m"))
    path = tmp_path / "m" / "weights.hdf5"
    with pytest.raises(ValueError, match=r"dataset 'char_embed' has shape \(261, 4\), expected "
                                         r"\(261, 5\)"):
        check_weight_file(BiLMOptions.tiny(char_embedding_dim=5), path)
    with h5py.File(path, "a") as handle:
        handle.create_dataset("CNN_high_7/W_carry", data=[[0.0]])
    with pytest.raises(ValueError, match="has dataset 'CNN_high_7/W_carry' with shape"):
        check_weight_file(options, path)
    with h5py.File(path, "a") as handle:
        del handle["CNN_high_7/W_carry"], handle["char_embed"]
    with pytest.raises(ValueError, match="has no dataset 'char_embed'"):
        check_weight_file(options, path)
