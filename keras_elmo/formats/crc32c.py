"""CRC-32C (Castagnoli), as TensorFlow's checkpoints and LevelDB tables store it, in numpy.

A byte-at-a-time table loop in Python is far too slow for a published model's checkpoint
(docs/performance.md has both rates). Here the bytes are cut into many
equal chunks whose registers advance together, one numpy step per two bytes (a 65,536-entry
table); the chunks' registers are then combined as zlib's `crc32_combine` does (the CRC
register is linear over GF(2): appending `n` zero bytes maps it by a fixed 32 x 32 bit
matrix, applied through four 256-entry tables; every `n` used is a power of two, so a few
cached tables serve any length).

Example:
>>> hex(crc32c(b"123456789"))
'0xe3069283'
>>> hex(unmask(mask(0xE3069283)))
'0xe3069283'
"""

import functools

import numpy as np

_POLYNOMIAL = 0x82F63B78  # reflected Castagnoli polynomial
_MASK_DELTA = 0xA282EAD8  # LevelDB / TensorFlow's crc32c::Mask
_UINT32 = 0xFFFFFFFF
#: Chunks advanced together (one numpy element each, at most), the fewest bytes each chunk
#: gets, and the bytes of one piece of them (a power of two).
_LANES = 32768
_MIN_LANE_BYTES = 8
_PIECE_BYTES = 4 << 20
#: Below this many bytes the plain table loop is used.
_SMALL = 256


def _make_table():
    table = np.zeros(256, np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLYNOMIAL if crc & 1 else 0)
        table[byte] = crc
    return table


_TABLE = _make_table()
_TABLE_LIST = _TABLE.tolist()


def _make_table16():
    """The register after two bytes, from its low 16 bits xor the two bytes (256 KiB)."""
    register = np.arange(1 << 16, dtype=np.uint32)
    for _ in range(2):
        register = _TABLE[register & 0xFF] ^ (register >> 8)
    return register


_TABLE16 = _make_table16()


def _advance_bytes(register, data):
    """The raw register (no initial or final xor) after `data`, byte by byte."""
    table = _TABLE_LIST
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


def _matrix_times(matrix, vector):
    """GF(2) matrix (32 column ints) times a 32-bit vector."""
    result, bit = 0, 0
    while vector:
        if vector & 1:
            result ^= matrix[bit]
        vector >>= 1
        bit += 1
    return result


@functools.lru_cache(maxsize=None)
def _zeros_matrix(log2_count):
    """"Append 2**log2_count zero bytes" to a raw register, as 32 GF(2) matrix columns."""
    if log2_count == 0:  # one zero byte: the register shifts right by 8, its low byte
        return tuple(_advance_bytes(1 << bit, b"\0") for bit in range(32))  # through the table
    half = _zeros_matrix(log2_count - 1)
    return tuple(_matrix_times(half, column) for column in half)


@functools.lru_cache(maxsize=None)
def _zeros_tables(log2_count):
    """`_zeros_matrix` as four 256-entry tables, one per byte of the register."""
    columns = np.array(_zeros_matrix(log2_count), np.uint32).reshape(4, 8)
    bits = (np.arange(256)[:, None] >> np.arange(8)) & 1  # (256 bytes, 8 bits)
    return np.bitwise_xor.reduce(np.where(bits[None].astype(bool), columns[:, None], 0),
                                 axis=-1).astype(np.uint32)  # (4, 256)


def _shift(registers, log2_count):
    """Raw registers (numpy uint32) after 2**log2_count zero bytes each."""
    tables = _zeros_tables(log2_count)
    return (tables[0][registers & 0xFF] ^ tables[1][(registers >> 8) & 0xFF]
            ^ tables[2][(registers >> 16) & 0xFF] ^ tables[3][registers >> 24])


def _advance_piece(data):
    """The raw register, started at 0, after `data`: numpy uint8 of a power-of-two size,
    at least `_SMALL` bytes."""
    lanes = min(_LANES, data.size // _MIN_LANE_BYTES)
    # (bytes per lane / 2, lanes): one row of two-byte words per step.
    words = data.reshape(lanes, -1).view("<u2").T.copy()
    registers = np.zeros(lanes, np.uint32)
    low = registers.view(np.uint16)[::2]  # each register's low 16 bits (little-endian)
    index = np.empty(lanes, np.uint16)
    step = np.empty(lanes, np.uint32)
    for row in words:
        np.bitwise_xor(low, row, out=index)
        np.take(_TABLE16, index, out=step)
        registers >>= 16
        registers ^= step
    log2_length = (2 * words.shape[0]).bit_length() - 1
    while registers.size > 1:  # pairwise: (a, b) -> shift(a, len(b)) ^ b
        registers = _shift(registers[0::2], log2_length) ^ registers[1::2]
        log2_length += 1
    return int(registers[0])


def crc32c_update(crc, data):
    """CRC-32C of the bytes so far (`crc`) followed by `data` (bytes-like).

    `data` is taken in pieces of power-of-two sizes (at most `_PIECE_BYTES`), so every
    combination shifts by a power of two: a few cached tables serve every length."""
    data = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    register, pos = crc ^ _UINT32, 0
    while data.size - pos >= _SMALL:
        log2_size = min(data.size - pos, _PIECE_BYTES).bit_length() - 1
        piece = _advance_piece(data[pos:pos + (1 << log2_size)])
        register = int(_shift(np.array([register], np.uint32), log2_size)[0]) ^ piece
        pos += 1 << log2_size
    return _advance_bytes(register, data[pos:].tobytes()) ^ _UINT32


def crc32c(data):
    """CRC-32C of `data` (bytes-like)."""
    return crc32c_update(0, data)


def mask(crc):
    """LevelDB's masked CRC (what TensorFlow stores): rotate right 15, add a constant."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _UINT32


def unmask(masked):
    """The CRC a masked one was made from."""
    rotated = (masked - _MASK_DELTA) & _UINT32
    return ((rotated >> 17) | (rotated << 15)) & _UINT32
