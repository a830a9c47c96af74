"""The model directory of a training run, and its checkpoints.

Layout (written by `keras-elmo train MODEL_DIR`):

    MODEL_DIR/options.json    the full config (`TrainingConfig.to_dict()`), options.json shape
    MODEL_DIR/vocab.txt       the vocabulary, copied
    MODEL_DIR/checkpoints/    tf.train.CheckpointManager: model, optimizer, step, epoch and
                              the batches consumed in the current epoch (the data position)
    MODEL_DIR/logs/           TensorBoard scalars
    MODEL_DIR/weights.hdf5    at the end of every run: the published layout (docs/model.md
                              section 6), readable with `BiLM.from_weights(options.json, ...)`

Every file is written atomically (temporary file + rename, or CheckpointManager's own
protocol), so a killed run leaves the previous complete version, never half a file.

Example:
>>> model_dir = ModelDir("runs/small")
>>> model_dir.has_run()
False
"""

import os

import tensorflow as tf

from keras_elmo.process.atomic_file import atomic_copy
from keras_elmo.process.storage_errors import storage_guard
from keras_elmo.formats.model_files import (CHAR_DIC_FILE, OPTIONS_FILE, VOCAB_FILE,
                                            WEIGHTS_FILE, WORD_DIC_FILE, ModelFiles)
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.divergence import non_finite_variables

#: The suffix of a variable's value in a checkpoint's names.
_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


class ModelDir:
    """Paths and files of one training run's directory.

    Args:
        path: str, the directory (created by `prepare`).
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    @property
    def options_path(self):
        return os.path.join(self.path, OPTIONS_FILE)

    @property
    def vocab_path(self):
        return os.path.join(self.path, VOCAB_FILE)

    @property
    def checkpoint_dir(self):
        return os.path.join(self.path, "checkpoints")

    @property
    def logs_dir(self):
        return os.path.join(self.path, "logs")

    @property
    def weights_path(self):
        return os.path.join(self.path, WEIGHTS_FILE)

    def has_run(self):
        """True when a previous run saved its config here (so `train` resumes)."""
        return os.path.isfile(self.options_path)

    def load_config(self):
        """The saved `TrainingConfig`."""
        return TrainingConfig.from_file(self.options_path)

    def prepare(self, config, vocab_path):
        """Creates the directory, writes options.json (unless it holds `config` already)
        and copies the vocabulary."""
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"model directory {self.path} exists and is not a directory.")
        with storage_guard(self.path, "the model directory"):
            os.makedirs(self.checkpoint_dir, exist_ok=True)
            os.makedirs(self.logs_dir, exist_ok=True)
        if os.path.abspath(vocab_path) != os.path.abspath(self.vocab_path):
            atomic_copy(vocab_path, self.vocab_path, what="the vocabulary")
        if config.options.char_vocabulary:  # the input side's vocabulary, kept from the source
            names = [CHAR_DIC_FILE] + ([WORD_DIC_FILE] if config.options.has_word_embedding
                                       else [])
            for name in names:
                atomic_copy(os.path.join(config.init_from, name), os.path.join(self.path, name),
                            what=f"the model's {name}")
        if not (self.has_run() and self.load_config() == config):  # a resume writes nothing
            config.save(self.options_path)

    def token_vocabulary(self, options):
        """The run's `TokenVocabulary` (its char.dic and word.dic) for a vocabulary model's
        `options`, else None (a byte model spells tokens as bytes)."""
        if not options.char_vocabulary:
            return None
        from keras_elmo.formats.model_vocabulary import read_model_vocabulary

        def present(name):
            path = os.path.join(self.path, name)
            return path if os.path.isfile(path) else None

        return read_model_vocabulary(ModelFiles(self.options_path, self.weights_path,
                                                char_dic=present(CHAR_DIC_FILE),
                                                word_dic=present(WORD_DIC_FILE)), options)

    def latest_checkpoint(self):
        """Path prefix of the newest complete checkpoint, or None.

        Raises:
            ValueError: when the checkpoint state names a checkpoint whose files are
                missing (a damaged directory).
        """
        if not os.path.isdir(self.checkpoint_dir):
            return None
        try:
            state = tf.train.get_checkpoint_state(self.checkpoint_dir)
        except Exception as error:  # a damaged `checkpoint` text file
            raise ValueError(f"checkpoint directory {self.checkpoint_dir} is damaged: cannot "
                             f"read its 'checkpoint' index ({type(error).__name__}); remove "
                             "the directory to start over.") from None
        if state is None or not state.model_checkpoint_path:
            return None
        path = state.model_checkpoint_path  # already joined with checkpoint_dir by TF
        if not tf.io.gfile.glob(path + ".index"):
            raise ValueError(f"checkpoint directory {self.checkpoint_dir} is damaged: its index "
                             f"names {os.path.basename(path)} but {path}.index is missing; "
                             "remove the directory to start over.")
        return path

    def load_model(self):
        """`(config, vocab, LanguageModel)` with the newest checkpoint's weights.

        Raises:
            FileNotFoundError: no options.json / vocab.txt / checkpoint in the directory.
        """
        from keras_elmo.training.language_model import LanguageModel
        from keras_elmo.training.vocabulary import Vocabulary

        if not self.has_run():
            raise FileNotFoundError(f"{self.options_path} not found: expected a model directory "
                                    "written by `keras-elmo train`.")
        if not os.path.isfile(self.vocab_path):
            raise FileNotFoundError(f"{self.vocab_path} not found: expected the vocabulary "
                                    "copied by `keras-elmo train`.")
        config, vocab = self.load_config(), Vocabulary.load(self.vocab_path)
        path = self.latest_checkpoint()
        if path is None:
            raise FileNotFoundError(f"no checkpoint in {self.checkpoint_dir}: train the model "
                                    "first (`keras-elmo train`).")
        model = LanguageModel.from_training_config(
            config, vocabulary=self.token_vocabulary(config.options))
        # the optimizer's slots are not needed here
        restore(tf.train.Checkpoint(model=_flat(model.variables)), path, model, partial=True)
        bad = non_finite_variables(model.variables)
        if bad:
            raise ValueError(f"checkpoint {path} holds non-finite values (NaN or inf) in "
                             f"{len(bad)} variable(s), first {bad[0][0]} ({bad[0][1]} values); "
                             "expected finite weights (did training diverge?).")
        return config, vocab, model

    def write_weights(self, bilm):
        """Writes weights.hdf5 in the published layout (atomically; options.json is ours)."""
        from keras_elmo.formats.weight_file import save_bilm_weights

        save_bilm_weights(bilm, self.weights_path)


def make_checkpoint(model, optimizer, **counters):
    """A `tf.train.Checkpoint` of every model and optimizer variable.

    Variables are saved flat, keyed by their position and short name
    (`"0001_conv_0_kernel"`): this depends neither on how the layers store their children
    nor on the process-wide unique names Keras gives (`adagrad_1`, `seed_generator_3`).

    Args:
        model: a Keras model (its `variables`, seed states included).
        optimizer: a built Keras optimizer.
        **counters: further `tf.Variable`s (`step`, `epoch`, `batches_in_epoch`).
    """
    return tf.train.Checkpoint(model=_flat(model.variables),
                               optimizer=_flat(optimizer.variables), **counters)


def restore(checkpoint, path, model, partial=False):
    """Restores `checkpoint` (`make_checkpoint`'s) from `path`; a damaged or mismatched file
    is one clear error.

    Args:
        checkpoint: `tf.train.Checkpoint` with a `model` group (and `optimizer`, counters).
        path: checkpoint path prefix (`.../ckpt-40`).
        model: the `LanguageModel` whose variables the `model` group holds.
        partial: True to restore only what `checkpoint` names (the model without the
            optimizer's slots).
    """
    groups = {name: dict(getattr(checkpoint, name).items()) for name in ("model", "optimizer")
              if hasattr(checkpoint, name)}
    check_checkpoint_shapes(path, **groups)
    try:
        status = checkpoint.restore(path)
        if partial:
            status.expect_partial()
        status.assert_existing_objects_matched()
    except Exception as error:  # noqa: BLE001 - a damaged file raises many kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"cannot restore checkpoint {path}: {first[:300]}") from None


def _saved_name(key):
    """`"group/key"` -> the checkpoint's name of its value."""
    return f"{key}{_VALUE}"


def check_checkpoint_shapes(path, **groups):
    """Refuses a checkpoint whose variables do not fit the model before restoring anything.

    Restoring a mismatched checkpoint fails deep in TensorFlow and leaves a wall of warnings
    about unrestored values; this compares names and shapes first and gives one line.

    Args:
        path: checkpoint path prefix (`.../ckpt-40`).
        **groups: `{key: variable}` dicts as saved by `make_checkpoint` (`model=...`).

    Raises:
        ValueError: a variable missing, of another shape, or in excess (naming it, the shape
            found and the shape expected).
    """
    try:
        saved = {name: tuple(shape) for name, shape in tf.train.list_variables(path)}
    except Exception as error:  # noqa: BLE001 - a damaged file raises many kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"cannot restore checkpoint {path}: {first[:300]}") from None
    what = f"checkpoint {path} does not match {OPTIONS_FILE} (it was written with other options)"
    for group, variables in groups.items():
        expected = {}
        for key, variable in variables.items():
            expected[_saved_name(f"{group}/{key}")] = (key, tuple(variable.shape))
        for name, (key, shape) in expected.items():
            if name not in saved:
                raise ValueError(f"{what}: it has no {group} variable {key}, expected with "
                                 f"shape {shape}.")
            if saved[name] != shape:
                raise ValueError(f"{what}: {group} variable {key} has shape {saved[name]}, "
                                 f"expected {shape}.")
        extra = sorted(name for name in saved
                       if name.startswith(group + "/") and name not in expected)
        if extra:
            raise ValueError(f"{what}: it has {len(extra)} {group} variable(s) a model of "
                             f"these options does not, first {extra[0].split('/')[1]}.")


#: The name of a dropout layer's random-seed variable (not a weight).
_SEED_STATE = "seed_generator_state"


def _flat(variables):
    """`{"0000_char_embeddings": tf.Variable, ...}` in the variables' order."""
    return {f"{index:04d}_{variable.name}": getattr(variable, "value", variable)
            for index, variable in enumerate(variables)}


def load_backbone_from_checkpoint(backbone, path):
    """Loads the biLM weights of a training checkpoint into `backbone`; returns the softmax.

    A checkpoint's `model` group holds the `LanguageModel`'s variables in order: the
    backbone's first, then the softmax's embeddings and bias. They are matched to
    `backbone`'s variables by position, dropout seed states left out on both sides (the new
    run's dropout may differ), each checked by name and shape, and read one at a time.

    Args:
        backbone: `keras_elmo.BiLM` of the source's architecture (variables may be mirrored:
            call in cross-replica context).
        path: checkpoint path prefix (`.../ckpt-40`).

    Returns:
        `(embeddings, bias)`: the source softmax as numpy arrays.

    Raises:
        ValueError: the checkpoint cannot be read or does not fit the backbone (naming the
            variable, the shape found and the shape expected).
    """
    try:
        reader = tf.train.load_checkpoint(path)
        saved = sorted(name for name in reader.get_variable_to_shape_map()
                       if name.startswith("model/") and _SEED_STATE not in name)
    except Exception as error:  # noqa: BLE001 - a damaged file raises many kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"cannot read checkpoint {path}: {first[:300]}") from None
    targets = [v for v in backbone.variables if _SEED_STATE not in v.name]
    if len(saved) != len(targets) + 2:
        raise ValueError(f"checkpoint {path} holds {len(saved)} model weights; expected "
                         f"{len(targets) + 2} (this biLM's {len(targets)} and a softmax).")
    for key, variable in zip(saved, targets):
        value = reader.get_tensor(key)
        short = key.split("/")[1].split("_", 1)[1]  # "model/0003_conv_0_kernel/..." -> name
        if short != variable.name or value.shape != tuple(variable.shape):
            raise ValueError(f"checkpoint {path}: {key} holds {short} {value.shape}; expected "
                             f"{variable.name} {tuple(variable.shape)}.")
        variable.assign(value)
    return reader.get_tensor(saved[-2]), reader.get_tensor(saved[-1])
