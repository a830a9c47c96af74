"""The files keras-elmo reads and writes, one module per format:

    options.py      options.json, the architecture (`BiLMOptions`)
    weight_file.py  weights.hdf5 in the bilm-tf / AllenNLP layout, both ways; every
                    convention flip between those files and our layers lives here
                    (docs/model.md section 6)
    torch_state.py  torch state dicts (`torch.save`), read without torch
    efml_model.py   ELMoForManyLangs model directories, read into numpy
    efml_weights.py those models as our vocabulary models: options, vocabulary, weights;
                    every convention flip between EFML and our layers (section 10)
    token_cache.py  precomputed token vectors of a vocabulary (`TokenEmbeddingCache`)
    model_files.py  the file names of a model directory (no TensorFlow import)
"""
