"""Using a trained biLM: embeddings written to files and contextual neighbours.

Depends on `keras_elmo` (and `keras_elmo.export.mix_weights` for trained mixes), never the
reverse.

- `inputs`: user-input checks (no TensorFlow import; the CLI runs them first).
- `loaders`: load a MODEL_DIR (options.json + weights.hdf5 [+ vocab.txt for the cache]);
  the files are found by `keras_elmo.formats.model_files` (no TensorFlow import).
- `token_cache`: `TokenEmbeddingCache`, tokens -> biLM outputs, the char CNN once per
  distinct token.
- `traced_bilm`: the biLM's functions as the Keras backend in use runs them (TensorFlow,
  JAX or PyTorch; the package's only backend-specific code).
- `bilm_runner`: run a biLM over token lists in packed calls, streaming.
- `row_packing`: which sentences share a call and a row (back to back, rows nearly full).
- `embed_file`: `keras-elmo embed` (AllenNLP's `elmo` command layout).
- `beam_pipeline`, `beam_worker`, `beam_shards`: `keras-elmo embed --runner`, the same
  embedder as an Apache Beam pipeline (imported only there: Beam is an optional dependency).
- `neighbors`: `keras-elmo neighbors` (the paper's Table 4 comparison).
"""
