"""Starting Keras for a subcommand: its backend checked before it loads, one line otherwise.

- `embed` and `neighbors` run their biLM on Keras' TensorFlow, JAX or PyTorch backend
  (`KERAS_BACKEND`), tokenising in Python: `check_keras(command)` checks that the backend
  is one of them and installed (before a model is downloaded), `start_keras(command)`
  checks again and starts it (TensorFlow as `import_tensorflow` does) and
  returns the phrase of the command's start-up line, e.g. `"Keras 3.15.0 on jax 0.10.2
  (cpu)"`.
- `train`, `export` and `perplexity` need TensorFlow by nature (tf.data, tf.distribute, the
  SavedModel): `require_tensorflow_backend(command, why)` refuses them in one line, before
  anything is read or written, where TensorFlow is not installed (naming the extra that
  installs it) or Keras runs another backend.

Example:
>>> start_keras("embed")  # with KERAS_BACKEND=jax  # doctest: +SKIP
'Keras 3.15.0 on jax 0.10.2 (cpu)'
>>> require_tensorflow_backend("train", "tf.data, tf.distribute")  # doctest: +SKIP
Traceback (most recent call last):
...
MissingPackageError: keras-elmo train (tf.data, tf.distribute) needs TensorFlow, which is not
installed (Keras backend jax): pip install "keras-elmo[tensorflow]"
"""

from keras_elmo.cli.tensorflow_start import import_tensorflow
from keras_elmo.process.keras_backend import (describe_backend, require_backend,
                                              require_tensorflow)


def check_keras(command):
    """The name of the Keras backend `keras-elmo command` will run on, checked without
    importing it.

    Raises:
        ValueError: a backend other than TensorFlow, JAX and PyTorch (one line).
        MissingPackageError: the backend's package is not installed (one line, the extra).
    """
    return require_backend(f"keras-elmo {command}")


def start_keras(command):
    """Starts the Keras backend for `keras-elmo command` (checked: `check_keras`); returns
    the start-up line's phrase (`describe_backend`)."""
    if check_keras(command) == "tensorflow":
        import_tensorflow()
    return describe_backend()


def require_tensorflow_backend(command, why):
    """Refuses `keras-elmo command` where TensorFlow is not installed or Keras runs another
    backend; `why` says what of TensorFlow it needs (named in the message).

    Raises:
        MissingPackageError: TensorFlow is not installed (one line, the extra).
        ValueError: `KERAS_BACKEND` (or keras.json) names another backend (one line).
    """
    require_tensorflow(f"keras-elmo {command} ({why})")
    require_backend(f"keras-elmo {command} ({why})", allowed=("tensorflow",))
