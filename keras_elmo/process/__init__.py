"""Helpers of a running keras-elmo process, none of them about the model:

    atomic_file.py     write to a temporary name, rename when complete
    cpu_threads.py     TensorFlow's thread layout for a biLM, set before TensorFlow starts
    process_memory.py  resident memory, malloc retention, which allocator is in use
    progress.py        one progress line on stderr

None imports TensorFlow at module level.
"""
