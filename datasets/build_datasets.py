"""Writes the CSVs under datasets/*/data/ from the public copies bundled in four PyPI packages.

Provenance, not part of the pipeline: the committed CSVs are what this wrote, and rerunning it
rewrites them byte for byte (the gzipped one too: no name or time in its gzip header). It needs
`palmerpenguins`, `scikit-learn`, `vega_datasets` and `plotnine`, which are not dependencies of
asynctrain; run it from a throwaway environment:

    python3.10 -m venv /tmp/dsvenv
    /tmp/dsvenv/bin/pip install palmerpenguins==0.1.6 scikit-learn==1.7.2 vega_datasets==0.9.0 \
        plotnine==0.15.9
    /tmp/dsvenv/bin/python datasets/build_datasets.py
"""

from __future__ import annotations

import csv
import gzip
import importlib.resources
import io
import pathlib

DATASETS = pathlib.Path(__file__).resolve().parent

# Penguins whose Species is blanked to show rows with a missing label, keyed by (studyName,
# Sample Number, Individual ID), which together name one row: four get the `NA` marker the raw
# data uses for missing cells, one an empty cell.
PENGUINS_WITHOUT_LABEL = {
    ('PAL0708', '10', 'N5A2'): 'NA',
    ('PAL0809', '59', 'N25A1'): 'NA',
    ('PAL0708', '5', 'N64A1'): 'NA',
    ('PAL0910', '97', 'N20A1'): 'NA',
    ('PAL0809', '30', 'N62A2'): '',
}
# The first ten WDBC columns, the means over each image's cell nuclei, keep the file small.
BREAST_CANCER_COLUMNS = 10


def _write(path: pathlib.Path, header: list[str], rows: list[list[str]]) -> None:
    """A CSV file; gzipped when `path` ends in `.gz` (mtime 0 and no file name in the header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline='')
    writer = csv.writer(text, lineterminator='\n')
    writer.writerow(header)
    writer.writerows(rows)
    data = text.getvalue().encode('utf-8')
    if path.suffix == '.gz':
        data = gzip.compress(data, compresslevel=9, mtime=0)
    path.write_bytes(data)


def _number(value: float) -> str:
    """The shortest text that reads back as the same float; integral values keep no `.0`."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def penguins() -> int:
    """Palmer penguins, raw (all 17 columns, `NA` cells), with five labels blanked."""
    source = importlib.resources.files('palmerpenguins') / 'data' / 'penguins-raw.csv'
    with source.open(newline='', encoding='utf-8') as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    key = [header.index(name) for name in ('studyName', 'Sample Number', 'Individual ID')]
    species = header.index('Species')
    blanked = set()
    for row in rows:
        row_key = tuple(row[i] for i in key)
        if row_key in PENGUINS_WITHOUT_LABEL:
            if row_key in blanked:
                raise ValueError(f'penguins-raw.csv: two rows are {row_key}')
            row[species] = PENGUINS_WITHOUT_LABEL[row_key]
            blanked.add(row_key)
    missing = sorted(set(PENGUINS_WITHOUT_LABEL) - blanked)
    if missing:
        raise ValueError(f'penguins-raw.csv: no row {missing}')
    _write(DATASETS / 'penguins' / 'data' / 'penguins_raw.csv', header, rows)
    return len(rows)


def diabetes() -> int:
    """Efron et al.'s diabetes data, unscaled, with the disease progression as the last column."""
    from sklearn.datasets import load_diabetes

    data = load_diabetes(scaled=False)
    header = [*data.feature_names, 'disease_progression']
    rows = [
        [*(_number(v) for v in features), _number(target)]
        for features, target in zip(data.data, data.target)
    ]
    _write(DATASETS / 'diabetes' / 'data' / 'diabetes.csv', header, rows)
    return len(rows)


def breast_cancer() -> int:
    """Wisconsin diagnostic breast cancer: ten mean measurements and `diagnosis` as a word."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    names = [str(n) for n in data.feature_names[:BREAST_CANCER_COLUMNS]]
    header = [*names, 'diagnosis']
    rows = [
        [*(_number(v) for v in features[:BREAST_CANCER_COLUMNS]), str(data.target_names[target])]
        for features, target in zip(data.data, data.target)
    ]
    _write(DATASETS / 'breast_cancer' / 'data' / 'breast_cancer.csv', header, rows)
    return len(rows)


def seattle_weather() -> int:
    """Seattle's daily weather 2012-2015 as vega_datasets ships it: `date` as YYYY/MM/DD."""
    source = importlib.resources.files('vega_datasets') / '_data' / 'seattle-weather.csv'
    with source.open(newline='', encoding='utf-8') as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    _write(DATASETS / 'seattle_weather' / 'data' / 'seattle_weather.csv', header, rows)
    return len(rows)


def wine() -> int:
    """Forina's wines: 13 chemical measurements and the cultivar, as one gzipped CSV."""
    from sklearn.datasets import load_wine

    data = load_wine()
    header = [*data.feature_names, 'cultivar']
    rows = [
        [*(_number(v) for v in features), str(data.target_names[target])]
        for features, target in zip(data.data, data.target)
    ]
    _write(DATASETS / 'wine' / 'data' / 'wine.csv.gz', header, rows)
    return len(rows)


def _plotnine_file(name: str) -> bytes:
    """A CSV as `plotnine` ships it (ggplot2's data, written by R: `NA` for a missing cell)."""
    return (importlib.resources.files('plotnine') / 'data' / name).read_bytes()


def txhousing() -> int:
    """Texas housing sales by city and month, as plotnine ships it: sorted by city, `NA` cells."""
    data = _plotnine_file('txhousing.csv')
    (DATASETS / 'txhousing' / 'data' / 'txhousing.csv').write_bytes(data)
    return data.count(b'\n') - 1


def diamonds() -> int:
    """53,940 diamonds' prices and characteristics, as plotnine ships them (sorted by price),
    gzipped (mtime 0, no file name) to keep the repository small."""
    data = _plotnine_file('diamonds.csv')
    path = DATASETS / 'diamonds' / 'data' / 'diamonds.csv.gz'
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return data.count(b'\n') - 1


if __name__ == '__main__':
    for build in (penguins, diabetes, breast_cancer, seattle_weather, wine, txhousing, diamonds):
        print(f'{build.__name__}: {build()} rows')
