"""Every fixed number of the ELMo model contract (docs/model.md sections 1-6), named once.

Other modules import these names; none of them repeats the numbers.
"""

# --- characters (section 1) -------------------------------------------------------------
#: Characters per token, boundary markers and padding included (options.json default).
MAX_CHARACTERS_PER_TOKEN = 50
#: How many of those are the begin-of-word and end-of-word markers.
NUM_WORD_MARKERS = 2

#: Raw (unshifted) ids of the special characters; bytes use 0-255.
NUM_BYTE_VALUES = 256
BEGIN_SENTENCE_CHAR = 256
END_SENTENCE_CHAR = 257
BEGIN_WORD_CHAR = 258
END_WORD_CHAR = 259
PADDING_CHAR = 260

#: Every id in a model input is the raw id plus this, so that 0 means "no token here".
CHAR_ID_SHIFT = 1
#: Word ids of a vocabulary model are shifted the same way (0 = no token).
WORD_ID_SHIFT = 1
#: Rows of the model's char embedding table (row 0 = "no token", fixed at zero).
NUM_CHARACTERS = PADDING_CHAR + CHAR_ID_SHIFT + 1  # 262
#: Rows of `char_embed` in a weight file (no row 0), and bilm-tf's training `n_characters`.
NUM_FILE_CHARACTERS = NUM_CHARACTERS - CHAR_ID_SHIFT  # 261

#: Literal tokens that get the sentence-boundary char ids instead of their bytes.
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"
UNK_TOKEN = "<UNK>"

# --- LSTM (section 3) --------------------------------------------------------------------
#: The biLSTM's two directions, in the order of every per-direction list and of the
#: weight files' `RNN_0` (forward) and `RNN_1` (backward).
DIRECTIONS = ("forward", "backward")
#: Added to the forget gate's pre-activation; not stored in weight files. The default of
#: `BiLMOptions.forget_bias` (a model whose stored bias holds it has 0.0 there).
FORGET_BIAS = 1.0
#: Number of LSTM gates.
NUM_GATES = 4

# --- precision -----------------------------------------------------------------------------
#: The biLM's dtype policies a user picks from: float32 (the default) and the explicit
#: reduced-precision bfloat16.
DTYPES = ("float32", "bfloat16")

# --- scalar mix (section 5) ---------------------------------------------------------------
LAYER_NORM_EPSILON = 1e-12
