"""The files keras-elmo reads and writes, one module per format:

    options.py      options.json, the architecture (`BiLMOptions`)
    weight_file.py  weights.hdf5 in the bilm-tf / AllenNLP layout, both ways; every
                    convention flip between those files and our layers lives here
                    (docs/model.md section 6)
    torch_state.py  torch state dicts (`torch.save`), read without torch
    efml_model.py   ELMoForManyLangs model directories, read into numpy
    efml_weights.py those models as our vocabulary models: options, vocabulary, weights;
                    every convention flip between EFML and our layers (section 10)
    tfhub_module.py TF1 Hub modules (Google's `elmo` 1-3, DeepPavlov's): names, shapes
                    and the trained mix, read without TensorFlow; tfhub_graph_facts.py
                    the options read from the module's graph constants
    tensor_bundle.py TensorFlow checkpoints (variables.index + data shards), read in numpy
    protobuf_wire.py the protobuf wire format (saved_model.pb, the checkpoint index)
    graph_constants.py a GraphDef's nodes and constants, not run
    crc32c.py       the CRC-32C checksum TensorFlow's checkpoints carry
    token_cache.py  precomputed token vectors of a vocabulary (`TokenEmbeddingCache`)
    model_files.py  the file names of a model directory (no TensorFlow import)
    model_format.py which format a model directory has, by its files, and its reader
    model_mix.py    a model's trained scalar mix (scalar_mix.json, a TF Hub module's)
    dic_file.py, model_vocabulary.py, json_fields.py, torch_pickle.py, weight_file_check.py:
                    the pieces the readers above share
"""
