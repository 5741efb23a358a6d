"""Compressed CSV input: which files are compressed, and how to read one as a stream of its text.

A file is compressed when its name ends as Beam's `CompressionTypes.detect_compression_type` says
(`.gz`, `.bz2`, `.deflate`, `.zst`/`.zstd`, `.xz`/`.lzma`; stock CsvExampleGen reads the same
through Beam's text source). ExampleGen opens it with Beam's `FileSystems` (any file system);
`asynctrain init`, which imports no Beam for plain files, opens a local one here.

Such a file has no index: reading from an offset means decompressing everything before it. So a
compressed file is never cut into byte ranges read by several workers, as a plain file is: one
worker reads it from start to end, converting it chunk by chunk as it goes (memory stays that of
one chunk). Its rows' line numbers are lines of the decompressed text, as `zcat FILE | sed -n Np`
shows them.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
from typing import BinaryIO

# Beam's suffixes (apache_beam/io/filesystem.py, CompressionTypes.detect_compression_type) and
# its names for them; a test holds the two tables equal.
SUFFIXES = {
    '.bz2': 'bzip2',
    '.deflate': 'deflate',
    '.gz': 'gzip',
    '.zst': 'zstd',
    '.zstd': 'zstd',
    '.xz': 'lzma',
    '.lzma': 'lzma',
}
UNCOMPRESSED = 'uncompressed'


def compression_of(path: str) -> str:
    """Beam's name of `path`'s compression, from its suffix: 'gzip', ..., or 'uncompressed'."""
    lowered = path.lower()
    for suffix, name in SUFFIXES.items():
        if lowered.endswith(suffix):
            return name
    return UNCOMPRESSED


def is_compressed(path: str) -> bool:
    return compression_of(path) != UNCOMPRESSED


def open_local(path: str) -> BinaryIO:
    """A local file opened for reading its (decompressed) bytes."""
    kind = compression_of(path)
    if kind == UNCOMPRESSED:
        return open(path, 'rb')
    if kind == 'gzip':
        return gzip.open(path, 'rb')
    if kind == 'bzip2':
        return bz2.open(path, 'rb')
    if kind == 'lzma':
        return lzma.open(path, 'rb')
    # deflate and zstd: Beam's own reader (zstd needs the `zstandard` package, as in Beam).
    from apache_beam.io.filesystem import CompressedFile

    return CompressedFile(open(path, 'rb'), compression_type=kind)
