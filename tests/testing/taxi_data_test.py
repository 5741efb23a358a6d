"""`generate_csv`: rows of the bundled taxi sample, drawn with replacement, the same bytes per seed."""

from asynctrain.testing import taxi_data


def test_generated_rows_are_the_sample_rows_under_its_header(tmp_path):
    with open(taxi_data.taxi_csv_path(), 'rb') as f:
        header = f.readline()
        sample_rows = {line.rstrip(b'\n') for line in f if line.strip()}

    size = taxi_data.generate_csv(250, str(tmp_path / 'data' / 'data.csv'), seed=3)

    written = (tmp_path / 'data' / 'data.csv').read_bytes()
    assert size == len(written)
    lines = written.splitlines()
    assert lines[0] + b'\n' == header
    assert len(lines) == 251
    assert set(lines[1:]) <= sample_rows
    assert len(set(lines[1:])) > 200  # drawn across the sample's 15,002 rows, not a few repeated


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_rows(tmp_path):
    paths = [str(tmp_path / name) for name in ('a.csv', 'b.csv', 'c.csv')]

    for path, seed in zip(paths, (0, 0, 1)):
        taxi_data.generate_csv(100, path, seed=seed)

    first, again, other = (open(path, 'rb').read() for path in paths)
    assert first == again
    assert first != other
