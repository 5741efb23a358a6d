"""Our `vocabulary` features, counted by one analyzer for all of them, give what one stock
`tft.vocabulary` per column gives: the same files, token for token and in order, and the same ids."""

from __future__ import annotations

import numpy as np

from asynctrain.components.transform import preprocessing, vocabularies
from asynctrain.testing import wide_vocabulary_table as table


def test_one_analyzer_for_all_columns_gives_the_stock_vocabularies_and_ids(tmp_path, monkeypatch):
    columns = 6
    # Six columns keep the test short; the shared analyzer takes over from 16 in a real config.
    monkeypatch.setattr(preprocessing, 'SHARED_VOCABULARIES_FROM', columns)
    rows = table.generate_rows(rows=400, columns=columns, seed=3)
    config = table.feature_config(columns)
    schema = table.schema(columns)

    ours = table.analyze_and_transform(
        rows, schema, preprocessing.build_preprocessing_fn(config), str(tmp_path / 'ours')
    )
    stock = table.analyze_and_transform(
        rows, schema, table.stock_preprocessing_fn(config), str(tmp_path / 'stock')
    )

    names = table.column_names(columns)
    assert sorted(ours.vocabularies) == sorted(stock.vocabularies) == names
    assert ours.vocabularies == stock.vocabularies
    for name in names:
        codes = [row[name] for row in rows]
        counts = {str(c).encode(): codes.count(c) for c in set(codes)}
        vocabulary = ours.vocabularies[name]
        # Every code, most frequent first, ties by the code's text, largest first.
        assert vocabulary == sorted(counts, key=lambda t: (counts[t], t), reverse=True)
        np.testing.assert_array_equal(ours.transformed[name], stock.transformed[name])
        np.testing.assert_array_equal(
            ours.transformed[name], [vocabulary.index(str(c).encode()) for c in codes]
        )
    # Ties occur, so their order is tested too.
    first = [row[names[0]] for row in rows]
    assert len({first.count(c) for c in set(first)}) < len(set(first))
    np.testing.assert_array_equal(ours.transformed[table.LABEL], [row[table.LABEL] for row in rows])


def test_top_k_keeps_the_most_frequent_values_and_an_empty_feature_gets_the_dummy_token():
    counts = {(0, b'a'): 3, (0, b'b'): 5, (0, b'c'): 3, (0, b'd'): 1, (2, b'x'): 2}

    assert vocabularies.ordered_vocabularies(counts, [3, 10, 10]) == [
        [b'b', b'c', b'a'],
        [vocabularies.EMPTY_VOCABULARY_TOKEN],
        [b'x'],
    ]
    assert vocabularies.merge_counts([{(0, b'a'): 1}, {(0, b'a'): 2, (1, b'a'): 1}]) == {
        (0, b'a'): 3,
        (1, b'a'): 1,
    }
