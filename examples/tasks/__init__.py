"""Code the example scripts share and the installed package does not ship: the data readers
of the downstream tasks (`datasets`), their Keras task models (`downstream`), the stored biLM
layers they train on (`layer_store`) and the with/without-ELMo runs (`experiment`)."""
