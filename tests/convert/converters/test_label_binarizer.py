"""LabelBinarizer: a label column (numbers or text) to indicator columns, unseen labels
included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.preprocessing import LabelBinarizer

from onnxbridge import ConversionError, Predictor, convert_estimator

RNG = np.random.RandomState(0)


def _predict(model, sample: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    result = convert_estimator(model, sample)
    return Predictor(result.model.SerializeToString()).predict(rows).transformed


def test_text_labels_seen_and_unseen() -> None:
    labels = RNG.choice(["cat", "dog", "fish"], 80)
    model = LabelBinarizer().fit(labels)
    rows = np.array(["dog", "bird", "eel", "fish", "cat", "dog"], dtype=object)
    got = _predict(model, pd.DataFrame({"animal": labels[:20]}), pd.DataFrame({"animal": rows}))
    # scikit-learn gives a label it never saw ("bird", "eel") neg_label in every column.
    np.testing.assert_array_equal(got, model.transform(rows))
    assert (got[[1, 2]] == 0).all() and got.shape == (6, 3)


@pytest.mark.parametrize(("neg", "pos"), [(0, 1), (-1, 2)])
def test_binary_numbers_give_one_column(neg: int, pos: int) -> None:
    labels = RNG.choice([3, 7], 50)
    model = LabelBinarizer(neg_label=neg, pos_label=pos).fit(labels)
    rows = np.array([3, 7, 7, 3, 3], dtype=np.float64)
    got = _predict(model, pd.DataFrame({"y": labels[:20]}), pd.DataFrame({"y": rows}))
    assert got.shape == (5, 1)
    np.testing.assert_array_equal(got.ravel(), model.transform(rows.astype(int)).ravel())


def test_multilabel_binarizer_fit_on_a_matrix_is_refused() -> None:
    model = LabelBinarizer().fit(np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]]))
    with pytest.raises(ConversionError, match="LabelBinarizer fitted on a multilabel-indicator"):
        convert_estimator(model, np.array([[1.0, 0.0, 1.0]]))
