"""`zero_init`: a layer built to be filled from a weight file, which its config never says.

`BiLM.from_weights` builds every layer with `zero_init=True`: the weights a file fills are
created as zeros, not drawn, and the loader adds the file's values into those buffers, so the
process holds one copy of the model (docs/performance.md, "Memory"). That is how one object
was built, not what the model is: no layer puts `zero_init` in its config, so a layer or
model rebuilt from its config (`from_config`, `keras.models.clone_model`) draws fresh weights.
Configs written by earlier releases held `zero_init`; `rebuild_config` drops it.

Example:
>>> rebuild_config({"units": 12, "zero_init": True})
{'units': 12}
"""


def rebuild_config(config):
    """A copy of a layer's `config` to rebuild it from: without `zero_init`."""
    return {key: value for key, value in config.items() if key != "zero_init"}
