"""Writes serialized examples as GZIP TFRecord files without TensorFlow and without a Python
loop per byte.

A TFRecord is: length (uint64 LE), masked CRC32C of the length, data, masked CRC32C of the data.
`example_encoder` reserves the 12 header and 4 footer bytes around every example, so framing
fills them in place; the length CRCs are computed for all rows at once with a numpy table, the
data CRCs with google-crc32c's C implementation. Keeping TensorFlow out of this path keeps Beam
workers light to start.
"""

import zlib
from collections.abc import Sequence

import google_crc32c
import numpy as np

from asynctrain.components.example_gen.example_encoder import EncodedExamples

HEADER_BYTES = 12
FOOTER_BYTES = 4
_MASK_DELTA = 0xA282EAD8
# zlib level 1: about 3x faster than the default 6 on example data, files about 25% larger;
# readers do not care. Compression is the largest single cost of writing examples.
DEFAULT_COMPRESSION_LEVEL = 1


def _crc32c_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1)
    return table.astype(np.uint32)


_TABLE = _crc32c_table()


def _mask(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def masked_crc32c_of_lengths(lengths: np.ndarray) -> np.ndarray:
    """Masked CRC32C of each length's 8 little-endian bytes, all rows at once."""
    as_bytes = lengths.astype('<u8').view(np.uint8).reshape(-1, 8)
    crc = np.full(len(lengths), 0xFFFFFFFF, np.uint32)
    for j in range(8):
        crc = _TABLE[(crc ^ as_bytes[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return _mask(crc ^ np.uint32(0xFFFFFFFF))


def frame(encoded: EncodedExamples, data_crcs: Sequence[int]) -> None:
    """Fills the reserved header and footer bytes of every example in place.

    Args:
      encoded: Examples encoded with prefix=HEADER_BYTES and suffix=FOOTER_BYTES.
      data_crcs: Unmasked CRC32C of each example's bytes.
    """
    if not len(encoded.starts):
        return
    lengths = (encoded.ends - encoded.starts).astype(np.uint64)
    header = np.empty((len(lengths), HEADER_BYTES), np.uint8)
    header[:, :8] = lengths.astype('<u8').view(np.uint8).reshape(-1, 8)
    header[:, 8:] = masked_crc32c_of_lengths(lengths).astype('<u4').view(np.uint8).reshape(-1, 4)
    buffer = encoded.buffer
    buffer[(encoded.starts - HEADER_BYTES)[:, None] + np.arange(HEADER_BYTES)] = header
    footer = _mask(np.asarray(data_crcs, np.uint64)).astype('<u4').view(np.uint8).reshape(-1, 4)
    buffer[encoded.ends[:, None] + np.arange(FOOTER_BYTES)] = footer


def crc32c_each(data: bytes, starts: np.ndarray, ends: np.ndarray) -> list[int]:
    """Unmasked CRC32C of each `data[start:end]`."""
    value = google_crc32c.value
    return [value(data[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]


def select_records(encoded: EncodedExamples, keep: np.ndarray) -> bytes:
    """The framed records of the rows where `keep` is True, in row order, as one buffer."""
    if keep.all():
        return encoded.buffer.tobytes()
    record_sizes = (encoded.ends - encoded.starts) + HEADER_BYTES + FOOTER_BYTES
    return encoded.buffer[np.repeat(keep, record_sizes)].tobytes()


def gzip_bytes(records: bytes, level: int = DEFAULT_COMPRESSION_LEVEL) -> bytes:
    """Compresses framed records into one gzip member, as TFRecord GZIP readers expect."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    return compressor.compress(records) + compressor.flush()
