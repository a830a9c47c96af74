"""Using a trained biLM: embeddings written to files, contextual neighbours, downstream tasks.

Depends on `keras_elmo` (and `export.mix_weights` for trained mixes), never the reverse.

- `model_files`: load a MODEL_DIR (options.json + weights.hdf5 [+ vocab.txt]).
- `bilm_runner`: run a biLM over token lists in length-sorted batches, streaming.
- `embed_file`: `keras-elmo embed` (AllenNLP's `elmo` command layout).
- `neighbors`: `keras-elmo neighbors` (the paper's Table 4 comparison).
- `progress`: the progress line on stderr.
- `layer_store`, `downstream`, `datasets`: precomputed biLM layers, the tagger and
  classifier models and the data readers of the examples in `examples/`.
"""
