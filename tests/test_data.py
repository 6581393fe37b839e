"""Datasets, files, schema inference and splits."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from onnxbridge.data import (
    BUILTIN_DATASETS,
    FeatureSchema,
    hash_frame,
    load_dataset,
    read_table,
    split_dataset,
    write_table,
)
from onnxbridge.errors import DataError, OnnxbridgeError


@pytest.mark.parametrize("name", BUILTIN_DATASETS)
def test_builtin_datasets_load_with_a_schema(name: str) -> None:
    ds = load_dataset(name)
    assert len(ds.X) == len(ds.y) > 100
    assert ds.schema.n_features == ds.X.shape[1]
    assert ds.schema.all_numeric
    assert ds.source["kind"] == "builtin" and ds.source["name"] == name
    assert len(ds.source["sha256"]) == 64


def test_builtin_hash_is_stable_and_content_sensitive() -> None:
    a, b = load_dataset("iris"), load_dataset("iris")
    assert a.source["sha256"] == b.source["sha256"]
    changed = a.X.copy()
    changed.iloc[0, 0] += 0.1
    assert hash_frame(changed) != hash_frame(a.X)


def test_csv_file_with_target(regression_csv: Path) -> None:
    ds = load_dataset(str(regression_csv), target="price")
    assert ds.y.name == "price"
    assert "price" not in ds.X.columns
    assert ds.schema.names == ["size_m2", "rooms", "age years", "has_garden"]
    assert [f.dtype for f in ds.schema.features] == ["float64", "int64", "float64", "bool"]
    assert ds.source["kind"] == "file" and ds.source["format"] == "csv"


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".tsv"])
def test_other_formats_round_trip(tmp_path: Path, suffix: str) -> None:
    frame = pd.DataFrame({"a": [1.5, 2.5], "b": [3, 4], "y": [0, 1]})
    path = tmp_path / f"t{suffix}"
    write_table(frame, path)
    back = read_table(path)
    assert list(back.columns) == ["a", "b", "y"]
    assert back["a"].tolist() == [1.5, 2.5]


def test_schema_round_trips_through_json() -> None:
    schema = FeatureSchema.from_frame(pd.DataFrame({"x": [1.0], "n": [1]}))
    assert FeatureSchema.from_list(schema.to_list()) == schema


def test_split_matches_reference_workflow() -> None:
    X_train, X_test, _, _ = split_dataset(load_dataset("iris"), test_size=0.3, seed=42)
    assert (len(X_train), len(X_test)) == (105, 45)


def test_unknown_dataset_names_the_builtins() -> None:
    with pytest.raises(DataError, match=r"data='irs' is not a built-in dataset.*iris") as info:
        load_dataset("irs")
    assert isinstance(info.value, OnnxbridgeError) and isinstance(info.value, ValueError)


def test_missing_file() -> None:
    with pytest.raises(DataError, match=r"does not exist"):
        load_dataset("nowhere/data.csv", target="y")


def test_a_folder_is_named_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "rows.csv"
    folder.mkdir()
    for call in (lambda: load_dataset(str(folder), target="y"), lambda: read_table(folder)):
        with pytest.raises(DataError, match=r"rows\.csv' is a folder, not a data file; pass one"):
            call()


def test_a_symlinked_file_is_recorded_by_its_own_name(regression_csv: Path, tmp_path: Path) -> None:
    link = tmp_path / "latest.csv"
    link.symlink_to(regression_csv)
    dataset = load_dataset(str(link), target="price")
    assert dataset.source["path"] == str(link)
    assert dataset.source["sha256"] == load_dataset(str(regression_csv), "price").source["sha256"]


def test_file_needs_target(regression_csv: Path) -> None:
    with pytest.raises(DataError, match=r"name its target column: target=COLUMN.*price"):
        load_dataset(str(regression_csv))


def test_unknown_target_column_lists_columns(regression_csv: Path) -> None:
    with pytest.raises(DataError, match=r"target='cost' is not a column of .*size_m2"):
        load_dataset(str(regression_csv), target="cost")


def test_target_on_builtin_is_refused() -> None:
    with pytest.raises(DataError, match=r"does not apply to the built-in dataset"):
        load_dataset("iris", target="species")


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "data.xlsx"
    path.write_text("x")
    with pytest.raises(DataError, match=r"unknown file type '.xlsx'"):
        read_table(path)


@pytest.mark.parametrize(("suffix", "sep"), [(".csv", ","), (".tsv", "\t")])
def test_a_header_naming_a_column_twice_is_refused(tmp_path: Path, suffix: str, sep: str) -> None:
    # pandas would rename the second 'a' to 'a.1' and a model would take the wrong column.
    path = tmp_path / f"dup{suffix}"
    path.write_text(sep.join(["a", "b", "a"]) + "\n" + sep.join(["1", "2", "3"]) + "\n")
    with pytest.raises(DataError, match=r"names the column 'a' more than once"):
        read_table(path)
    path.write_text(sep.join(["a", "b", "a.1"]) + "\n" + sep.join(["1", "2", "3"]) + "\n")
    assert list(read_table(path).columns) == ["a", "b", "a.1"]
    # After blank lines (pandas skips them), and not for columns without a name.
    path.write_text("\n\n" + sep.join(["a", "a"]) + "\n" + sep.join(["1", "2"]) + "\n")
    with pytest.raises(DataError, match=r"names the column 'a' more than once"):
        read_table(path)
    path.write_text(sep.join(["x", "", ""]) + "\n" + sep.join(["1", "2", "3"]) + "\n")
    assert list(read_table(path).columns) == ["x", "Unnamed: 1", "Unnamed: 2"]


def test_corrupt_parquet(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_text("this is not parquet")
    with pytest.raises(DataError, match=r"cannot read .* as parquet"):
        read_table(path)


def test_target_with_missing_values(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,y\n1,0\n2,\n3,1\n")
    with pytest.raises(DataError, match=r"target column 'y' has 1 missing values"):
        load_dataset(str(path), target="y")


def test_bad_test_size() -> None:
    with pytest.raises(
        DataError, match=r"test_size=1.5 is not allowed; it must be between 0 and 1"
    ):
        split_dataset(load_dataset("iris"), test_size=1.5)
