"""The checks a downloaded model passes before it counts as cached.

`find_model_dir(folder)` finds the one model directory in what was downloaded (the folder
itself for an options/weights pair; the folder or one subfolder of an unpacked archive):
options.json + weights.hdf5, or ELMoForManyLangs' files. `check_model_dir` then reads it
the way loading will, without TensorFlow: the options and the weight file's names and
shapes against them (`keras_elmo.formats.weight_file_check`; HDF5 refuses a file cut
short), or the whole ELMoForManyLangs model (`read_efml_model`: every tensor's shape
against its configuration). A failure is one `ModelCheckError` line.

Example:
>>> model_dir = find_model_dir("staging", "efml-en")  # doctest: +SKIP
>>> check_model_dir(os.path.join("staging", model_dir), "efml-en")  # doctest: +SKIP
"""

import os

from keras_elmo.formats.model_files import OPTIONS_FILE, WEIGHTS_FILE


class ModelCheckError(OSError):
    """What was downloaded is no readable model (a damaged or wrong file; exit 75)."""

    exit_code = 75


def find_model_dir(folder, what):
    """The model directory under `folder`, relative to it (`"."` for the folder itself).

    Raises:
        ModelCheckError: none, or more than one.
    """
    from keras_elmo.formats.efml_model import is_efml_model_dir

    found = []
    for directory, subdirectories, names in os.walk(folder):
        subdirectories.sort()
        if ({OPTIONS_FILE, WEIGHTS_FILE} <= set(names)) or is_efml_model_dir(directory):
            found.append(os.path.relpath(directory, folder))
    if len(found) != 1:
        held = sorted(os.path.relpath(os.path.join(d, n), folder)
                      for d, _, names in os.walk(folder) for n in names)[:8]
        raise ModelCheckError(
            f"the download of {what} holds {'no' if not found else len(found)} model "
            f"director{'y' if len(found) == 1 else 'ies'} {found if found else ''}"
            f"(it holds {held}); expected one folder with {OPTIONS_FILE} and {WEIGHTS_FILE} "
            "or with ELMoForManyLangs' config.json, char.dic, token_embedder.pkl and "
            "encoder.pkl; nothing of it was kept.")
    return found[0]


def check_model_dir(model_dir, what):
    """Reads `model_dir` as loading will (no TensorFlow); returns its kind.

    Returns:
        `"published"` or `"elmoformanylangs"`.

    Raises:
        ModelCheckError: a file is unreadable, cut short or does not fit the others (the
            line names it); nothing of the download is kept by the caller.
    """
    from keras_elmo.formats.efml_model import is_efml_model_dir, read_efml_model
    from keras_elmo.formats.options import BiLMOptions
    from keras_elmo.formats.weight_file_check import check_weight_file

    try:
        if os.path.isfile(os.path.join(model_dir, OPTIONS_FILE)):
            options = BiLMOptions.from_file(os.path.join(model_dir, OPTIONS_FILE))
            check_weight_file(options, os.path.join(model_dir, WEIGHTS_FILE))
            return "published"
        if is_efml_model_dir(model_dir):
            read_efml_model(model_dir)
            return "elmoformanylangs"
    except (ValueError, OSError) as error:
        raise ModelCheckError(f"the download of {what} is not a readable model: "
                              f"{str(error).rstrip('.')}; nothing of it was kept; run the same "
                              "command again, or use another mirror (KERAS_ELMO_MIRROR) if "
                              "it fails the same way.") from None
    raise ModelCheckError(f"the download of {what} holds no model in {model_dir}; nothing of "
                          "it was kept.")
