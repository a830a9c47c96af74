"""Helpers of a running keras-elmo process, none of them about the model:

    atomic_file.py        write to a temporary name, rename when complete
    cpu_setup.py          TensorFlow's CPU settings for a biLM (threads, oneDNN), the one place
    tensorflow_import.py  importing TensorFlow as the command does: those settings, no noise
    progress.py           one progress line on stderr

None imports TensorFlow at module level.
"""
