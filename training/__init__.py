"""Training a biLM: corpora, vocabularies, the input pipeline, the language-model head and
the distributed, resumable trainer.

Depends on `keras_elmo`; `keras_elmo` never imports from here.
"""
