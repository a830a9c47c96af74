"""`load_bilm`: the biLM of any model directory, catalog name or URL, with its vocabulary.

A catalog name (`"elmo-small"`, `"efml-zhs"`: `keras-elmo models` lists them), the URL of a
model archive, or an options/weights pair of URLs is fetched into the download cache once
and checked at every later use (`keras_elmo.pretrained.resolve`); a local directory of the
same spelling wins. Three kinds of directory hold a biLM, told apart by their files
(`keras_elmo.formats.model_files.resolve_model_files`):

- a byte model in the published layout (`keras-elmo train`, bilm-tf, AllenNLP):
  options.json + weights.hdf5;
- a vocabulary model in the published layout (a `keras-elmo train --init-from` of an
  ELMoForManyLangs model): the same two files plus char.dic (and word.dic), its token
  vocabulary;
- an ELMoForManyLangs model directory as downloaded (`BiLM.from_efml`).

Every command and Python entry point that reads a model goes through `load_bilm`, so each
accepts all three.

Example:
>>> bilm = load_bilm("efml-zhs")  # the catalog's simplified Chinese  # doctest: +SKIP
>>> out = bilm(bilm.batch_to_ids([["北京", "欢迎", "你"]]))  # doctest: +SKIP
>>> elmo = keras_elmo.ElmoLayer(bilm)  # takes tf.string tokens  # doctest: +SKIP
"""

from keras_elmo.formats.model_files import ModelFiles


def load_bilm(model_dir=None, options_file=None, weight_file=None, **kwargs):
    """A `keras_elmo.BiLM` with the weights (and a vocabulary model's vocabulary) of a
    model directory, or of a published options/weights pair.

    Args:
        model_dir: a model directory of any of the three kinds (module docstring), a
            catalog name, the URL of a model archive, or the `ModelFiles` that
            `resolve_model_files` returned for a directory.
        options_file, weight_file: instead of `model_dir`, a published pair of any names,
            or of two URLs.
        **kwargs: the `BiLM` constructor's (`dtype`, `stateful`, `name`, ...).

    Returns:
        `BiLM`; its `vocabulary` is set for a vocabulary model.

    Raises:
        FileNotFoundError / ValueError: one line naming the file that is missing or does not
            fit, or the unknown name (with the nearest names); nothing is loaded.
        OSError: a download that failed (`keras_elmo.pretrained.fetch.fetch`; one line).

    Example:
    >>> _ = keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "tiny")
    >>> bilm = load_bilm("tiny")
    >>> bilm(bilm.batch_to_ids([["a", "b"]]))["layers"].shape  # (batch, L + 1, T, 2P)
    TensorShape([1, 3, 2, 16])
    >>> load_bilm("zhs.model").vocabulary is not None  # ELMoForManyLangs  # doctest: +SKIP
    True
    >>> load_bilm("elmo-small").output_dim  # downloaded once, then cached  # doctest: +SKIP
    256
    """
    from keras_elmo.models.bilm import BiLM

    if isinstance(model_dir, ModelFiles):
        files = model_dir
    else:
        from keras_elmo.pretrained.resolve import resolve_files

        files = resolve_files(model_dir, options_file, weight_file)
    return BiLM.from_model_files(files, **kwargs)
