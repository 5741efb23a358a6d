"""What a TFJob replica pays to read its examples from the store, two ways, side by side.

On the TFX 1.16 line TensorFlow streams `s3://` through tensorflow-io; on the 1.21 line it cannot,
and a replica pulls the folder through boto3 first (`object_store.Mirror`) and reads its local
copy. This runs both on the same records, on the 1.16 line (the only one with tensorflow-io),
against moto's S3 server on 127.0.0.1, and checks that both read the same records:

    TF_USE_LEGACY_KERAS=1 .venv/bin/python -m tools.store_read_cost --mib 200 --files 8
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time

from asynctrain.components.shared import object_store, tf_environment
from asynctrain.testing.object_store import s3_endpoint


def _write_records(folder: str, files: int, mib: int) -> int:
    """`files` TFRecord files of about `mib` MiB in all, of 4 KiB random records; returns how many."""
    import tensorflow as tf

    per_file = mib * 1024 // 4 // files
    for index in range(files):
        with tf.io.TFRecordWriter(os.path.join(folder, f'part-{index:05d}.tfrecord')) as writer:
            for _ in range(per_file):
                writer.write(os.urandom(4096))
    return per_file * files


def _read_all(pattern: str) -> tuple[int, str]:
    """(records, digest of their sorted hashes) of every record the files matching `pattern` hold."""
    import tensorflow as tf

    files = tf.io.gfile.glob(pattern)
    digests = sorted(
        hashlib.sha1(record.numpy()).hexdigest()
        for record in tf.data.TFRecordDataset(files, num_parallel_reads=len(files))
    )
    return len(digests), hashlib.sha1(''.join(digests).encode()).hexdigest()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--mib', type=int, default=200)
    parser.add_argument('--files', type=int, default=8)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, s3_endpoint() as store:
        os.environ.update(store.environment())
        local = os.path.join(tmp, 'records')
        os.makedirs(local)
        written = _write_records(local, args.files, args.mib)
        bucket = store.new_bucket()
        uri = f's3://{bucket}/examples'
        store.upload_dir(local, uri)

        start = time.monotonic()
        tf_environment.register_filesystems([uri])
        streamed = _read_all(uri + '/*.tfrecord')
        streaming_s = time.monotonic() - start

        start = time.monotonic()
        mirror = object_store.Mirror(root=os.path.join(tmp, 'mirror'))
        pulled_dir = mirror.pull(uri)
        pull_s = time.monotonic() - start
        copied = _read_all(pulled_dir + '/*.tfrecord')
        pulled_s = time.monotonic() - start

    if not (streamed == copied and streamed[0] == written):
        print(f'disagree: wrote {written}, streamed {streamed}, pulled {copied}', file=sys.stderr)
        return 1
    print(f'{written:,} records, {args.mib} MiB in {args.files} files; both read the same records')
    print('| way | seconds | of which pulling |')
    print('|---|---|---|')
    print(f'| tensorflow-io streams s3:// (1.16) | {streaming_s:.2f} | |')
    print(f'| boto3 pulls, TensorFlow reads the copy (1.21) | {pulled_s:.2f} | {pull_s:.2f} |')
    print(f'ratio pulled/streamed: {pulled_s / streaming_s:.2f}')
    return 0


if __name__ == '__main__':
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))  # Past tensorflow-io's abort at exit.
