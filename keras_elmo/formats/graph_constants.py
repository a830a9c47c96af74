"""A TF1 GraphDef read as a graph, without running it: nodes by name, their inputs and
consumers, and the values of its constants as numpy arrays (no TensorFlow).

It knows TensorFlow's graph conventions only (`"name:1"` for a node's second output,
`"^name"` for a control input, `Const` nodes holding a `TensorProto` in attr `value`);
what a model's graph means is for the module that reads that model.

Example:
>>> graph = GraphView(meta_graph["graph_def"])  # doctest: +SKIP
>>> [n["name"] for n in graph.under("bilm/CNN/", op="MaxPool")]  # doctest: +SKIP
['bilm/CNN/MaxPool', 'bilm/CNN/MaxPool_1']
>>> graph.constant_inputs(graph.node("clip/Minimum"))  # doctest: +SKIP
[array(3., dtype=float32)]
"""

import math

import numpy as np

from keras_elmo.formats import protobuf_wire as wire

#: Ops that pass their input through unchanged (a variable's read, a loop's entry).
PASS_THROUGH = ("Identity", "Enter", "RefEnter", "Snapshot", "StopGradient")
#: TensorProto's typed value lists, by dtype name.
_VALUE_FIELDS = {"float32": "float_val", "float64": "double_val", "int32": "int_val",
                 "int16": "int_val", "int8": "int_val", "uint8": "int_val",
                 "uint16": "int_val", "int64": "int64_val", "bool": "bool_val",
                 "uint32": "uint32_val", "uint64": "uint64_val", "string": "string_val"}
_NUMPY_DTYPES = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int16": "<i2",
                 "int8": "i1", "uint8": "u1", "uint16": "<u2", "int64": "<i8", "bool": "?",
                 "uint32": "<u4", "uint64": "<u8", "float16": "<f2"}


def tensor_array(tensor):
    """A decoded `TensorProto` as a numpy array (an object array of bytes for strings).

    Raises:
        ValueError: a dtype without a numpy equivalent here, an unknown shape, or a
            `tensor_content` whose size does not fit the shape.
    """
    dtype = wire.dtype_name(tensor["dtype"])
    shape = wire.shape_of(tensor["tensor_shape"])
    if shape is None or None in shape:
        raise ValueError(f"a constant of unknown shape {shape}")
    count = math.prod(shape)
    if dtype == "float16":
        values = np.asarray(tensor["half_val"], np.int64).astype("<u2").view("<f2")
    elif dtype in _VALUE_FIELDS:
        values = tensor[_VALUE_FIELDS[dtype]]
    else:
        raise ValueError(f"a constant of dtype {dtype}, which is not read here")
    if dtype == "string":
        array = np.empty(count, object)
        array[:] = [bytes(v) for v in values] + [b""] * (count - len(values))
        return array.reshape(shape)
    numpy_dtype = np.dtype(_NUMPY_DTYPES[dtype])
    content = tensor["tensor_content"]
    if len(content):
        if len(content) != count * numpy_dtype.itemsize:
            raise ValueError(f"a {dtype} constant of shape {shape} holds {len(content)} "
                             f"bytes; expected {count * numpy_dtype.itemsize}")
        return np.frombuffer(content, numpy_dtype).reshape(shape)
    values = np.asarray(values).astype(numpy_dtype)
    if values.size > count:
        raise ValueError(f"a {dtype} constant of shape {shape} lists {values.size} values")
    if values.size < count:  # TensorFlow's rule: the last value repeats (zeros if none)
        fill = values[-1] if values.size else numpy_dtype.type(0)
        values = np.concatenate([values, np.full(count - values.size, fill, numpy_dtype)])
    return values.reshape(shape)


def node_name(tensor_name):
    """`"scope/op:1"` or `"^scope/op"` -> `"scope/op"`."""
    name = tensor_name[1:] if tensor_name.startswith("^") else tensor_name
    base, _, index = name.rpartition(":")
    return base if base and index.isdigit() else name


class GraphView:
    """Nodes of a decoded GraphDef (`protobuf_wire.GRAPH_DEF`), by name and by neighbour.

    Args:
        graph_def: a decoded GraphDef dict.
        where: what the graph is, for error lines (a file name).
    """

    def __init__(self, graph_def, where="graph"):
        self.where = where
        self.nodes = {node["name"]: node for node in graph_def["node"]}
        self._consumers = {}
        for node in graph_def["node"]:
            for tensor_name in node["input"]:
                if not tensor_name.startswith("^"):
                    self._consumers.setdefault(node_name(tensor_name), []).append(node)

    def node(self, name):
        """The node a tensor or node name refers to, or None."""
        return self.nodes.get(node_name(name))

    def under(self, prefix, op=None):
        """Nodes whose names start with `prefix` (and whose op is `op`, or one of a tuple),
        in graph order."""
        ops = (op,) if isinstance(op, str) else op
        return [n for name, n in self.nodes.items()
                if name.startswith(prefix) and (ops is None or n["op"] in ops)]

    def op_counts(self, prefix=""):
        """`{op: number of nodes}` under a name prefix."""
        counts = {}
        for node in self.under(prefix):
            counts[node["op"]] = counts.get(node["op"], 0) + 1
        return counts

    def inputs(self, node, through=PASS_THROUGH):
        """The data inputs of `node` (control inputs left out), each followed back through
        `through` ops to the node that makes the value; None for a name not in the graph."""
        result = []
        for tensor_name in node["input"]:
            if tensor_name.startswith("^"):
                continue
            source = self.node(tensor_name)
            seen = 0
            while source is not None and source["op"] in through and seen < len(self.nodes):
                data = [i for i in source["input"] if not i.startswith("^")]
                if not data:
                    break
                source, seen = self.node(data[0]), seen + 1
            result.append(source)
        return result

    def consumers(self, node, through=()):
        """The nodes that take a data input from `node` (and, past `through` ops, from
        theirs)."""
        result, frontier, seen = [], [node["name"]], set()
        while frontier:
            name = frontier.pop()
            for consumer in self._consumers.get(name, ()):
                if consumer["name"] in seen:
                    continue
                seen.add(consumer["name"])
                if consumer["op"] in through:
                    frontier.append(consumer["name"])
                else:
                    result.append(consumer)
        return result

    def const_value(self, node):
        """The value of a `Const` node (a node dict or a name) as a numpy array.

        Raises:
            ValueError: not a Const node, or a value that cannot be decoded (one line
                naming the node).
        """
        node = self.node(node) if isinstance(node, str) else node
        if node is None or node["op"] != "Const":
            found = "no such node" if node is None else f"op {node['op']}"
            raise ValueError(f"{self.where}: expected a Const node, found {found}.")
        tensor = node["attr"].get("value", {}).get("tensor") if node["attr"].get("value") else None
        if tensor is None:
            raise ValueError(f"{self.where}: Const node {node['name']!r} has no value.")
        try:
            return tensor_array(tensor)
        except ValueError as error:
            raise ValueError(f"{self.where}: Const node {node['name']!r} holds {error}.") from None

    def constant_inputs(self, node, through=PASS_THROUGH):
        """The values of `node`'s data inputs that are constants, in input order."""
        return [self.const_value(source) for source in self.inputs(node, through)
                if source is not None and source["op"] == "Const"]

    def attr_ints(self, node, key):
        """A list-of-ints attr (`ksize`, `strides`) as a tuple, or None if absent."""
        attr = node["attr"].get(key)
        return None if attr is None or attr["list"] is None else tuple(attr["list"]["i"])
