"""Text in, character ids out: tokenisers (`tokenizers`, with the in-graph `whitespace` and
`unicode_script` splits), UTF-8 line reading (`text_files`) and the character ids of
tokens (`characters`, docs/model.md section 1).

`tokenizers` and `text_files` import no TensorFlow (the command line checks input with
them first); the other modules do.
"""
