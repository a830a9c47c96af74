"""What a TF1 Hub ELMo module's graph says that its variables' shapes cannot: activation,
max_characters_per_token, cell_clip, proj_clip, use_skip_connections and forget_bias, read
from bilm-tf's ops in `saved_model.pb` (parsed, never run; see `tfhub_module`'s docstring
for the op of each). A value not found is refused in one line, never guessed.
"""

import re

import numpy as np

from keras_elmo import constants

SAVED_MODEL_FILE = "saved_model.pb"
_ADD_OPS = ("Add", "AddV2")
_TENSOR_ARRAY_READS = ("TensorArrayReadV3", "TensorArrayReadV2", "TensorArrayRead")
_BILM_COPY = re.compile(r"^((?:.*/)?bilm(?:_\d+)?/)(?:CNN|RNN_[01])/")
_CNN_VARIABLE = re.compile(r"CNN/[Wb]_cnn_(\d+)(?:/|$)")
_ACTIVATIONS = {"Relu": "relu", "Tanh": "tanh"}
#: Where each graph fact is read (for the line that says it was not found).
_FACT_SOURCES = {"activation": "the op after a MaxPool under bilm/CNN/",
                 "max_characters_per_token": "the window of a MaxPool under bilm/CNN/",
                 "cell_clip": "clip_by_value in bilm/RNN_*/.../lstm_cell/",
                 "proj_clip": "clip_by_value in bilm/RNN_*/.../lstm_cell/",
                 "use_skip_connections": "adds in bilm/RNN_*/.../rnn/while/",
                 "forget_bias": "the forget gate's add in bilm/RNN_*/.../lstm_cell/"}


def graph_facts(graphs, sizes, where):
    """activation, max_characters_per_token, cell_clip, proj_clip, use_skip_connections and
    forget_bias from every biLM copy of every graph (`tfhub_module`'s docstring); all
    must agree."""
    facts = {}
    for graph in graphs:
        copies = sorted({m.group(1) for m in map(_BILM_COPY.match, graph.nodes) if m})
        for root in copies:
            for key, value in {**_cnn_facts(graph, root, sizes),
                               **_lstm_facts(graph, root, sizes)}.items():
                if key in facts and facts[key][0] != value:
                    raise ValueError(f"{where}: the graph's {key} is {facts[key][0]!r} under "
                                     f"{facts[key][1]} and {value!r} under {root}; expected "
                                     "one value.")
                facts.setdefault(key, (value, root))
    for key, sought in _FACT_SOURCES.items():
        if key not in facts:
            raise ValueError(f"{where}: {key} not found in {SAVED_MODEL_FILE} ({sought}); "
                             "expected bilm-tf's TF1 graph.")
    return {key: value for key, (value, _) in facts.items()}


def _cnn_facts(graph, root, sizes):
    """`activation` and `max_characters_per_token` from the CNN's max-pools under `root`."""
    pools = graph.under(root + "CNN/", op=("MaxPool", "MaxPoolV2"))
    if not pools:
        return {}
    filters = sizes["filters"]
    if len(pools) != len(filters):
        raise ValueError(f"{graph.where}: {len(pools)} MaxPool ops under {root}CNN/ and "
                         f"{len(filters)} convolutions in the variables; expected one each.")
    activations, lengths = set(), set()
    for pool in pools:
        index = _cnn_bank(graph, pool)
        if index is None or index >= len(filters):
            raise ValueError(f"{graph.where}: MaxPool {pool['name']!r} is fed by no "
                             "convolution of the variables (bilm/CNN/W_cnn_i, b_cnn_i).")
        if pool["op"] == "MaxPool":
            ksize = graph.attr_ints(pool, "ksize")
        else:
            window = [v for v in graph.constant_inputs(pool)[:1]]
            ksize = tuple(int(k) for k in window[0].reshape(-1)) if window else None
        if not ksize or len(ksize) != 4:
            raise ValueError(f"{graph.where}: MaxPool {pool['name']!r} has window {ksize}; "
                             "expected [1, 1, max_chars - width + 1, 1].")
        lengths.add(ksize[2] + filters[index][0] - 1)
        after = {c["op"] for c in graph.consumers(pool)}
        found = after & set(_ACTIVATIONS)
        if len(found) != 1:
            raise ValueError(f"{graph.where}: MaxPool {pool['name']!r} is followed by ops "
                             f"{sorted(after)}; expected one activation (Relu or Tanh).")
        activations.add(_ACTIVATIONS[found.pop()])
    for key, values in (("activation", activations), ("max_characters_per_token", lengths)):
        if len(values) != 1:
            raise ValueError(f"{graph.where}: the CNN banks under {root}CNN/ give "
                             f"{key} {sorted(values)}; expected one value.")
    return {"activation": activations.pop(), "max_characters_per_token": lengths.pop()}


def _cnn_bank(graph, pool):
    """The index `i` of the convolution (`W_cnn_i`, `b_cnn_i`) a max-pool reads, or None."""
    frontier, seen = [pool], set()
    for _ in range(4):  # MaxPool <- add <- (Conv2D, b_cnn_i/read) <- W_cnn_i/read
        following = []
        for node in frontier:
            for source in graph.inputs(node):
                if source is None or source["name"] in seen:
                    continue
                seen.add(source["name"])
                match = _CNN_VARIABLE.search(source["name"])
                if match:
                    return int(match.group(1))
                following.append(source)
        frontier = following
    return None


def _lstm_facts(graph, root, sizes):
    """Clips, skip connections and forget bias of every LSTM cell under `root`."""
    if not graph.under(root + "RNN_0/"):
        return {}
    per_cell = {}
    for direction in range(len(constants.DIRECTIONS)):
        for layer in range(sizes["L"]):
            scope = f"{root}RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/"
            if not graph.under(scope):
                raise ValueError(f"{graph.where}: no op under {scope}; expected bilm-tf's "
                                 f"LSTM layer {layer} (a TF1 while loop).")
            per_cell[scope] = _cell_facts(graph, scope)
            residual = per_cell[scope].pop("residual")
            if layer == 0 and residual:
                raise ValueError(f"{graph.where}: a residual add in {scope}; expected none "
                                 "in the first LSTM layer (bilm-tf wraps layers >= 1 only).")
            if layer:
                per_cell[scope]["use_skip_connections"] = residual
    facts = {}
    for scope, cell in per_cell.items():
        for key, value in cell.items():
            if key in facts and facts[key][0] != value:
                raise ValueError(f"{graph.where}: {key} is {facts[key][0]!r} in "
                                 f"{facts[key][1]} and {value!r} in {scope}; expected one "
                                 "value for every LSTM layer.")
            facts.setdefault(key, (value, scope))
    facts.setdefault("use_skip_connections", (False, root))  # one layer: nothing to skip
    return {key: value for key, (value, _) in facts.items()}


def _cell_facts(graph, scope):
    """`{"cell_clip", "proj_clip", "forget_bias", "residual"}` of one LSTM layer's ops."""
    clips = {"cell_clip": None, "proj_clip": None}
    for minimum in graph.under(scope, op="Minimum"):
        if "clip_by_value" not in minimum["name"]:
            continue
        high = _scalar_input(graph, minimum)
        maxima = [c for c in graph.consumers(minimum) if c["op"] == "Maximum"]
        low = _scalar_input(graph, maxima[0]) if len(maxima) == 1 else None
        if high is None or low is None or low != -high:
            raise ValueError(f"{graph.where}: clip_by_value {minimum['name']!r} has bounds "
                             f"{low} and {high}; expected constants -c and c.")
        _set_clip(graph, clips, minimum, high)
    for clip in graph.under(scope, op="ClipByValue"):
        low, high = (_as_scalar(v) for v in graph.constant_inputs(clip)[:2]) \
            if len(graph.constant_inputs(clip)) == 2 else (None, None)
        if high is None or low is None or low != -high:
            raise ValueError(f"{graph.where}: ClipByValue {clip['name']!r} has bounds "
                             f"{low} and {high}; expected constants -c and c.")
        _set_clip(graph, clips, clip, high)
    forget = []
    for add in graph.under(scope, op=_ADD_OPS):
        if any(i.endswith("lstm_cell/split:2") for i in add["input"]):
            forget.append(_scalar_input(graph, add))
    if len(forget) != 1 or forget[0] is None:
        raise ValueError(f"{graph.where}: found {len(forget)} constant forget-gate adds "
                         f"(lstm_cell/split:2 + c) under {scope}; expected one.")
    residual = False
    for add in graph.under(scope + "rnn/while/", op=_ADD_OPS):
        if "lstm_cell/" in add["name"][len(scope):]:
            continue
        if any(s is not None and s["op"] in _TENSOR_ARRAY_READS for s in graph.inputs(add)):
            residual = True
    return {**clips, "forget_bias": forget[0], "residual": residual}


def _set_clip(graph, clips, node, value):
    """Records a clip as `proj_clip` (its input a MatMul: the projection) or `cell_clip`."""
    sources = [s for s in graph.inputs(node) if s is not None and s["op"] != "Const"]
    key = "proj_clip" if sources and sources[0]["op"] == "MatMul" else "cell_clip"
    if clips[key] is not None:
        raise ValueError(f"{graph.where}: a second {key} clip_by_value {node['name']!r}; "
                         "expected at most one per LSTM layer.")
    clips[key] = value


def _scalar_input(graph, node):
    """The one scalar constant input of `node` as a float, or None."""
    values = [_as_scalar(v) for v in graph.constant_inputs(node)]
    return values[0] if len(values) == 1 else None


def _as_scalar(value):
    if np.size(value) != 1:
        return None
    # The shortest decimal that is this float32 (3.0, not 3.0000000000000004).
    return float(str(np.asarray(value, np.float32).reshape(())))
