"""TargetEncoder: multiclass (refused by skl2onnx), binary and continuous targets, text
columns, unknown categories and NaN as a category."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.preprocessing import TargetEncoder

RNG = np.random.RandomState(5)
CODES = np.column_stack([RNG.randint(0, 5, 240), RNG.randint(0, 4, 240)]).astype(np.float64)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("target", ["multiclass", "binary", "continuous"])
def test_target_types(assert_converts, target: str, precision: str) -> None:
    noise = RNG.randint(0, 3, 240)
    y = {
        "multiclass": np.array(["a", "b", "c", "d"])[(CODES[:, 0].astype(int) + noise) % 4],
        "binary": (CODES[:, 0] + noise > 4).astype(int),
        "continuous": CODES[:, 0] * 2.5 + noise,
    }[target]
    model = TargetEncoder().fit(CODES, y)
    # Unknown categories (7, 9) take the target mean.
    rows = np.vstack([CODES, [[7.0, 1.0], [2.0, 9.0]]])
    got = assert_converts(model, rows, precision)
    per = 4 if target == "multiclass" else 1
    assert got["transformed"].shape == (len(rows), 2 * per)


def test_text_columns_with_unknown_and_missing_categories(assert_converts) -> None:
    colours = RNG.choice(["red", "green", "blue"], 240)
    sizes = RNG.choice(["S", "M", "L", "XL"], 240)
    y = (colours == "red").astype(int) + (sizes == "XL").astype(int)
    frame = pd.DataFrame({"colour": colours, "size": sizes})
    model = TargetEncoder().fit(frame, y)
    rows = pd.concat(
        [frame.head(30), pd.DataFrame({"colour": ["purple"], "size": ["M"]})], ignore_index=True
    )
    got = assert_converts(model, rows, "double")
    assert got["transformed"].shape == (31, 6)


def test_nan_learnt_as_a_category(assert_converts) -> None:
    codes = CODES.copy()
    codes[::7, 1] = np.nan
    y = (np.nan_to_num(codes[:, 1], nan=5.0) > 2).astype(int)
    model = TargetEncoder().fit(codes, y)
    assert np.isnan(model.categories_[1][-1])
    assert_converts(model, codes, "double")


def test_in_a_column_transformer_on_a_mixed_frame(assert_converts) -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import KBinsDiscretizer

    rng = np.random.RandomState(0)
    frame = pd.DataFrame(
        {
            "city": rng.choice(["paris", "rome", "oslo", "lima"], 200),
            "x": rng.rand(200),
            "n": rng.randint(0, 50, 200),
        }
    )
    codes = frame.city.map({"paris": 0, "rome": 1, "oslo": 2, "lima": 0}) + (frame.x > 0.7)
    y = np.array(["a", "b", "c"])[codes % 3]
    encode = ColumnTransformer(
        [
            ("target", TargetEncoder(), ["city"]),
            ("bins", KBinsDiscretizer(n_bins=4, quantile_method="linear"), ["x", "n"]),
        ]
    )
    model = make_pipeline(encode, LogisticRegression()).fit(frame, y)
    got = assert_converts(model, frame, "float")
    assert got["probabilities"].shape == (200, 3)
