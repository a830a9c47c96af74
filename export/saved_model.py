"""Writing an ELMo SavedModel: `export_saved_model` and the model-directory front end.

The SavedModel holds the biLM's weights, the scalar mix and the `tokens`, `default`
(= `serving_default`) and `char_ids` signatures of `ElmoModule`; it loads with
`tf.saved_model.load` (or TF Serving) with only TensorFlow installed. Beside the graph,
`assets.extra/` (which TF Serving ignores) keeps `options.json` and `keras_elmo_export.json`
(max_length, mix weights, signature names) for people inspecting the export.

The directory appears atomically: it is written under a temporary name beside the target
and renamed into place, so TF Serving, which watches the version folders of its base path,
never sees a half-written version. Less free space than the weights take is refused before
anything is traced or written; a storage fault (full, quota, read-only, permission) removes
the partial export and is one `StorageError` line (`keras_elmo.process.atomic_file`).

Example:
>>> export_model_dir("runs/small", "serving/elmo", version=1)  # doctest: +SKIP
'serving/elmo/1'
>>> export_saved_model(keras_elmo.ElmoLayer.from_weights(o, w), "elmo_sm")  # doctest: +SKIP
"""

import json
import os

import tensorflow as tf

import keras_elmo
from keras_elmo.process.atomic_file import atomic_directory
from keras_elmo.models.bilm import BiLM
from keras_elmo.models.elmo_layer import ElmoLayer
from keras_elmo.export.elmo_module import DEFAULT_MAX_LENGTH, SIGNATURES, ElmoModule
from keras_elmo.export.mix_weights import build_trained_mix, load_mix_weights
from keras_elmo.formats.model_mix import model_mix
from keras_elmo.formats.model_files import OPTIONS_FILE, resolve_model_files
from keras_elmo.models.loading import load_bilm
from keras_elmo.validation import check_int

#: Written into `assets.extra/` of every export.
METADATA_FILE = "keras_elmo_export.json"


def export_saved_model(model, path, scalar_mix=None, max_length=DEFAULT_MAX_LENGTH,
                       trainable_bilm=False, overwrite=False, default_with_gamma=True,
                       text_input="text"):
    """Writes an ELMo SavedModel with the `tokens`, `default` and `char_ids` signatures.

    Example:
    >>> export_saved_model(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "exports/bilm")
    'exports/bilm'
    >>> sorted(tf.saved_model.load("exports/bilm").signatures)
    ['char_ids', 'default', 'serving_default', 'tokens']

    Args:
        model: a `keras_elmo.BiLM` (exported with `scalar_mix`, else the even mix), an
            `ElmoLayer` (its biLM and, unless `scalar_mix` is given, its first trained
            mix), or an `ElmoModule`.
        path: the SavedModel directory to create (for TF Serving: `BASE/<version>`).
        scalar_mix: a built `keras_elmo.ScalarMix` to export as the `elmo` output.
        max_length: int, most tokens per sentence the signatures accept (512).
        trainable_bilm: bool, list the biLM's variables among the export's
            `trainable_variables` (False: only the mix's `s` and `gamma`, as TF Hub's ELMo).
        overwrite: bool, replace an existing non-empty `path` (False: refuse).
        default_with_gamma: bool, `default` pools `elmo` (True, Google's TF Hub modules);
            False pools the mix without `gamma`, as DeepPavlov's modules do (an export of a
            DeepPavlov module sets it: `export_model_files`).
        text_input: str, the `default` signature's input name (`"text"`; a TF Hub module's
            export keeps the module's own: `"default"` for Google's, `"strings"` for
            DeepPavlov's).

    Returns:
        `path`.

    Raises:
        ValueError: a model of another type, a stateful biLM, or `path` exists and is not
            empty while `overwrite` is False.
        StorageError: less free space than the weights take, or a storage fault while
            writing (nothing of the export is left; an earlier `path` is untouched).
    """
    module = _as_module(model, scalar_mix, max_length, trainable_bilm,
                        dict(default_with_gamma=default_with_gamma, text_input=text_input))
    path = os.fspath(path)
    _check_target(path, overwrite)
    weights = sum(tf.TensorShape(v.shape).num_elements() * tf.as_dtype(v.dtype).size
                  for v in module.variables)
    with atomic_directory(path, replace=True, what="the SavedModel", needed=weights) as staging:
        tf.saved_model.save(module, staging, signatures=module.signatures())
        _write_metadata(module, os.path.join(staging, "assets.extra"))
    return path


def export_from_files(options_file, weight_file, path, mix_weights_file=None, **kwargs):
    """Exports a published-layout biLM (`options.json` + `weights.hdf5`).

    Example:
    >>> files = keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "t")
    >>> export_from_files(*files, "exports/t")
    'exports/t'

    Args:
        options_file, weight_file: the biLM (bilm-tf / AllenNLP / keras-elmo layout).
        path: SavedModel directory to create.
        mix_weights_file: optional `scalar_mix.json` (see `keras_elmo.export.mix_weights`); the even
            mix when None.
        **kwargs: `max_length`, `trainable_bilm`, `overwrite` of `export_saved_model`.
    """
    return export_model_files(resolve_model_files(None, options_file, weight_file), path,
                              mix_weights_file=mix_weights_file, **kwargs)


#: The `default` signature's input name in each publisher's TF Hub modules.
TFHUB_TEXT_INPUTS = {"google": "default", "deeppavlov": "strings"}


def export_model_files(files, path, mix_weights_file=None, **kwargs):
    """Exports the biLM of a `keras_elmo.formats.model_files.ModelFiles` (any model
    directory `resolve_model_files` recognises, an ELMoForManyLangs one included: a
    vocabulary model's export carries its vocabulary as lookup tables).

    Example:
    >>> _ = keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "tiny")
    >>> export_model_files(resolve_model_files("tiny"), "exports/tiny_files")
    'exports/tiny_files'

    Args:
        files: `ModelFiles`.
        path: SavedModel directory to create.
        mix_weights_file: optional `scalar_mix.json`; when None, the model's trained mix
            (its directory's `scalar_mix.json`, a TF Hub module's own mix), else the even mix.
        **kwargs: `max_length`, `trainable_bilm`, `overwrite` of `export_saved_model`.
    """
    bilm = load_bilm(files)
    if files.module_dir is not None:  # reproduce the publisher's `default`
        from keras_elmo.formats.tfhub_module import read_tfhub_module

        publisher = read_tfhub_module(files.module_dir, weights=False).publisher
        kwargs.setdefault("default_with_gamma", publisher != "deeppavlov")
        kwargs.setdefault("text_input", TFHUB_TEXT_INPUTS[publisher])
    if mix_weights_file is not None:
        mix = load_mix_weights(mix_weights_file, bilm.num_output_layers)
    else:
        trained = model_mix(files, bilm.num_output_layers)
        mix = None if trained is None else build_trained_mix(trained, bilm.num_output_layers)
    return export_saved_model(bilm, path, scalar_mix=mix, **kwargs)


def export_model_dir(model_dir, out_dir, version=None, mix_weights_file=None, **kwargs):
    """Exports `model_dir` to `out_dir` (or `out_dir/<version>` for TF Serving).

    Example:
    >>> _ = keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "tiny")
    >>> export_model_dir("tiny", "exports/tiny", version=1)
    'exports/tiny/1'
    >>> elmo = tf.saved_model.load("exports/tiny/1")
    >>> elmo.signatures["default"](tf.constant(["我 爱 北京"]))["elmo"].shape
    TensorShape([1, 3, 16])

    Args:
        model_dir: directory with options.json + weights.hdf5 (+ optional scalar_mix.json),
            or an ELMoForManyLangs model directory.
        out_dir: the SavedModel directory, or TF Serving's model base path with `version`.
        version: int >= 0 or None.
        mix_weights_file: overrides the model directory's scalar_mix.json.
        **kwargs: `max_length`, `trainable_bilm`, `overwrite`.

    Returns:
        the SavedModel directory written.
    """
    files = resolve_model_files(model_dir)
    return export_model_files(files, versioned_path(out_dir, version),
                              mix_weights_file=mix_weights_file or files.mix_file, **kwargs)


def versioned_path(out_dir, version):
    """`out_dir/<version>`, TF Serving's layout, or `out_dir` when `version` is None.

    Example:
    >>> versioned_path("exports/elmo", 3), versioned_path("exports/elmo", None)
    ('exports/elmo/3', 'exports/elmo')"""
    if version is None:
        return os.fspath(out_dir)
    check_int("version", version, minimum=0, hint="(TF Serving's numeric version folder.)")
    return os.path.join(os.fspath(out_dir), str(version))


def _as_module(model, scalar_mix, max_length, trainable_bilm, signature_options=None):
    if isinstance(model, ElmoModule):
        if scalar_mix is not None:
            raise ValueError("scalar_mix cannot be given with an ElmoModule (it has its own).")
        if trainable_bilm != model.trainable_bilm:
            raise ValueError(f"trainable_bilm={trainable_bilm!r} differs from the ElmoModule's "
                             f"{model.trainable_bilm!r}; set it when making the module.")
        return model
    if isinstance(model, ElmoLayer):
        if scalar_mix is None and model.scalar_mixes:
            if not model.scalar_mixes[0].built:
                model.build()
            scalar_mix = model.scalar_mixes[0]
        model = model.bilm
    if not isinstance(model, BiLM):
        raise ValueError("export_saved_model expects a keras_elmo.BiLM, ElmoLayer or "
                         f"ElmoModule; received {type(model).__name__}.")
    return ElmoModule(model, scalar_mix=scalar_mix, max_length=max_length,
                      trainable_bilm=trainable_bilm, **(signature_options or {}))


def _check_target(path, overwrite):
    if os.path.isfile(path):
        raise ValueError(f"export path {path} is a file; expected a directory to create.")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise ValueError(f"export path {path} already exists and is not empty; choose a new "
                         "path (or version) or pass overwrite=True / --overwrite.")


def _write_metadata(module, directory):
    os.makedirs(directory, exist_ok=True)
    module.options.save(os.path.join(directory, OPTIONS_FILE))
    metadata = {"keras_elmo_version": keras_elmo.__version__,
                "tensorflow_version": tf.__version__,
                "max_length": module.max_length,
                "signatures": list(SIGNATURES),
                "outputs": module.output_names,
                "trainable_bilm": module.trainable_bilm,
                "scalar_mix": module.mix_weights()}
    with open(os.path.join(directory, METADATA_FILE), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2)
        f.write("\n")
