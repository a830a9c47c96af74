"""One shared Keras contract test for keras-elmo's layers and models (`run_layer_test`).

In the manner of keras-hub's `TestCase.run_layer_test` / `run_backbone_test`: one call
builds fresh instances of a layer and checks the symbolic and eager calls, the config and
`.keras` round trips, masks, padding invariance, dtype policies and one training step.
Inputs and outputs may be any structure (a tensor, a list, a dict): a dict input is passed
as keyword arguments (`layer(**inputs)`), anything else as the first argument.
"""

import os

import keras
import numpy as np
from keras import ops, tree

_UNSET = object()
FLOAT32_ATOL = 1e-6
#: The policies every layer is built with unless a case says otherwise.
DEFAULT_POLICIES = ("float32", "bfloat16")


def _np(x):
    """A numpy array; bfloat16 becomes float32 so that numpy can compare it."""
    array = np.asarray(ops.convert_to_numpy(x))
    return array.astype("float32") if _is_float(array.dtype) else array


def _is_float(dtype):
    return "float" in keras.backend.standardize_dtype(dtype)


def _call(layer, data, call_kwargs):
    if isinstance(data, dict):
        return layer(**data, **call_kwargs)
    return layer(data, **call_kwargs)


def _symbolic_inputs(data):
    """`keras.Input`s like `data`, batch dimension unknown (names = dict keys)."""
    if isinstance(data, dict):
        return {k: keras.Input(shape=np.shape(v)[1:], dtype=_np(v).dtype.name, name=k)
                for k, v in data.items()}
    return tree.map_structure(
        lambda v: keras.Input(shape=np.shape(v)[1:], dtype=_np(v).dtype.name), data)


def _paths(structure):
    """`[(path string, leaf)]`; path "" for a single tensor, "elmo/1" inside structures."""
    return [("/".join(str(p) for p in path), leaf)
            for path, leaf in tree.flatten_with_path(structure)]


def _assert_close(name, check, actual, expected, atol=FLOAT32_ATOL):
    a, e = _paths(actual), _paths(expected)
    assert [p for p, _ in a] == [p for p, _ in e], \
        f"{name}: {check}: output structures differ: {[p for p, _ in a]} vs {[p for p, _ in e]}"
    for (path, x), (_, y) in zip(a, e):
        x, y = _np(x), _np(y)
        assert x.shape == y.shape, f"{name}: {check}: output {path!r} shape {x.shape} != {y.shape}"
        if _is_float(x.dtype):
            np.testing.assert_allclose(x, y, atol=atol, rtol=0,
                                       err_msg=f"{name}: {check}: output {path!r}")
        else:
            np.testing.assert_array_equal(x, y, err_msg=f"{name}: {check}: output {path!r}")


def _take(output, real):
    """The real positions of `output`: `real` is a callable, an index for every leaf, or a
    dict of indices keyed like a dict output."""
    if callable(real):
        return real(output)
    if isinstance(output, dict) and isinstance(real, dict):
        return {k: _take(output[k], real[k]) for k in real}
    return tree.map_structure(lambda x: _np(x)[real], output)


def _snapshot(variables):
    return [(v.path, np.array(_np(v))) for v in variables]


def _fit_one_step(name, layer, input_data, call_kwargs, train_loss=None):
    """One step of SGD(0.1) on a fresh layer: with `train_loss`, a GradientTape step on
    `train_loss(layer, input_data)`; else `model.fit` with a Dense head for a single float
    output, else a GradientTape step on `mean(output * R)` over the float outputs."""
    output = _call(layer, input_data, call_kwargs)  # builds the layer before the snapshot
    before = _snapshot(layer.trainable_weights), _snapshot(layer.non_trainable_weights)
    rng = np.random.default_rng(1)
    if train_loss is not None:
        import tensorflow as tf  # the GradientTape of the TensorFlow backend

        with tf.GradientTape() as tape:
            loss = train_loss(layer, input_data)
        assert np.isfinite(float(loss)), f"{name}: fit: loss is not finite"
        grads = tape.gradient(loss, layer.trainable_variables)
        missing = [v.path for v, g in zip(layer.trainable_variables, grads) if g is None]
        assert not missing, f"{name}: fit: no gradient reaches {missing}"
        keras.optimizers.SGD(0.1).apply(grads, layer.trainable_variables)
    elif ops.is_tensor(output) and _is_float(output.dtype):
        inputs = _symbolic_inputs(input_data)
        head = keras.layers.Dense(1, name="harness_head")
        model = keras.Model(inputs, head(_call(layer, inputs, call_kwargs)))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=False)
        targets = rng.normal(size=tuple(output.shape[:-1]) + (1,)).astype("float32")
        head_kernel = np.array(_np(head.kernel))
        batch = int(np.shape(tree.flatten(input_data)[0])[0])
        history = model.fit(input_data, targets, batch_size=batch, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0]), f"{name}: fit: loss is not finite"
        assert np.any(_np(head.kernel) != head_kernel), f"{name}: fit: the head did not train"
    else:
        import tensorflow as tf  # the GradientTape of the TensorFlow backend

        floats = [(p, x) for p, x in _paths(output) if _is_float(x.dtype)]
        assert floats, f"{name}: fit: the layer returns no float output to train on"
        weights = {p: rng.normal(size=x.shape).astype("float32") for p, x in floats}
        kwargs = {**call_kwargs, "training": True} if _accepts_training(layer) else call_kwargs
        with tf.GradientTape() as tape:
            loss = sum(ops.mean(ops.cast(x, "float32") * weights[p])
                       for p, x in _paths(_call(layer, input_data, kwargs)) if p in weights)
        grads = tape.gradient(loss, layer.trainable_variables)
        missing = [v.path for v, g in zip(layer.trainable_variables, grads) if g is None]
        assert not missing, f"{name}: fit: no gradient reaches {missing}"
        keras.optimizers.SGD(0.1).apply(grads, layer.trainable_variables)
    for (path, old), (_, new) in zip(before[0], _snapshot(layer.trainable_weights)):
        assert np.any(old != new), f"{name}: fit: trainable weight {path} did not change"
    for (path, old), (_, new) in zip(before[1], _snapshot(layer.non_trainable_weights)):
        np.testing.assert_array_equal(old, new, err_msg=f"{name}: fit: non-trainable weight "
                                                        f"{path} changed")


def _shapes(structure):
    """Shapes as tuples in `structure`'s nesting (a tuple of ints / None is one shape)."""
    if isinstance(structure, dict):
        return {k: _shapes(v) for k, v in structure.items()}
    if isinstance(structure, (list, tuple)) and all(
            d is None or isinstance(d, (int, np.integer)) for d in structure):
        return tuple(None if d is None else int(d) for d in structure)
    if isinstance(structure, (list, tuple)):
        return [_shapes(s) for s in structure]
    return _shapes(tuple(structure.shape))


def _batch_unknown(shapes):
    if isinstance(shapes, dict):
        return {k: _batch_unknown(v) for k, v in shapes.items()}
    if isinstance(shapes, list):
        return [_batch_unknown(v) for v in shapes]
    return (None,) + shapes[1:]


def _accepts_training(layer):
    import inspect

    return "training" in inspect.signature(layer.call).parameters


def _owners(layer):
    """The layer (unless a functional model: Keras keeps its own policy at the global one)
    and every sublayer that owns variables."""
    owners = [] if isinstance(layer, keras.Model) and hasattr(layer, "_run_through_graph") \
        else [layer]
    for sub in layer._flatten_layers(include_self=False):
        inner = {id(v) for s in sub._flatten_layers(include_self=False) for v in s.weights}
        if any(id(v) not in inner for v in sub.weights):
            owners.append(sub)
    return owners


def run_layer_test(layer_cls, init_kwargs, input_data, expected_output_shape, *,
                   call_kwargs=None, expected_mask=_UNSET, padding_check=None,
                   expected_symbolic_shape=None, run_fit=True, expected_trainable_count=None,
                   dtype_policies=DEFAULT_POLICIES, float32_outputs=(), run_save=True,
                   train_loss=None, tmp_path=None):
    """Runs the Keras contract checks of one layer (or functional model) class.

    Args:
        layer_cls: the layer class, or a factory `(**init_kwargs) -> layer` (from_config
            then uses `type(layer)`): e.g. a layer whose first argument is an object.
        init_kwargs: dict of constructor arguments (tiny dimensions).
        input_data: numpy array, or list / dict of them (a dict is passed as keywords:
            `layer(**input_data)`, e.g. `{"inputs": x, "mask": m}`); batch first.
        expected_output_shape: the eager output shape(s), same structure as the output.
        call_kwargs: non-tensor call arguments (`skip_boundary_steps=True`, ...).
        expected_mask: what `compute_mask(inputs, mask)` (and every eager output's
            `_keras_mask`) must be, `inputs` / `mask` from a dict `input_data`'s keys of
            those names; None to require "no mask". Required if the layer supports masking.
        padding_check: `(short_inputs, padded_inputs, real)`: outputs at the real positions
            (`real`: an index for every output, a dict of them, or a callable) are equal
            within 1e-6; or a callable `check(call) -> [(actual, expected), ...]`, `call`
            running the layer on inputs, each pair compared the same way.
        expected_symbolic_shape: the `keras.Input` call's output shape(s); by default the
            eager shape with batch None.
        run_fit: run one SGD step and check that every trainable weight changed and every
            non-trainable one did not.
        expected_trainable_count: if given, `len(layer.trainable_weights)`.
        dtype_policies: policies to build the layer with (`dtype=policy`).
        float32_outputs: outputs documented to stay float32 under any policy: dict keys /
            paths ("layers"), or True for all.
        run_save: save a `keras.Model` wrapping the layer as `.keras` and reload it.
        train_loss: a callable `(layer, input_data) -> scalar` to train on instead of the
            call's outputs (a head whose objective is not its call, e.g. the LM's NLL).
        tmp_path: directory for the `.keras` file (pytest's `tmp_path`).

    Example (in a pytest test taking `tmp_path`):
    >>> x = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    >>> run_layer_test(keras_elmo.Highway, {}, x, (2, 5, 4), expected_trainable_count=4,
    ...                padding_check=(x[:, :3], x, np.s_[:, :3]), tmp_path=tmp_path)
    """
    call_kwargs = dict(call_kwargs or {})
    make = lambda **kw: layer_cls(**{**init_kwargs, **kw})  # noqa: E731
    layer = make()
    name = f"{type(layer).__name__}({', '.join(sorted(init_kwargs))})"

    # Symbolic call on keras.Inputs, then an eager call.
    symbolic = _call(layer, _symbolic_inputs(input_data), call_kwargs)
    expected_output_shape = _shapes(expected_output_shape)
    expected_symbolic = _shapes(expected_symbolic_shape) if expected_symbolic_shape \
        else _batch_unknown(expected_output_shape)
    got = _shapes(symbolic)
    assert got == expected_symbolic, \
        f"{name}: symbolic call: shapes {got}, expected {expected_symbolic}"
    output = _call(layer, input_data, call_kwargs)
    got = _shapes(output)
    assert got == expected_output_shape, \
        f"{name}: eager call: shapes {got}, expected {expected_output_shape}"
    if expected_trainable_count is not None:
        assert len(layer.trainable_weights) == expected_trainable_count, \
            (f"{name}: trainable count: {len(layer.trainable_weights)} weights "
             f"{[v.path for v in layer.trainable_weights]}, expected {expected_trainable_count}")

    # get_config -> from_config: same config, and with the same weights the same outputs.
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config, f"{name}: config round trip: configs differ"
    _call(clone, input_data, call_kwargs)
    clone.set_weights(layer.get_weights())
    _assert_close(name, "config round trip", _call(clone, input_data, call_kwargs), output)

    # Mask propagation.
    if expected_mask is _UNSET:
        assert not layer.supports_masking, \
            f"{name}: mask: the layer supports masking; give expected_mask"
    else:
        data = input_data if isinstance(input_data, dict) else {"inputs": input_data}
        mask = layer.compute_mask(data.get("inputs"), data.get("mask"))
        if expected_mask is None:
            assert mask is None, f"{name}: mask: compute_mask gave {mask}, expected None"
        else:
            _assert_close(name, "compute_mask", mask, expected_mask)
            for path, leaf in _paths(output):
                _assert_close(name, f"_keras_mask of output {path!r}",
                              getattr(leaf, "_keras_mask", None), expected_mask)

    # Padding never changes a real position.
    if padding_check is not None:
        def call(inputs):
            return _call(layer, inputs, call_kwargs)

        if callable(padding_check):
            pairs = padding_check(call)
            assert pairs, f"{name}: padding: the check returned nothing to compare"
        else:
            short, padded, real = padding_check
            pairs = [(_take(call(padded), real), _take(call(short), real))]
        for actual, expected in pairs:
            _assert_close(name, "padding changes a real position", actual, expected)

    # .keras save and load of a model wrapping the layer; no custom_objects: the
    # register_keras_serializable decorators must be enough.
    if run_save:
        assert tmp_path is not None, f"{name}: save: give tmp_path"
        inputs = _symbolic_inputs(input_data)
        model = keras.Model(inputs, _call(make(), inputs, call_kwargs))
        path = os.path.join(str(tmp_path), f"{type(layer).__name__}.keras")
        model.save(path)
        try:
            restored = keras.models.load_model(path)
        except Exception as error:  # e.g. a class Keras cannot find: not registered
            raise AssertionError(f"{name}: .keras save/load: load_model failed: {error}") \
                from error
        inner = [type(x) for x in restored.layers]
        assert type(layer) in inner, f"{name}: save/load: reloaded layers are {inner}"
        _assert_close(name, ".keras save/load", restored(input_data), model(input_data))

    # One training step.
    if run_fit:
        _fit_one_step(name, make(), input_data, call_kwargs, train_loss)

    # dtype policies.
    for policy_name in dtype_policies:
        run_dtype_policy_test(layer_cls, init_kwargs, input_data, policy_name,
                              call_kwargs=call_kwargs, float32_outputs=float32_outputs)


def run_dtype_policy_test(layer_cls, init_kwargs, input_data, policy_name, *, call_kwargs=None,
                          float32_outputs=()):
    """Builds the layer with `dtype=policy_name` and checks every variable-owning sublayer's
    compute and variable dtypes, every float weight's dtype and every float output's dtype
    (eager and symbolic); arguments as in `run_layer_test`.

    Example:
    >>> run_dtype_policy_test(keras_elmo.Highway, {}, x, "bfloat16")
    """
    call_kwargs = dict(call_kwargs or {})
    policy = keras.dtype_policies.get(policy_name)
    typed = layer_cls(**{**init_kwargs, "dtype": policy_name})
    name = f"{type(typed).__name__}({', '.join(sorted(init_kwargs))})"
    out = _call(typed, input_data, call_kwargs)
    spec = _call(typed, _symbolic_inputs(input_data), call_kwargs)
    for owner in _owners(typed):
        assert (owner.compute_dtype, owner.variable_dtype) == \
            (policy.compute_dtype, policy.variable_dtype), \
            (f"{name}: dtype {policy_name}: {owner.name} computes in "
             f"{owner.compute_dtype}, stores {owner.variable_dtype}")
    for v in typed.weights:
        if _is_float(v.dtype):
            assert keras.backend.standardize_dtype(v.dtype) == policy.variable_dtype, \
                f"{name}: dtype {policy_name}: weight {v.path} is {v.dtype}"
    for kind, tensors in (("eager", out), ("symbolic", spec)):
        for path, leaf in _paths(tensors):
            if not _is_float(leaf.dtype):
                continue
            stays = float32_outputs is True or path.split("/")[0] in float32_outputs
            want = "float32" if stays else policy.compute_dtype
            assert keras.backend.standardize_dtype(leaf.dtype) == want, \
                (f"{name}: dtype {policy_name}: {kind} output {path!r} is "
                 f"{keras.backend.standardize_dtype(leaf.dtype)}, expected {want}")
