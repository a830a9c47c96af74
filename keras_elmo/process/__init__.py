"""Helpers of a running keras-elmo process, none of them about the model:

    atomic_file.py        write to a temporary name, rename when complete
    atomic_hdf5.py        an HDF5 file written that way, which a full disk cannot crash
    storage_errors.py     full disk, quota, read-only, permission: recognised, one line
    file_lock.py          one process at a time: flock, the holder's record, stale holders
    cpu_setup.py          TensorFlow's CPU settings for a biLM (threads, oneDNN), the one place
    cpu_quota.py          a container's CPU quota (cgroup v1 and v2), which caps the threads
    progress.py           one progress line on stderr
    keras_backend.py      the Keras backend in use; TensorFlow asked for by what needs it

None imports TensorFlow at module level.
"""
