"""TF Hub's TF1 ELMo modules (Google's `elmo`, DeepPavlov's), read without TensorFlow.

A TF1 Hub module is a directory: `tfhub_module.pb` (the marker), `saved_model.pb` (one TF1
graph per tag set, with the signatures) and `variables/variables.{index,data-*}` (a
TensorBundle checkpoint). Its graph is bilm-tf's inference graph (`bilm/model.py`, with its
`custom_getter`) built under TF Hub's TF1 export, and its checkpoint holds:

| module variable | published dataset (`weight_file.py`) |
|---|---|
| `bilm/char_embed` `(262, E)`, row 0 zero | `char_embed` `(261, E)` |
| `bilm/CNN/W_cnn_i`, `b_cnn_i`; `bilm/CNN_high_k/...`; `bilm/CNN_proj/...` | the same without `bilm/` |
| `bilm/RNN_d/RNN/MultiRNNCell/Cell{l}/rnn/lstm_cell/kernel`, `bias`, `projection/kernel` | `RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0`, `B`, `W_P_0` |
| `aggregation/weights`, `aggregation/scaling` (Google) | the trained mix `s`, `gamma` |
| `aggregation/elmo_output_ELMo_W`, `_gamma` (DeepPavlov, bilm-tf's `weight_layers`) | the same |
| `bilm/Variable*`, `bilm_1/Variable*` `(max batch, D or P)` | LSTM state buffers: checked, not kept |

The layouts agree (LSTMCell's kernel is `[x; h] (P + P, 4D)` with gates i, j, f, o, as
`W_0`), so the arrays are the checkpoint's, row 0 of the char table dropped.

What the shapes cannot say is read from the graph's nodes (never run, never guessed):
- `activation`: the op after each `MaxPool` in `bilm/CNN/` (`Relu` or `Tanh`);
- `max_characters_per_token`: that `MaxPool`'s window `ksize[2]` plus its bank's width
  minus 1 (bilm-tf pools over `max_chars - width + 1` positions);
- `cell_clip`, `proj_clip`: the constants of `clip_by_value` (`Minimum`, then `Maximum`)
  in each `Cell{l}/rnn/while/lstm_cell/` scope: the one fed by the projection `MatMul` is
  `proj_clip`, the other `cell_clip`; none means no clip;
- `use_skip_connections`: the `ResidualWrapper`'s add in `Cell{l}/rnn/while/` (an add of
  the step's input, a `TensorArrayReadV3`), in every layer `l >= 1` and none in layer 0;
- `forget_bias`: the constant added to the forget gate (`lstm_cell/split:2`).
Every copy of the biLM in the graph (`bilm/`, `bilm_1/`, one per signature) and every meta
graph must agree, and every variable node of the graph must be in the checkpoint with its
shape, and the other way round.

Example:
>>> module = read_tfhub_module("elmo_3")  # doctest: +SKIP
>>> module.options["lstm"]["dim"], module.publisher  # doctest: +SKIP
(4096, 'google')
"""

import os
import re
from dataclasses import dataclass

import numpy as np

from keras_elmo import constants
from keras_elmo.formats import protobuf_wire as wire
from keras_elmo.formats.graph_constants import GraphView
from keras_elmo.formats.tfhub_graph_facts import SAVED_MODEL_FILE, graph_facts
from keras_elmo.formats.model_files import OPTIONS_FILE
from keras_elmo.formats.tensor_bundle import OBJECT_GRAPH_KEY, TensorBundle

TFHUB_MODULE_FILE = "tfhub_module.pb"
VARIABLES_PREFIX = os.path.join("variables", "variables")
PUBLISHERS = ("google", "deeppavlov")
#: The trained mix's variables, `(scalar parameters, gamma)`, by publisher.
MIX_VARIABLES = {"google": ("aggregation/weights", "aggregation/scaling"),
                 "deeppavlov": ("aggregation/elmo_output_ELMo_W",
                                "aggregation/elmo_output_ELMo_gamma")}
_ROOT = "bilm/"
_CNN = re.compile(r"bilm/CNN/(W|b)_cnn_(\d+)$")
_HIGHWAY = re.compile(r"bilm/CNN_high_(\d+)/(W|b)_(carry|transform)$")
_PROJECTION = ("bilm/CNN_proj/W_proj", "bilm/CNN_proj/b_proj")
_LSTM = re.compile(r"bilm/RNN_([01])/RNN/MultiRNNCell/Cell(\d+)/rnn/lstm_cell/"
                   r"(kernel|bias|projection/kernel)$")
_LSTM_FILE_NAMES = {"kernel": "W_0", "bias": "B", "projection/kernel": "W_P_0"}
_STATE = re.compile(r"(bilm(?:_\d+)?)/Variable(?:_(\d+))?$")
_VARIABLE_OPS = ("VariableV2", "Variable", "VarHandleOp")


@dataclass(frozen=True)
class TFHubMix:
    """A module's trained scalar mix: `gamma * sum_j softmax(s)_j h_j`.

    Attributes:
        scalar_parameters: `s` as stored, before the softmax (one per biLM layer, L + 1).
        gamma: the scale.
    """

    scalar_parameters: tuple
    gamma: float


@dataclass(frozen=True)
class TFHubModule:
    """What `read_tfhub_module` found.

    Attributes:
        path: the module directory.
        options: the options.json dict (`{"lstm": {...}, "char_cnn": {...}}`).
        arrays: `{published dataset name: float32 array}`, as `weights.hdf5` holds them.
        mix: the trained mix, or None when the module has none.
        publisher: `"google"` or `"deeppavlov"` (told by the mix's names), or None.
        state_variables: the LSTM state buffers' names (`bilm/Variable`, ...).
        max_batch_size: their first dimension (the state's rows), or None without them.
        signatures: the signature names of the module's default graph.
    """

    path: str
    options: dict
    arrays: dict
    mix: TFHubMix
    publisher: str
    state_variables: tuple
    max_batch_size: int
    signatures: tuple


def looks_like_tfhub_module(path):
    """True for a directory holding `tfhub_module.pb`, or a SavedModel (`saved_model.pb`
    and `variables/variables.index`) without our `options.json`; reads no file."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return False
    if os.path.isfile(os.path.join(path, TFHUB_MODULE_FILE)):
        return True
    return (os.path.isfile(os.path.join(path, SAVED_MODEL_FILE))
            and os.path.isfile(os.path.join(path, VARIABLES_PREFIX + ".index"))
            and not os.path.isfile(os.path.join(path, OPTIONS_FILE)))


def read_tfhub_module(directory, verify_checksums=True, weights=True):
    """Reads a TF1 Hub ELMo module directory (module docstring) into numpy.

    Args:
        directory: the unpacked module.
        verify_checksums: check every tensor's CRC-32C (`keras_elmo.formats.crc32c`;
            its cost is in docs/performance.md).
        weights: read the biLM's tensors into `arrays` (False: `arrays` is empty; the
            options, the mix and the publisher are read all the same, and every shape is
            checked).

    Returns:
        A `TFHubModule`.

    Raises:
        FileNotFoundError: no such directory, or no `saved_model.pb` / checkpoint in it.
        ValueError: one line naming what was found and what was expected: a TF2 SavedModel,
            a corrupt file, an unknown or missing variable, a shape that does not fit, a
            graph value that cannot be found or contradicts the variables.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"TF Hub module not found: {directory} (expected a directory "
                                f"holding {TFHUB_MODULE_FILE}, {SAVED_MODEL_FILE} and "
                                "variables/).")
    where = f"TF Hub module {directory}"
    saved_model = read_saved_model(os.path.join(directory, SAVED_MODEL_FILE))
    is_hub = os.path.isfile(os.path.join(directory, TFHUB_MODULE_FILE))
    if not is_hub and any(len(m["object_graph_def"]) for m in saved_model["meta_graphs"]):
        raise ValueError(f"{directory} is a TF2 SavedModel (it has an object graph and no "
                         f"{TFHUB_MODULE_FILE}); expected a TF1 Hub module (hub.Module's "
                         "format).")
    bundle = TensorBundle(os.path.join(directory, VARIABLES_PREFIX))
    shapes = bundle.shapes()
    if OBJECT_GRAPH_KEY in shapes:
        raise ValueError(f"{directory} holds a TF2 checkpoint ({OBJECT_GRAPH_KEY} in "
                         "variables/); expected a TF1 Hub module's variables.")
    graphs = [GraphView(m["graph_def"] or {"node": []}, f"{where}: {SAVED_MODEL_FILE}")
              for m in saved_model["meta_graphs"]]
    if not graphs:
        raise ValueError(f"{where}: {SAVED_MODEL_FILE} holds no meta graph; expected a "
                         "TF1 graph.")
    for name, (dtype, shape) in shapes.items():
        if dtype != "float32":
            raise ValueError(f"{where}: variable {name!r} is {dtype}; expected float32.")
    sizes = _sizes(shapes, where)
    names = _published_names(shapes, sizes, where)
    state, max_batch = _state_variables(shapes, sizes, where)
    publisher, mix_names = _mix_variables(shapes, sizes, where)
    _check_graph_variables(graphs, shapes, where)
    options = _options(sizes, graph_facts(graphs, sizes, where))

    arrays = {}
    for module_name, file_name in (names.items() if weights else ()):
        array = bundle.read(module_name, verify_checksum=verify_checksums)
        if file_name == "char_embed":
            if np.any(array[0] != 0):
                raise ValueError(f"{where}: variable 'bilm/char_embed' row 0 holds nonzero "
                                 "values; expected the zero padding row of bilm-tf.")
            array = array[constants.CHAR_ID_SHIFT:]
        arrays[file_name] = np.ascontiguousarray(array)
    mix = None
    if mix_names:
        weights, gamma = (bundle.read(n, verify_checksum=verify_checksums) for n in mix_names)
        mix = TFHubMix(tuple(float(w) for w in weights.reshape(-1)), float(gamma.reshape(-1)[0]))
    default = _default_meta_graph(saved_model["meta_graphs"])
    return TFHubModule(path=directory, options=options, arrays=arrays, mix=mix,
                       publisher=publisher, state_variables=tuple(state),
                       max_batch_size=max_batch, signatures=tuple(sorted(default["signature_def"])))


def read_saved_model(path):
    """A `saved_model.pb` decoded (`protobuf_wire.SAVED_MODEL`).

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: not a SavedModel protobuf (one line naming the file).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{SAVED_MODEL_FILE} not found: {path} (expected a TF1 Hub "
                                "module or SavedModel directory).")
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return wire.decode(data, wire.SAVED_MODEL)
    except wire.ProtobufError as error:
        raise ValueError(f"{path} is not a SavedModel protobuf ({error}).") from None


def _default_meta_graph(meta_graphs):
    """The meta graph of no tags (TF Hub's default), else the first."""
    for meta in meta_graphs:
        if not (meta["meta_info_def"] or {"tags": []})["tags"]:
            return meta
    return meta_graphs[0]


# --- variables -------------------------------------------------------------------------------
def _sizes(shapes, where):
    """Sizes from the variables' shapes: `{"E", "filters", "highway", "F", "P", "D", "L"}`."""
    def shape(name, what):
        if name not in shapes:
            raise ValueError(f"{where} has no variable {name!r} ({what}); expected bilm-tf's "
                             "variables.")
        return shapes[name][1]

    table = shape("bilm/char_embed", "the char embedding")
    if len(table) != 2 or table[0] != constants.NUM_CHARACTERS:
        raise ValueError(f"{where}: variable 'bilm/char_embed' has shape {table}; expected "
                         f"({constants.NUM_CHARACTERS}, E).")
    filters, highway = [], set()
    for name in shapes:
        match = _HIGHWAY.match(name)
        if match:
            highway.add(int(match.group(1)))
    while f"bilm/CNN/W_cnn_{len(filters)}" in shapes:
        kernel = shapes[f"bilm/CNN/W_cnn_{len(filters)}"][1]
        if len(kernel) != 4:
            raise ValueError(f"{where}: variable 'bilm/CNN/W_cnn_{len(filters)}' has shape "
                             f"{kernel}; expected (1, width, E, filters).")
        filters.append((kernel[1], kernel[3]))
    if not filters:
        shape("bilm/CNN/W_cnn_0", "the first convolution")
    projection = shape("bilm/RNN_0/RNN/MultiRNNCell/Cell0/rnn/lstm_cell/projection/kernel",
                       "the LSTM's projection, as bilm-tf builds it when projection_dim < dim")
    if len(projection) != 2:
        raise ValueError(f"{where}: variable 'bilm/RNN_0/RNN/MultiRNNCell/Cell0/rnn/lstm_cell/"
                         f"projection/kernel' has shape {projection}; expected (dim, "
                         "projection_dim).")
    layers = 0
    while f"bilm/RNN_0/RNN/MultiRNNCell/Cell{layers}/rnn/lstm_cell/kernel" in shapes:
        layers += 1
    return {"E": table[1], "filters": filters, "highway": len(highway),
            "F": sum(n for _, n in filters), "D": projection[0], "P": projection[1],
            "L": layers}


def _expected_shapes(sizes):
    """`{module variable: (published name, shape)}` of bilm-tf's weights for these sizes."""
    e, f, d, p = sizes["E"], sizes["F"], sizes["D"], sizes["P"]
    expected = {"bilm/char_embed": ("char_embed", (constants.NUM_CHARACTERS, e))}
    for i, (width, count) in enumerate(sizes["filters"]):
        expected[f"bilm/CNN/W_cnn_{i}"] = (f"CNN/W_cnn_{i}", (1, width, e, count))
        expected[f"bilm/CNN/b_cnn_{i}"] = (f"CNN/b_cnn_{i}", (count,))
    for k in range(sizes["highway"]):
        for part in ("carry", "transform"):
            expected[f"bilm/CNN_high_{k}/W_{part}"] = (f"CNN_high_{k}/W_{part}", (f, f))
            expected[f"bilm/CNN_high_{k}/b_{part}"] = (f"CNN_high_{k}/b_{part}", (f,))
    if f != p:
        expected[_PROJECTION[0]] = ("CNN_proj/W_proj", (f, p))
        expected[_PROJECTION[1]] = ("CNN_proj/b_proj", (p,))
    gates = constants.NUM_GATES * d
    for direction in range(len(constants.DIRECTIONS)):
        for layer in range(sizes["L"]):
            scope = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/"
            for part, shape in (("kernel", (p + p, gates)), ("bias", (gates,)),
                                ("projection/kernel", (d, p))):
                expected[f"bilm/{scope}rnn/lstm_cell/{part}"] = (
                    f"{scope}LSTMCell/{_LSTM_FILE_NAMES[part]}", shape)
    return expected


def _published_names(shapes, sizes, where):
    """`{module variable: published name}`, every weight's shape checked, no unknown name."""
    expected = _expected_shapes(sizes)
    for name, (_, shape) in expected.items():
        if name not in shapes:
            raise ValueError(f"{where} has no variable {name!r}; expected one of shape {shape} "
                             "for the sizes of its other variables.")
        if shapes[name][1] != shape:
            raise ValueError(f"{where}: variable {name!r} has shape {shapes[name][1]}; "
                             f"expected {shape} for the sizes of its other variables.")
    mix_names = {n for pair in MIX_VARIABLES.values() for n in pair}
    for name in sorted(shapes):
        if name in expected or _STATE.match(name) or name in mix_names:
            continue
        what = ("which a model of these sizes does not have" if name.startswith(_ROOT)
                and (_CNN.match(name) or _HIGHWAY.match(name) or _LSTM.match(name)
                     or name in _PROJECTION) else "an unknown variable")
        raise ValueError(f"{where} has variable {name!r} of shape {shapes[name][1]}, {what}; "
                         "expected bilm-tf's weights under bilm/, LSTM state buffers "
                         "bilm*/Variable* and the mix under aggregation/.")
    return {name: published for name, (published, _) in expected.items()}


def _state_variables(shapes, sizes, where):
    """The LSTM state buffers' names, checked: per biLM copy, 4 L of them, `(B, D)` (memory)
    and `(B, P)` (output) in turn, one `B` for all. Returns `(names, B or None)`."""
    copies = {}
    for name in shapes:
        match = _STATE.match(name)
        if match:
            copies.setdefault(match.group(1), []).append((int(match.group(2) or 0), name))
    batch, names = None, []
    for copy, numbered in sorted(copies.items()):
        numbered.sort()
        count = 2 * len(constants.DIRECTIONS) * sizes["L"]
        if [n for n, _ in numbered] != list(range(count)):
            raise ValueError(f"{where} has LSTM state variables {[n for _, n in numbered]} "
                             f"under {copy}/; expected {count} ({copy}/Variable to "
                             f"Variable_{count - 1}).")
        for index, (_, name) in enumerate(numbered):
            shape = shapes[name][1]
            batch = shape[0] if batch is None and len(shape) == 2 else batch
            width = sizes["P"] if index % 2 else sizes["D"]
            if shape != (batch, width):
                raise ValueError(f"{where}: LSTM state variable {name!r} has shape {shape}; "
                                 f"expected ({batch}, {width}).")
            names.append(name)
    return names, batch


def _mix_variables(shapes, sizes, where):
    """`(publisher, (weights name, gamma name))` of the trained mix, or `(None, None)`."""
    found = [p for p, pair in MIX_VARIABLES.items() if any(n in shapes for n in pair)]
    if not found:
        return None, None
    if len(found) > 1:
        raise ValueError(f"{where} has mix variables of both {found[0]} and {found[1]}; "
                         "expected one publisher's.")
    publisher = found[0]
    weights, gamma = MIX_VARIABLES[publisher]
    for name, allowed in ((weights, [(sizes["L"] + 1,)]), (gamma, [(), (1,)])):
        if name not in shapes:
            raise ValueError(f"{where} has no variable {name!r}; expected it beside the other "
                             f"{publisher} mix variable.")
        if shapes[name][1] not in allowed:
            raise ValueError(f"{where}: variable {name!r} has shape {shapes[name][1]}; "
                             f"expected {' or '.join(map(str, allowed))}.")
    return publisher, (weights, gamma)


def _check_graph_variables(graphs, shapes, where):
    """Every variable node of every meta graph is in the checkpoint with its shape, and
    every checkpoint tensor is a variable of some meta graph."""
    declared = {}
    for graph in graphs:
        for node in graph.under("", op=_VARIABLE_OPS):
            name = node["attr"].get("shared_name", {}).get("s") if node["op"] == "VarHandleOp" \
                else None
            name = bytes(name).decode() if name else node["name"]
            shape = wire.shape_of((node["attr"].get("shape") or {}).get("shape"))
            declared[name] = shape
            if name not in shapes:
                raise ValueError(f"{where}: the graph's variable {name!r} (shape {shape}) "
                                 "has no value in variables/; expected every graph variable "
                                 "in the checkpoint.")
            if shape is not None and None not in shape and shape != shapes[name][1]:
                raise ValueError(f"{where}: variable {name!r} has shape {shapes[name][1]} in "
                                 f"variables/ and {shape} in the graph; expected the same.")
    for name in sorted(shapes):
        if declared and name not in declared:
            raise ValueError(f"{where}: variables/ holds {name!r}, which no graph of "
                             f"{SAVED_MODEL_FILE} declares; expected only graph variables.")


def _options(sizes, facts):
    """The options.json dict of the module's biLM."""
    lstm = {"dim": sizes["D"], "projection_dim": sizes["P"], "n_layers": sizes["L"],
            "cell_clip": facts["cell_clip"], "proj_clip": facts["proj_clip"],
            "use_skip_connections": facts["use_skip_connections"]}
    if facts["forget_bias"] != constants.FORGET_BIAS:
        lstm["forget_bias"] = facts["forget_bias"]
    return {"lstm": lstm,
            "char_cnn": {"activation": facts["activation"], "n_highway": sizes["highway"],
                         "embedding": {"dim": sizes["E"]},
                         "filters": [list(f) for f in sizes["filters"]],
                         "n_characters": constants.NUM_CHARACTERS,
                         "max_characters_per_token": facts["max_characters_per_token"]}}
