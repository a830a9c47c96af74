"""Public names of a package imported on first use (PEP 562), so that importing the package
loads no TensorFlow.

Example (in a package's `__init__.py`):
>>> _PUBLIC = {"BiLM": "keras_elmo.models.bilm"}  # doctest: +SKIP
>>> __getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC)  # doctest: +SKIP
"""

import importlib


def lazy_names(package, namespace, public, after_import=None, on_missing_module=None):
    """`(__getattr__, __dir__)` for a package whose names `public` (name -> defining module)
    are imported when first looked up, then kept in `namespace` (the package's globals);
    `after_import()`, if given, runs after each such import. `on_missing_module(error,
    what)`, if given, sees a `ModuleNotFoundError` of that import first (`what`:
    `"package.name"`), and may raise a clearer error in its place."""

    def __getattr__(name):
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(public[name])
        except ModuleNotFoundError as error:
            if on_missing_module is not None:
                on_missing_module(error, f"{package}.{name}")
            raise
        value = getattr(module, name)
        namespace[name] = value  # later look-ups do not come here
        if after_import is not None:
            after_import()
        return value

    def __dir__():
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__
