"""Write the small data files the README tour and the docs use, into this folder.

    python examples/data/make_data.py

- ``iris.csv``: scikit-learn's Iris table with short column names and the species as text;
- ``new_flowers.csv``: four flowers to predict, without the species;
- ``customers.csv``: 300 made-up customers with numbers, integers, text, booleans and missing
  values, and whether each left (``churn``);
- ``flowers/``: three days of flowers to score (two Parquet files and one CSV file of 2 000 rows,
  with a ``flower_id`` key column, in the built-in Iris dataset's column names); row 1234 of
  ``day-3.csv`` has ``1.2cm`` where a number belongs.

The same files come out on every run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_iris

HERE = Path(__file__).resolve().parent
DAY_ROWS = 2000


def iris() -> pd.DataFrame:
    data = load_iris(as_frame=True)
    frame = data.data.copy()
    frame.columns = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    frame["species"] = data.target_names[data.target]
    return frame


def new_flowers() -> pd.DataFrame:
    rows = [(5.1, 3.5, 1.4, 0.2), (5.0, 2.0, 3.5, 1.0), (6.9, 3.2, 5.7, 2.3), (6.7, 3.1, 5.6, 2.4)]
    columns = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    return pd.DataFrame(rows, columns=columns)


def customers() -> pd.DataFrame:
    rng = np.random.RandomState(7)
    n = 300
    age = rng.uniform(18, 80, n).round(1)
    rooms = rng.randint(1, 7, n)
    city = rng.choice(["Lyon", "Paris", "Nantes", "Lille"], n)
    garden = rng.rand(n) > 0.5
    income = rng.lognormal(10.5, 0.4, n).round(-1)
    score = 0.04 * (45 - age) + 0.5 * (city == "Paris") - 0.6 * garden - 2e-5 * (income - 36000)
    churn = np.where(score + rng.normal(0, 0.4, n) > 0, "yes", "no")
    frame = pd.DataFrame(
        {
            "age years": age,
            "rooms": rooms,
            "city": city,
            "has_garden": garden,
            "income": income,
            "churn": churn,
        }
    )
    frame.loc[rng.rand(n) < 0.05, "age years"] = np.nan
    frame.loc[rng.rand(n) < 0.05, "city"] = None
    frame.loc[rng.rand(n) < 0.05, "income"] = np.nan
    return frame


def day(number: int) -> pd.DataFrame:
    data = load_iris(as_frame=True).data
    rng = np.random.RandomState(number)
    picked = data.iloc[rng.randint(0, len(data), DAY_ROWS)].to_numpy()
    jitter = rng.normal(0, 0.1, picked.shape)
    frame = pd.DataFrame((picked + jitter).clip(0.1).round(1), columns=data.columns)
    frame.insert(0, "flower_id", np.arange(DAY_ROWS) + number * 100_000)
    return frame


def write(folder: Path = HERE) -> None:
    """Write every file into `folder`."""
    iris().to_csv(folder / "iris.csv", index=False)
    new_flowers().to_csv(folder / "new_flowers.csv", index=False)
    customers().to_csv(folder / "customers.csv", index=False)
    flowers = folder / "flowers"
    flowers.mkdir(exist_ok=True)
    day(1).to_parquet(flowers / "day-1.parquet", index=False)
    day(2).to_parquet(flowers / "day-2.parquet", index=False)
    third = day(3).astype({"petal width (cm)": object})
    third.loc[1233, "petal width (cm)"] = "1.2cm"  # row 1234, counting from 1
    third.to_csv(flowers / "day-3.csv", index=False)


if __name__ == "__main__":
    write()
