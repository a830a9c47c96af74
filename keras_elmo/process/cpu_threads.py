"""How TensorFlow spreads a biLM over the CPU cores: both directions side by side.

A biLM is two independent chains of small ops (the forward and the backward LSTM, step by
step). TensorFlow's default gives every op all the cores (`intra_op` = cores), so the two
chains take turns and each small product is split across cores that mostly wait. Giving
each op half the cores and running two ops at once lets the directions advance side by
side. Measured on 2 cores (intra 1 / inter 2 against TensorFlow's 2 / 2, same run):
training the small config 11,474 vs 9,153 tokens/s, the published one 525 vs 456; published
inference at batch 32 1,679 vs 1,585 tokens/s, batch 1 251 vs 242 (README "Speed").

The layout is set through TensorFlow's own environment variables, which it reads when its
runtime starts: `set_default_thread_layout()` must run before the first TensorFlow op.
Variables the user has set are never changed. `keras_elmo.process.cpu_setup.set_cpu_defaults`
calls it with the oneDNN choice (what the `keras-elmo` command and the benchmarks run first
thing; it imports nothing heavy).

Example:
>>> default_thread_layout(cores=2)
(1, 2)
>>> default_thread_layout(cores=16)
(8, 2)
>>> set_default_thread_layout()  # before TensorFlow runs anything  # doctest: +SKIP
{'TF_NUM_INTRAOP_THREADS': '1', 'TF_NUM_INTEROP_THREADS': '2'}
"""

import os

#: TensorFlow's variables: threads one op may use, ops that may run at once.
INTRA_OP_VARIABLE = "TF_NUM_INTRAOP_THREADS"
INTER_OP_VARIABLE = "TF_NUM_INTEROP_THREADS"
#: Independent chains of a biLM: the forward and the backward direction.
NUM_CHAINS = 2


def usable_cores():
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_thread_layout(cores=None):
    """`(intra_op, inter_op)`: each op gets `cores / 2` threads, two ops run at once.

    Args:
        cores: int or None (this process's usable cores).
    """
    cores = usable_cores() if cores is None else int(cores)
    if cores < 1:
        raise ValueError(f"cores must be >= 1; received {cores}.")
    return max(1, cores // NUM_CHAINS), NUM_CHAINS


def set_default_thread_layout(environ=None, cores=None):
    """Sets `default_thread_layout()` as TensorFlow's thread variables, unless set already.

    Has an effect only before TensorFlow's runtime starts (its first op). Either variable
    set by the user keeps both as the user left them.

    Args:
        environ: mapping to update (default `os.environ`).
        cores: int or None (this process's usable cores).

    Returns:
        dict: the two variables' values in effect (an unset one: TensorFlow's default).
    """
    environ = os.environ if environ is None else environ
    if INTRA_OP_VARIABLE not in environ and INTER_OP_VARIABLE not in environ:
        intra, inter = default_thread_layout(cores)
        environ[INTRA_OP_VARIABLE], environ[INTER_OP_VARIABLE] = str(intra), str(inter)
    return {name: environ.get(name, "TensorFlow's default")
            for name in (INTRA_OP_VARIABLE, INTER_OP_VARIABLE)}


def describe_thread_layout(environ=None):
    """One line for a report: `"threads: 1 per op, 2 ops at once (of 2 cores)"`."""
    environ = os.environ if environ is None else environ
    intra = environ.get(INTRA_OP_VARIABLE, "all")
    inter = environ.get(INTER_OP_VARIABLE, "TensorFlow's default")
    return f"threads: {intra} per op, {inter} ops at once (of {usable_cores()} cores)"
