"""Training-side tools: corpora, vocabularies, baselines and the biLM trainer.

Depends on `keras_elmo`; `keras_elmo` never imports from here.
"""
