"""Text in, character ids out: tokenisers (`tokenizers`, with the in-graph `whitespace` and
`unicode_script` splits), UTF-8 line reading (`text_files`) and the character ids of
tokens (`characters`, docs/model.md section 1; from string tensors in a TensorFlow graph,
`string_char_ids`), and a vocabulary model's char and word ids (`token_vocabulary`,
section 10).

`tokenizers`, `text_files`, `characters`, `token_vocabulary` and `sentence_windows` import
no TensorFlow at import: they work under every Keras backend, without TensorFlow installed
(the `unicode-script` tokenizer asks for it when chosen; `sentence_windows`' two graph
functions import it when called). The other modules work on string tensors and import it.
"""
