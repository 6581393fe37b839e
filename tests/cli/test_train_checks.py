"""train reports a split that leaves no rows, or columns the model cannot take, before it looks
at an existing bundle in --out."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import train_bundle
from onnxbridge.errors import DataError


@pytest.fixture()
def taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An existing bundle in the --out the tests below name."""
    out = tmp_path / "taken"
    code, _, err = run(
        capsys, "train", "--data", "iris", "--model", "LogisticRegression()", "--out", out
    )
    assert code == 0, err
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_an_empty_split_is_named_before_the_existing_bundle(
    taken: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(taken)
    code, _, err = run(
        capsys,
        "train",
        "--data",
        "iris",
        "--model",
        "LogisticRegression()",
        "--test-size",
        "0.999",
        "--out",
        taken,
    )
    assert_one_line_error(code, err, r"--test-size 0.999 leaves an empty train or test set")
    assert _files(taken) == before


def test_text_columns_are_named_before_the_existing_bundle(
    taken: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "mixed.csv"
    pd.DataFrame(
        {"size": [1.0, 2.0, 3.0, 4.0] * 5, "city": ["a", "b"] * 10, "y": [0, 1] * 10}
    ).to_csv(data, index=False)
    before = _files(taken)
    code, _, err = run(
        capsys,
        "train",
        "--data",
        data,
        "--target",
        "y",
        "--model",
        "LogisticRegression()",
        "--out",
        taken,
    )
    assert_one_line_error(
        code, err, r"feature columns 'city' are not numeric; pass --preprocess auto"
    )
    assert _files(taken) == before


def test_the_python_api_names_the_argument(taken: Path) -> None:
    with pytest.raises(DataError, match=r"test_size=0.999 leaves an empty train or test set"):
        train_bundle("iris", "LogisticRegression()", taken, test_size=0.999)
