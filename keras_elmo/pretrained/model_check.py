"""The checks a downloaded model passes before it counts as cached.

`find_model_dir(folder)` finds the one model directory in what was downloaded (the folder
itself for an options/weights pair; the folder or one subfolder of an unpacked archive),
of any format `keras_elmo.formats.model_format` tells by its files (published pair,
ELMoForManyLangs, TF1 Hub module). `check_model_dir` then reads it through that format's
reader, without TensorFlow: the options and the weight file's names and shapes against
them (HDF5 refuses a file cut short), the whole ELMoForManyLangs model (every tensor's
shape against its configuration), or the module's checkpoint against its graph. A failure is one `ModelCheckError` line. It returns what the
files state (`STATED_FACTS`: LSTM and projection sizes, output size, highway layers,
parameters), and `check_stated_facts` holds that against what the catalog entry states:
another model under the entry's name is one `ModelMismatchError` line.

Example:
>>> model_dir = find_model_dir("staging", "efml-en")  # doctest: +SKIP
>>> facts = check_model_dir(os.path.join("staging", model_dir), "efml-en")  # doctest: +SKIP
>>> check_stated_facts(facts, {"lstm_dim": 4096}, "efml-en", "nothing was kept")  # doctest: +SKIP
"""

import os

from keras_elmo.formats.model_files import OPTIONS_FILE, WEIGHTS_FILE

#: What a catalog entry may state of a model that its files state too (the entry's fields).
STATED_FACTS = ("lstm_dim", "projection_dim", "output_dim", "highway_layers",
                "parameters_millions")
#: How far a parameter count may be from the catalog's: its sources round to 0.1 M (AllenNLP
#: gives 13.6 for elmo-small's 13,593,296 weights), or to 0.5 % of a larger figure.
PARAMETERS_TOLERANCE_MILLIONS = 0.05
PARAMETERS_TOLERANCE_RELATIVE = 0.005


class ModelCheckError(OSError):
    """What was downloaded is no readable model (a damaged or wrong file; exit 75)."""

    exit_code = 75


class ModelMismatchError(ValueError):
    """A downloaded or cached model whose files state other sizes than its catalog entry:
    another model under the entry's name (a mirror's mistake, a stale cache; exit 2)."""


def find_model_dir(folder, what):
    """The model directory under `folder`, relative to it (`"."` for the folder itself), of
    any format `keras_elmo.formats.model_format` knows.

    Raises:
        ModelCheckError: none, or more than one.
    """
    from keras_elmo.formats.model_format import model_dirs_under

    found = [path for path, _ in model_dirs_under(folder)]
    if len(found) != 1:
        held = sorted(os.path.relpath(os.path.join(d, n), folder)
                      for d, _, names in os.walk(folder) for n in names)[:8]
        raise ModelCheckError(
            f"the download of {what} holds {'no' if not found else len(found)} model "
            f"director{'y' if len(found) == 1 else 'ies'} {found if found else ''}"
            f"(it holds {held}); expected one folder with {OPTIONS_FILE} and {WEIGHTS_FILE}, "
            "with ELMoForManyLangs' config.json, char.dic, token_embedder.pkl and "
            "encoder.pkl, or a TF1 Hub module (tfhub_module.pb, saved_model.pb, "
            "variables/); nothing of it was kept.")
    return found[0]


def check_model_dir(model_dir, what):
    """Reads `model_dir` as loading will (no TensorFlow; `keras_elmo.formats.model_format.
    describe_model`); returns what its files state.

    Returns:
        dict, `STATED_FACTS` -> the value its files give (`model_facts`).

    Raises:
        ModelCheckError: a file is unreadable, cut short or does not fit the others (the
            line names it); nothing of the download is kept by the caller.
    """
    from keras_elmo.formats.model_format import describe_model, model_format

    format = model_format(model_dir)
    if format is None:
        raise ModelCheckError(f"the download of {what} holds no model in {model_dir}; "
                              "nothing of it was kept.")
    try:
        description = describe_model(model_dir, format)
    except (ValueError, OSError) as error:
        raise ModelCheckError(f"the download of {what} is not a readable model: "
                              f"{str(error).rstrip('.')}; nothing of it was kept; run the same "
                              "command again, or use another mirror (KERAS_ELMO_MIRROR) if "
                              "it fails the same way.") from None
    return model_facts(description.options, [description.parameter_count])


def model_facts(options, parameter_counts):
    """`STATED_FACTS` -> value of a model's `BiLMOptions` or `EFMLConfig` (both name the
    sizes alike) and the sizes of its weight tensors.

    Example:
    >>> facts = model_facts(keras_elmo.BiLMOptions.tiny(), [3_000, 2_896])  # doctest: +SKIP
    >>> facts["lstm_dim"], facts["output_dim"], facts["parameters_millions"]  # doctest: +SKIP
    (12, 16, 0.005896)
    """
    return {"lstm_dim": options.lstm_units, "projection_dim": options.projection_dim,
            "output_dim": 2 * options.projection_dim,  # docs/model.md section 4
            "highway_layers": options.num_highway,
            "parameters_millions": sum(parameter_counts) / 1e6}


def check_stated_facts(found, stated, what, then):
    """Refuses a model whose files state other sizes than its catalog entry.

    Args:
        found: `STATED_FACTS` -> value, what the files state (`check_model_dir`).
        stated: `STATED_FACTS` -> value, what the catalog states (None: not stated).
        what: the model as the line names it (`"elmo-small as served by URL"`).
        then: the end of the line: what happened to it and what to do.

    Raises:
        ModelMismatchError: one line naming the facts that differ, both ways.
    """
    differing = [key for key in STATED_FACTS if stated.get(key) is not None
                 and not _agrees(key, stated[key], found.get(key))]
    if differing:
        def listed(values):
            return ", ".join(f"{key} {_number(values.get(key))}" for key in differing)

        raise ModelMismatchError(f"{what} is another model than the catalog names: the catalog "
                                 f"states {listed(stated)}; its files say {listed(found)}; "
                                 f"{then}.")


def _agrees(key, stated, found):
    if key == "parameters_millions" and found is not None:
        return abs(found - stated) <= max(PARAMETERS_TOLERANCE_MILLIONS,
                                          PARAMETERS_TOLERANCE_RELATIVE * stated)
    return found == stated


def _number(value):
    return f"{value:.3g}" if isinstance(value, float) else str(value)
