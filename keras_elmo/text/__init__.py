"""Text in, character ids out: tokenisers (`tokenizers`, with the in-graph `whitespace` and
`unicode_script` splits), UTF-8 line reading (`text_files`) and the character ids of
tokens (`characters`, docs/model.md section 1), and a vocabulary model's char and word ids
(`token_vocabulary`, section 10).

`tokenizers`, `text_files` and `token_vocabulary` import no TensorFlow (the command line
checks input with the first two first); the other modules do.
"""
