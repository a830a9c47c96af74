"""PyTorch: what a `torch.nn.Module` user expects of `ElmoLayer` and `BiLM`.

Under Keras' PyTorch backend a Keras layer is a `torch.nn.Module`, but Keras keeps its
weights in one `ParameterDict` per layer, keyed by each variable's path, and every layer
lists all the weights below it again. A `state_dict()` then holds each weight several
times, under names with Keras' process-wide counters (`elmo_layer_1/...`,
`seed_generator_2/...`): a model built again in the same process has other names, and
`load_state_dict` fails. `ModuleHabits`, a mixin of both classes, gives them what PyTorch
code relies on:

- `state_dict()` holds each weight once, under a name of the model's structure: the
  attribute path from the module to the weight, as PyTorch names its own
  (`bilm.contextual_encoder.cells.forward.0.input_kernel`, `scalar_mixes.0.gamma`); the
  same model built again, in any process, has the same names. Inside a user's module the
  names follow its own prefix (`tagger.state_dict()` -> `elmo.bilm....`).
- `load_state_dict(torch.load(f))` takes those names (also as part of a user's module);
  a missing, unexpected or misshapen weight is one line naming it. The trained mix is a
  weight like any other: nothing is dropped silently.
- `module.train()` / `module.eval()` decide dropout where a call does not pass `training`
  (a new layer is in eval mode, so a plain call is inference, as in Keras; Keras' `fit`
  and `predict` pass `training` themselves).
- `.half()`, `.double()`, `.to(torch.bfloat16)` would change the stored weights but not
  the computation (the layer's dtype policy casts them back): they raise one line naming
  the `dtype=` argument that does. Device moves (`.to("cuda")`) go on as before.

Example:
>>> torch.save(elmo.state_dict(), "elmo.pt")  # doctest: +SKIP
>>> again = keras_elmo.ElmoLayer.from_weights(options, weights)  # doctest: +SKIP
>>> again.load_state_dict(torch.load("elmo.pt"))  # doctest: +SKIP
"""

import collections

import keras
import torch


class ModuleHabits:
    """Mixin of `ElmoLayer` and `BiLM` under PyTorch (see the module docstring); the class
    calls `init_module_habits()` at the end of its constructor."""

    def init_module_habits(self):
        """Eval mode (a plain call is inference), and structural names on loading."""
        self.train(False)
        self._register_load_state_dict_pre_hook(_to_keras_keys, with_module=True)

    def module_training(self):
        """`training` for a call that did not pass it: the module's mode."""
        return bool(self.training)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Each weight once, by structural name (the module docstring): an `OrderedDict`
        name -> tensor (detached unless `keep_vars`)."""
        if args:  # PyTorch's old positional form (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix,
                                                           keep_vars][len(args):])[:3]
        if destination is None:
            destination = collections.OrderedDict()
        for name, variable in structural_variables(self).items():
            value = variable.value
            destination[prefix + name] = value if keep_vars else value.detach()
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """PyTorch's `load_state_dict`, checked first: with `strict`, a missing or an
        unexpected name, and in any case a weight of another shape, is one line naming it
        (`RuntimeError`, as PyTorch raises) and nothing is loaded."""
        expected = structural_variables(self)
        problems = []
        if strict:
            missing = [name for name in expected if name not in state_dict]
            unexpected = [name for name in state_dict if name not in expected]
            if missing:
                problems.append(f"missing {_listed(missing)}")
            if unexpected:
                problems.append(f"unexpected {_listed(unexpected)}")
        for name, variable in expected.items():
            if name in state_dict and tuple(state_dict[name].shape) != tuple(variable.shape):
                problems.append(f"{name} has shape {tuple(state_dict[name].shape)}, expected "
                                f"{tuple(variable.shape)}")
        if problems:
            raise RuntimeError(f"Cannot load this state dict into {type(self).__name__}: "
                               f"{'; '.join(problems)} (names from state_dict() of the same "
                               "model; strict=False skips missing and unexpected names).")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _apply(self, fn, *args, **kwargs):
        probe = torch.zeros((), dtype=_weight_dtype(self))
        moved = fn(probe)
        if moved.dtype != probe.dtype:
            name = str(moved.dtype).replace("torch.", "")
            raise ValueError(
                f"{type(self).__name__} computes in its Keras dtype policy; received a move "
                f"of its weights to torch.{name} (.half(), .double(), .to(dtype)), which would "
                f"change the stored weights but not the computation: build it with "
                f"dtype=\"{name}\" instead (e.g. ElmoLayer.from_weights(options, weights, "
                f"dtype=\"{name}\")).")
        return super()._apply(fn, *args, **kwargs)


def structural_variables(root):
    """`{name: variable}` of every variable of `root`, once each, named by the attribute path
    from `root` to it (`.`-joined; list items by index, dict items by key; a variable held
    only under a private attribute by the variable's own name after its layer's path), in
    the order of `root.variables`."""
    names = {}

    def walk(obj, prefix, seen):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, keras.Variable):
            names.setdefault(id(obj), prefix)
        elif isinstance(obj, keras.random.SeedGenerator):
            walk(obj.state, _join(prefix, "state"), seen)
        elif isinstance(obj, keras.layers.Layer):
            for attribute, value in _public_attributes(obj):
                walk(value, _join(prefix, attribute), seen)
            for variable in obj.variables:  # held privately (Dense's `_kernel`)
                if id(variable) not in names:
                    names[id(variable)] = _join(prefix, variable.name)
        elif isinstance(obj, (list, tuple)):
            for index, value in enumerate(obj):
                walk(value, _join(prefix, str(index)), seen)
        elif isinstance(obj, dict):
            for key, value in obj.items():
                walk(value, _join(prefix, str(key)), seen)

    walk(root, "", set())
    return collections.OrderedDict((names[id(v)], v) for v in root.variables)


def _public_attributes(layer):
    """`(name, value)` of a layer's public attributes that may hold weights: its own
    (Python's `__dict__`) and its child modules (PyTorch keeps them apart)."""
    found = [(k, v) for k, v in vars(layer).items() if not k.startswith("_")]
    found += [(k, v) for k, v in layer.named_children() if not k.startswith("_")]
    return [(k, v) for k, v in found
            if isinstance(v, (keras.Variable, keras.random.SeedGenerator, keras.layers.Layer,
                              list, tuple, dict))]


def _to_keras_keys(module, state_dict, prefix, local_metadata, strict, missing_keys,
                   unexpected_keys, error_msgs):
    """Load pre-hook: the structural names in `state_dict` become the names PyTorch's own
    loading looks for (each `ParameterDict` of Keras' layers, by variable path), so that
    every copy of a weight is filled; the structural names are then consumed."""
    variables = structural_variables(module)
    values = {}
    for name, variable in variables.items():
        if prefix + name in state_dict:
            values[id(variable.value)] = state_dict.pop(prefix + name)
    if not values:
        return
    for module_name, child in module.named_modules(prefix=prefix.rstrip(".")):
        if isinstance(child, torch.nn.ParameterDict):
            for key, parameter in child.items():
                if id(parameter) in values:
                    state_dict[_join(module_name, key)] = values[id(parameter)]


def _weight_dtype(layer):
    """The torch dtype of the layer's float weights (float32 unless built otherwise)."""
    for variable in layer.variables:
        if variable.value.is_floating_point():
            return variable.value.dtype
    return torch.float32


def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def _listed(names, most=4):
    """A few names, and how many more."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
