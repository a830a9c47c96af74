"""Every op of the training step and of the export's model part has a GPU kernel.

No GPU runs TensorFlow here, but the CPU wheel registers the GPU kernels too
(`get_registered_kernels_for_op`), so the traced graphs can be checked op by op: the ops of
the graph, of every function in its library (while-loop bodies and conditions, `tf.cond`
branches, nested `tf.function`s and custom gradients) and of their gradients. An op with
neither a "GPU" kernel nor a "DEFAULT" one (TensorFlow's any-device kernels: control flow,
`Identity`, `NoOp`, `Assert` ..., which place their small int32 inputs in host memory) would
make a GPU step copy its inputs to the host and back: allowed only when it is listed in
`HOST_SIDE_OPS` with the reason it may stay there.
"""

import io

import pytest
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import kernels

from keras_elmo.export.elmo_module import ElmoModule
from keras_elmo.models.bilm import BiLM
from keras_elmo.formats.options import BiLMOptions
from keras_elmo.training.trainer import Trainer

#: Ops allowed without a GPU kernel, with the reason each may run on the host.
HOST_SIDE_OPS = {
    # The sampled softmax's negatives (large vocabularies only): TensorFlow has CPU kernels
    # only. The step sends the N target ids to the host and gets back num_sampled ids and
    # expected counts (a few KB) once per step; the (N, num_sampled) logits stay on the GPU
    # (accidental hits are removed in plain ops, `SharedSoftmax.sampled_nll`).
    "LogUniformCandidateSampler": "sampled-softmax negatives: CPU-only in TensorFlow, "
                                  "KB-sized transfers once per step",
    # The export's text signatures: text arrives on the host and becomes int32 char ids
    # there, before any float work.
    "StringSplitV2": "export: whitespace split of the input text (strings)",
    "StaticRegexReplace": "export: whitespace normalisation of the input text (strings)",
    "StringLength": "export: lengths of the input words (strings)",
    "DecodePaddedRaw": "export: the UTF-8 bytes of each input word (strings)",
    "UnicodeTranscode": "export: invalid UTF-8 replaced in the input words (strings)",
    "UnicodeDecodeWithOffsets": "export: the input text's code points, for its split "
                                "(strings)",
    "Substr": "export: the input words cut out of the text (strings)",
    "RaggedTensorToTensor": "export: ragged words or their int32 char ids padded to a "
                            "batch (strings and ids only, see HOST_SIDE_DTYPES)",
}
#: Allowed ops that are host-side only for these dtypes (their `T` attribute): a float
#: RaggedTensorToTensor would move activations through the host.
HOST_SIDE_DTYPES = {"RaggedTensorToTensor": {"DT_STRING", "DT_INT32", "DT_INT64"}}


def device_ops(graph_def):
    """The op types of a GraphDef and of every function of its library (calls of library
    functions excluded: their bodies are walked themselves); an op of `HOST_SIDE_DTYPES`
    on another dtype is named `"Op[DT_...]"`."""
    functions = {f.signature.name for f in graph_def.library.function}
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes += list(function.node_def)
    ops = set()
    for node in nodes:
        if node.op in functions:
            continue
        dtype = types_pb2.DataType.Name(node.attr["T"].type) if "T" in node.attr else None
        allowed = HOST_SIDE_DTYPES.get(node.op)
        ops.add(node.op if allowed is None or dtype in allowed else f"{node.op}[{dtype}]")
    return ops


def host_only(ops):
    """The ops of `ops` with no GPU (or any-device) kernel registered."""
    def on_gpu(op):
        registered = kernels.get_registered_kernels_for_op(op.split("[")[0]).kernel
        return any(k.device_type in ("GPU", "DEFAULT") for k in registered)
    return sorted(op for op in ops if not on_gpu(op))


def check(ops, what):
    missing = [op for op in host_only(ops) if op not in HOST_SIDE_OPS]
    listed = "\n".join(f"  {op}: {reason}" for op, reason in HOST_SIDE_OPS.items())
    assert not missing, (f"{what}: ops without a GPU kernel: {missing}; allowed host-side "
                         f"ops:\n{listed}")


def training_step_graph(corpus, sampled):
    config, vocab, model_dir, files = corpus
    config = config.replace(full_softmax_max_vocab=4 if sampled else 1024)
    assert config.use_sampled_softmax == sampled
    trainer = Trainer(config, vocab, model_dir, stream=io.StringIO())
    dataset = trainer.distributed_dataset(files, epoch=0)
    step = trainer._build_step(dataset.element_spec)
    return step.get_concrete_function().graph.as_graph_def()


@pytest.mark.parametrize("sampled", [False, True], ids=["full_softmax", "sampled_softmax"])
def test_every_op_of_the_training_step_has_a_gpu_kernel(tiny_corpus, sampled):
    ops = device_ops(training_step_graph(tiny_corpus, sampled))
    # The walk reaches inside loops, conds and the hand-written LSTM backward.
    assert {"While", "MatMul", "Tanh", "Unique"} <= ops or \
        {"StatelessWhile", "MatMul", "Tanh", "Unique"} <= ops, sorted(ops)
    assert ("LogUniformCandidateSampler" in ops) == sampled
    check(ops, "training step")


def test_every_op_of_the_export_model_function_has_a_gpu_kernel():
    module = ElmoModule(BiLM(BiLMOptions.tiny()), max_length=16)
    for name, function in module.signatures().items():
        ops = device_ops(function.graph.as_graph_def())
        assert "MatMul" in ops, (name, sorted(ops))
        check(ops, f"export signature {name!r}")


def test_the_check_catches_a_cpu_only_op():
    """UniqueV2 (row-wise unique) has a CPU kernel only: the old char CNN's op."""
    @tf.function
    def rows(x):
        return tf.raw_ops.UniqueV2(x=x, axis=[0])

    ops = device_ops(rows.get_concrete_function(
        tf.TensorSpec((None, 4), tf.int32)).graph.as_graph_def())
    assert host_only(ops) == ["UniqueV2"]
    with pytest.raises(AssertionError, match="UniqueV2"):
        check(ops, "unique rows")
