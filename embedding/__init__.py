"""Using a trained biLM: embeddings written to files, contextual neighbours, downstream tasks.

Depends on `keras_elmo` (and `export.mix_weights` for trained mixes, `export.model_dir` for the
files of a MODEL_DIR), never the reverse.

- `inputs`: user-input checks and line readers (no TensorFlow import; the CLI runs them first).
- `model_files`: load a MODEL_DIR (options.json + weights.hdf5 [+ vocab.txt for the cache]);
  the files are found by `export.model_dir` (no TensorFlow import).
- `bilm_runner`: run a biLM over token lists in length-sorted batches, streaming.
- `embed_file`: `keras-elmo embed` (AllenNLP's `elmo` command layout).
- `neighbors`: `keras-elmo neighbors` (the paper's Table 4 comparison).
- `progress`: the progress line on stderr.
- `datasets`, `layer_store`, `downstream`, `experiment`: the data readers, the stored biLM
  layers, the tagger / classifier models and the training runs of `examples/`.
"""
