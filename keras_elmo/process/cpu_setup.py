"""TensorFlow's CPU settings for a biLM, chosen before TensorFlow starts: the one place.

TensorFlow reads two kinds of settings from environment variables once, when its runtime
starts, and `set_cpu_defaults()` sets both, each unless the user has set it:

- **The thread layout.** A biLM is two independent chains of small ops (the forward and the
  backward LSTM, step by step). TensorFlow's default gives every op all the cores, so the two
  chains take turns and each small product is split across cores that mostly wait; giving
  each op half the cores and running two ops at once lets the directions advance side by
  side, faster in training and inference (`default_thread_layout`). The cores are the
  usable ones: the CPU affinity, or a container's CPU quota where smaller (`usable_cores`;
  `docker run --cpus=2` on a 64-core host: 2).
- **oneDNN's kernels.** Left to itself, TensorFlow 2.21 turns them on only on CPUs with
  AVX512_VNNI, AVX512_BF16 or AMX, and runs its Eigen kernels elsewhere: on every AVX2-only
  CPU (most Zen 2/3 cloud machines, many laptops). For a biLM oneDNN's kernels are the faster
  ones on both classes in training and in batches (at one row they cost a little: a server
  of single sentences on an AVX2 CPU may set `TF_ENABLE_ONEDNN_OPTS=0` itself), so they are
  turned on wherever the CPU has AVX2.

docs/performance.md ("Figures behind the code's choices") has the figures behind both.
`describe_cpu()` prints what is in effect and who chose it. Where the CPU has no native
bfloat16 TensorFlow emulates it, several times slower than float32: `native_bfloat16()`
tells, `bfloat16_cost_note()` says so in one line, and `check_bfloat16_runs()` refuses the
one setting where TensorFlow would abort instead (an AVX512_BF16 CPU with oneDNN capped
below bfloat16).

This module imports nothing heavy: call it first thing (the `keras-elmo` command does).

Example:
>>> settings = set_cpu_defaults()  # before TensorFlow runs anything  # doctest: +SKIP
>>> print(describe_cpu())  # doctest: +SKIP
cpu: avx2 avx512f avx512_bf16; oneDNN on (TensorFlow's default here); threads: 1 per op, 2 ops at once (of 2 cores)
>>> default_thread_layout(cores=2)
(1, 2)
>>> default_thread_layout(cores=16)
(8, 2)
"""

import logging
import math
import os

from keras_elmo.process.cpu_quota import cpu_quota

#: The CPU flags that decide TensorFlow's kernels and bfloat16 speed, as /proc/cpuinfo names
#: them.
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
#: Flags with which TensorFlow turns oneDNN on by itself.
TENSORFLOW_ONEDNN_FLAGS = ("avx512_vnni", "avx512_bf16", "amx_bf16")
#: Flags of native bfloat16 arithmetic.
NATIVE_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
#: Marks of oneDNN's instruction-set names (`ONEDNN_MAX_CPU_ISA`) that include bfloat16
#: arithmetic: AVX512_CORE_BF16, AVX512_CORE_FP16, AVX512_CORE_AMX, AVX10_1_512, ...
_BFLOAT16_ISA_MARKS = ("BF16", "FP16", "AMX", "AVX10")
#: TensorFlow's switch of its oneDNN kernels, and oneDNN's own cap on its instruction set.
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
ONEDNN_ISA_VARIABLE = "ONEDNN_MAX_CPU_ISA"
#: TensorFlow's variables: threads one op may use, ops that may run at once.
INTRA_OP_VARIABLE = "TF_NUM_INTRAOP_THREADS"
INTER_OP_VARIABLE = "TF_NUM_INTEROP_THREADS"
#: Independent chains of a biLM: the forward and the backward direction.
NUM_CHAINS = 2
#: The oneDNN value `set_cpu_defaults` chose in this process, for `describe_cpu` (None: it
#: chose nothing, TensorFlow's default or the user's value is in effect), and the thread
#: variables' values `set_default_thread_layout` chose (`thread_layout_set_by_user`).
_chosen = {"onednn": None, "threads": None}


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The set of `CPU_FLAGS` this CPU has (empty where /proc/cpuinfo cannot be read)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split()) & frozenset(CPU_FLAGS)
    except OSError:
        pass
    return frozenset()


def cpu_model(cpuinfo="/proc/cpuinfo"):
    """The CPU's model name as /proc/cpuinfo gives it ("AMD EPYC", "Intel(R) Xeon(R) ...",
    "unknown" where it cannot be read)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return "unknown"


def native_bfloat16(flags=None, environ=None):
    """True when bfloat16 runs in hardware here: the CPU has AVX512_BF16 or AMX_BF16,
    TensorFlow's oneDNN kernels are on (its other bfloat16 kernels emulate it), and
    `ONEDNN_MAX_CPU_ISA`, if set, leaves oneDNN an instruction set with bfloat16."""
    environ = os.environ if environ is None else environ
    flags = cpu_flags() if flags is None else flags
    return (_has_bfloat16_flag(flags) and onednn_enabled(environ, flags)
            and not _isa_capped_below_bfloat16(environ))


def _has_bfloat16_flag(flags):
    """True when the CPU's flags include bfloat16 arithmetic (`NATIVE_BFLOAT16_FLAGS`)."""
    return any(flag in flags for flag in NATIVE_BFLOAT16_FLAGS)


def _isa_capped_below_bfloat16(environ):
    """True when `ONEDNN_MAX_CPU_ISA` names an instruction set without bfloat16 (AVX2, ...)."""
    cap = environ.get(ONEDNN_ISA_VARIABLE, "").strip().upper()
    return bool(cap) and cap not in ("ALL", "DEFAULT") and not any(
        mark in cap for mark in _BFLOAT16_ISA_MARKS)


def bfloat16_cost_note(flags=None, environ=None, training=False):
    """None where bfloat16 is native (`native_bfloat16`), else one line on what it costs.

    Args:
        flags: the CPU's flags (default: `cpu_flags()`).
        environ: the environment (default `os.environ`).
        training: the cost of training in `mixed_bfloat16` instead of inference's.
    """
    environ = os.environ if environ is None else environ
    flags = cpu_flags() if flags is None else flags
    if native_bfloat16(flags, environ):
        return None
    if not _has_bfloat16_flag(flags):
        why = "this CPU has no native bfloat16 (no avx512_bf16 or amx_bf16 flag)"
    elif not onednn_enabled(environ, flags):
        why = (f"no native bfloat16 with oneDNN off ({ONEDNN_VARIABLE}="
               f"{environ.get(ONEDNN_VARIABLE)})")
    else:
        why = (f"no native bfloat16 with {ONEDNN_ISA_VARIABLE}="
               f"{environ.get(ONEDNN_ISA_VARIABLE)}")
    cost = ("several times slower than float32 in training" if training
            else "several times slower than float32, most at batch 1")
    return (f"{why}: TensorFlow emulates it, {cost} (docs/performance.md); float32 is the "
            "faster choice here")


def warn_if_bfloat16_is_emulated(flags=None, environ=None, training=False):
    """Refuses bfloat16 where it cannot run (`check_bfloat16_runs`), else logs
    `bfloat16_cost_note()` as one warning line (logger `keras_elmo`) where bfloat16 is not
    native and returns it; returns None elsewhere. GPUs are not looked at: call it where
    bfloat16 will run on the CPU."""
    check_bfloat16_runs(flags, environ)
    note = bfloat16_cost_note(flags, environ, training)
    if note is not None:
        logging.getLogger("keras_elmo").warning("bfloat16: %s", note)
    return note


def check_bfloat16_runs(flags=None, environ=None):
    """Refuses bfloat16 where TensorFlow would abort the process on its first product.

    On a CPU with AVX512_BF16 or AMX_BF16 and oneDNN on, TensorFlow hands bfloat16 products
    to oneDNN's bfloat16 kernels; an `ONEDNN_MAX_CPU_ISA` below them (`AVX2`, the setting
    that shows an AVX2 machine's behaviour) leaves oneDNN none, and the process ends with
    "could not create a primitive descriptor for the matmul primitive" (seen here).

    Raises:
        ValueError: naming the variable and what to do instead.
    """
    environ = os.environ if environ is None else environ
    flags = cpu_flags() if flags is None else flags
    if (_has_bfloat16_flag(flags) and onednn_enabled(environ, flags)
            and _isa_capped_below_bfloat16(environ)):
        raise ValueError(f"bfloat16 cannot run with {ONEDNN_ISA_VARIABLE}="
                         f"{environ[ONEDNN_ISA_VARIABLE]} on this CPU: TensorFlow sends its "
                         "bfloat16 products to oneDNN's bfloat16 kernels, which that cap "
                         f"removes (the process would abort); unset {ONEDNN_ISA_VARIABLE} or "
                         "use float32.")


def default_onednn(flags=None):
    """`"1"` (oneDNN on) for a CPU with AVX2, else None (TensorFlow's own default)."""
    flags = cpu_flags() if flags is None else flags
    return "1" if "avx2" in flags else None


def set_cpu_defaults(environ=None, flags=None, cores=None):
    """Sets the thread layout and the oneDNN switch for a biLM, each unless the user set it.

    Has an effect only before TensorFlow's runtime starts (its first op).

    Args:
        environ: mapping to update (default `os.environ`).
        flags: the CPU's flags (default: `cpu_flags()`).
        cores: int or None (this process's usable cores).

    Returns:
        dict of the variables in effect: the thread layout's two and `TF_ENABLE_ONEDNN_OPTS`
        (`"TensorFlow's default"` where unset).
    """
    environ = os.environ if environ is None else environ
    settings = set_default_thread_layout(environ, cores)
    choice = default_onednn(flags)
    if ONEDNN_VARIABLE not in environ and choice is not None:
        environ[ONEDNN_VARIABLE] = _chosen["onednn"] = choice
    settings[ONEDNN_VARIABLE] = environ.get(ONEDNN_VARIABLE, "TensorFlow's default")
    return settings


def onednn_enabled(environ=None, flags=None):
    """Whether TensorFlow will run (or runs) its oneDNN kernels, by its own rule."""
    environ = os.environ if environ is None else environ
    flags = cpu_flags() if flags is None else flags
    value = environ.get(ONEDNN_VARIABLE, "").strip().lower()
    if value in ("1", "true"):
        return True
    if value in ("0", "false"):
        return False
    return any(flag in flags for flag in TENSORFLOW_ONEDNN_FLAGS)


def one_row_transposes_pay(environ=None, flags=None):
    """Whether a float32 one-row LSTM step reads `W_h` faster from an `(in, out)` transpose
    made in each call than from the stored `(out, in)` kernel, by more than the transpose
    costs: true with oneDNN's kernels on an AVX2-only CPU; TensorFlow's own kernels and
    AVX512 CPUs read the stored kernel (docs/performance.md, "Figures behind the code's
    choices", has the figures)."""
    flags = cpu_flags() if flags is None else flags
    return onednn_enabled(environ, flags) and "avx512f" not in flags


def describe_cpu(environ=None, flags=None):
    """One line for a report: the CPU's flags, oneDNN on or off and who chose it, threads,
    the CPU's model name."""
    environ = os.environ if environ is None else environ
    flags = cpu_flags() if flags is None else flags
    names = " ".join(flag for flag in CPU_FLAGS if flag in flags) or "no AVX2"
    state = "on" if onednn_enabled(environ, flags) else "off"
    if ONEDNN_VARIABLE not in environ:
        who = "TensorFlow's default here"
    elif _chosen["onednn"] == environ[ONEDNN_VARIABLE]:
        who = f"{ONEDNN_VARIABLE}={environ[ONEDNN_VARIABLE]} set by keras-elmo for this CPU"
    else:
        who = f"{ONEDNN_VARIABLE}={environ[ONEDNN_VARIABLE]} set by the user"
    isa = environ.get(ONEDNN_ISA_VARIABLE)
    capped = f", {ONEDNN_ISA_VARIABLE}={isa}" if isa else ""
    return (f"cpu: {names}; oneDNN {state} ({who}{capped}); "
            f"{describe_thread_layout(environ)}; model: {cpu_model()}")


def affinity_cores():
    """Cores this process may run on by its CPU affinity (`os.cpu_count()` where the OS does
    not tell)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def usable_cores(root=None):
    """Cores' worth of CPU this process may use: the smaller of its CPU affinity and its
    cgroup's CPU quota rounded up (`cpu_quota`), at least 1, as JVMs and Go's automaxprocs
    count them (`docker run --cpus=2` on a 64-core host: 2).

    Args:
        root: str or None: the folder standing in for "/" where the quota is read (default:
            `$KERAS_ELMO_CGROUP_ROOT`, else "/").
    """
    return _cores_and_quota(root)[0]


def describe_cores(root=None):
    """`usable_cores()` and where the count came from, for a report: `"2 cores: CPU quota
    2.0 of 64 on this host"`, `"2 cores: the CPU affinity, under a CPU quota of 4.0"`,
    `"2 cores"` (no quota)."""
    cores, quota, affinity = _cores_and_quota(root)
    count = f"{cores} core{'s' if cores != 1 else ''}"
    if quota is None:
        return count
    if math.ceil(quota) <= affinity:
        return f"{count}: CPU quota {round(quota, 2)} of {affinity} on this host"
    return f"{count}: the CPU affinity, under a CPU quota of {round(quota, 2)}"


def _cores_and_quota(root):
    """`(usable cores, CPU quota or None, affinity cores)`."""
    affinity, quota = affinity_cores(), cpu_quota(root)
    cores = affinity if quota is None else min(affinity, max(1, math.ceil(quota)))
    return cores, quota, affinity


def default_thread_layout(cores=None):
    """`(intra_op, inter_op)`: each op gets `cores / 2` threads, two ops run at once (module
    docstring).

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
        _chosen["threads"] = (str(intra), str(inter))
    return {name: environ.get(name, "TensorFlow's default")
            for name in (INTRA_OP_VARIABLE, INTER_OP_VARIABLE)}


def describe_thread_layout(environ=None):
    """One line for a report: `"threads: 1 per op, 2 ops at once (of 2 cores)"`, with where
    the count came from under a CPU quota (`describe_cores`): `"... (of 2 cores: CPU quota
    2.0 of 64 on this host)"`."""
    environ = os.environ if environ is None else environ
    intra = environ.get(INTRA_OP_VARIABLE, "all")
    inter = environ.get(INTER_OP_VARIABLE, "TensorFlow's default")
    return f"threads: {intra} per op, {inter} ops at once (of {describe_cores()})"


def worker_thread_layout(cores):
    """`(intra_op, inter_op)` of one of several worker processes on a machine, given its
    share of the cores (`keras-elmo embed --runner DirectRunner --num-workers N`: the
    usable cores over N): `default_thread_layout(cores)`, except that a one-core share runs
    one op at a time, one thread in all (on one core the two chains can only take turns;
    two ops at once ran within the noise of it: docs/performance.md, "`embed` as a Beam
    pipeline").

    Example:
    >>> worker_thread_layout(1), worker_thread_layout(4)
    ((1, 1), (2, 2))
    """
    cores = int(cores)
    if cores < 1:
        raise ValueError(f"cores must be >= 1; received {cores}.")
    return (1, 1) if cores < NUM_CHAINS else default_thread_layout(cores)


def thread_layout_set_by_user(environ=None):
    """True when either thread variable is set to a value `set_default_thread_layout` did
    not choose in this process (the user's, which worker layouts leave alone)."""
    environ = os.environ if environ is None else environ
    values = (environ.get(INTRA_OP_VARIABLE), environ.get(INTER_OP_VARIABLE))
    return values != (None, None) and values != _chosen["threads"]
