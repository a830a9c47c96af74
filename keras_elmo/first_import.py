"""`around_first_import`: run the first import of a module inside a context manager.

Used where keras-elmo must act when a heavy module loads without loading it itself: the
command line filters TensorFlow's native start-up lines while `tensorflow` loads
(`keras_elmo.cli.quiet`), and the layers are registered with Keras right after `keras` loads
(`keras_elmo.keras_registration`). The hook finds the module as the path finder does, wraps
its loader's `exec_module`, and removes itself after that one import.

Example:
>>> hook = around_first_import("tensorflow", filtered_stderr)  # doctest: +SKIP
>>> import tensorflow  # runs inside `with filtered_stderr(): ...`  # doctest: +SKIP
"""

import contextlib
import importlib.abc
import importlib.machinery
import sys


def around_first_import(fullname, context):
    """Installs a one-shot hook; returns it (`remove_hook(hook)` takes it away unused).

    Args:
        fullname: str, a top-level module name, e.g. "tensorflow".
        context: a callable returning a context manager; the module's code runs inside it.
    """
    hook = _FirstImport(fullname, context)
    sys.meta_path.insert(0, hook)
    return hook


def remove_hook(hook):
    """Removes a hook installed by `around_first_import` if it has not fired."""
    with contextlib.suppress(ValueError):
        sys.meta_path.remove(hook)


def has_hook(fullname):
    """True while a hook for `fullname` waits for its import."""
    return any(isinstance(f, _FirstImport) and f.fullname == fullname for f in sys.meta_path)


class _FirstImport(importlib.abc.MetaPathFinder):
    def __init__(self, fullname, context):
        self.fullname = fullname
        self.context = context

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.fullname:
            return None
        remove_hook(self)  # once
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _WrappedLoader(spec.loader, self.context)
        return spec


class _WrappedLoader(importlib.abc.Loader):
    def __init__(self, loader, context):
        self.loader = loader
        self.context = context

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with self.context():
            self.loader.exec_module(module)
