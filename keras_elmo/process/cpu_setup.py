"""The CPU at hand, and TensorFlow's CPU settings for a biLM, chosen before TensorFlow starts.

TensorFlow reads two kinds of settings from environment variables once, when its runtime
starts: the thread layout (`keras_elmo.process.cpu_threads`) and whether its oneDNN kernels
are on (`TF_ENABLE_ONEDNN_OPTS`). Left to itself, TensorFlow 2.21 turns oneDNN on only on
CPUs with AVX512_VNNI, AVX512_BF16 or AMX, and runs its Eigen kernels elsewhere: on every
AVX2-only CPU (most Zen 2/3 cloud machines, many laptops). For a biLM, oneDNN's kernels are
the faster ones on both classes, so `set_cpu_defaults()` turns oneDNN on wherever the CPU has
AVX2. A variable the user has set is never changed, and `describe_cpu()` prints what is in
effect and who chose it.

Measured with this release's model (2-core AMD EPYC with AVX512_BF16, 2 rounds each, one
after the other; `benchmarks/train_throughput.py --sizes small`, `benchmarks/inference.py`,
published size), oneDNN off -> on:
- AVX2 behaviour (`ONEDNN_MAX_CPU_ISA=AVX2`, matmul 241-247 GFLOP/s): small training
  4,121-4,175 -> 8,406-8,987 tokens/s (2.1x); inference batch 32 893-901 -> 982-992 (+10%),
  batch 1 221-226 -> 156-182 (oneDNN's per-op cost shows on one-row products); model peak
  1,121-1,123 -> 1,128-1,164 MiB. On is chosen: training and batches gain far more than
  batch 1 loses; a server of single sentences on an AVX2 CPU may set
  `TF_ENABLE_ONEDNN_OPTS=0` itself.
- AVX512 (TensorFlow's own default is on): small training 4,515-4,740 -> 11,631-12,567;
  batch 32 1,286-1,402 -> 1,468-1,538; batch 1 163-214 -> 176-218; peak 1,123-1,126 ->
  1,144-1,172 MiB.
`TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1` (oneDNN's large blocks from malloc, not its pool) cost
7-16% at batch 32 for no measurable memory (1,134-1,142 vs 1,128-1,150 MiB): not set.

`native_bfloat16()` says whether bfloat16 runs in hardware here (AVX512_BF16 or AMX_BF16,
with oneDNN's kernels on and not capped below them); elsewhere TensorFlow emulates bfloat16,
measured 10x slower than float32 at batch 1 and 3.1-3.8x at batch 32 (published size), 1.8x
in training, and `bfloat16_cost_note()` says so in one line. `check_bfloat16_runs()` refuses
the one setting where TensorFlow would abort instead (an AVX512_BF16 CPU with oneDNN capped
below bfloat16).

This module imports nothing heavy: call it first thing.

Example:
>>> settings = set_cpu_defaults()  # before TensorFlow runs anything  # doctest: +SKIP
>>> print(describe_cpu())  # doctest: +SKIP
cpu: avx2 avx512f avx512_bf16; oneDNN on (TensorFlow's default here); threads: 1 per op, 2 ops at once (of 2 cores)
"""

import logging
import os

from keras_elmo.process.cpu_threads import describe_thread_layout, set_default_thread_layout

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
#: The oneDNN value `set_cpu_defaults` chose in this process, for `describe_cpu` (None: it
#: chose nothing, TensorFlow's default or the user's value is in effect).
_chosen = {"onednn": None}


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


def native_bfloat16(flags=None, environ=None):
    """True when bfloat16 runs in hardware here: the CPU has AVX512_BF16 or AMX_BF16,
    TensorFlow's oneDNN kernels are on (its other bfloat16 kernels emulate it: on this
    project's AVX512_BF16 EPYC with `TF_ENABLE_ONEDNN_OPTS=0`, published-size inference ran
    10x slower than float32 at batch 1 and 3.1x at batch 32), and `ONEDNN_MAX_CPU_ISA`, if
    set, leaves oneDNN an instruction set with bfloat16."""
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
    cost = ("measured 1.8x slower than float32 in training (small preset, 2 cores)" if training
            else "measured 10x slower than float32 at batch 1 and 3.1-3.8x at batch 32 "
                 "(published size)")
    return f"{why}: TensorFlow emulates it, {cost}; float32 is the faster choice here"


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


def describe_cpu(environ=None, flags=None):
    """One line for a report: the CPU's flags, oneDNN on or off and who chose it, threads."""
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
            f"{describe_thread_layout(environ)}")
