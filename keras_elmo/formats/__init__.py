"""The files keras-elmo reads and writes, one module per format:

    options.py      options.json, the architecture (`BiLMOptions`)
    weight_file.py  weights.hdf5 in the bilm-tf / AllenNLP layout, both ways; every
                    convention flip between those files and our layers lives here
                    (docs/model.md section 6)
    token_cache.py  precomputed token vectors of a vocabulary (`TokenEmbeddingCache`)
    model_files.py  the file names of a model directory (no TensorFlow import)
"""
