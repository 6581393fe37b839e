"""The server answers in the data's own labels for a model whose library fits only on 0..K-1
(XGBoost trained by ``train`` on a yes/no column)."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pandas as pd

from onnxbridge import convert_bundle, train_bundle


def test_xgboost_on_a_yes_no_column_is_served_with_its_labels(start_server, tmp_path: Path) -> None:
    rng = np.random.RandomState(0)
    X = rng.rand(200, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["churn"] = np.where(X[:, 0] - 0.6 * X[:, 1] > 0, "yes", "no")
    data = tmp_path / "churn.csv"
    frame.to_csv(data, index=False)
    bundle, result = train_bundle(
        str(data), "XGBClassifier(n_estimators=8, max_depth=3)", tmp_path / "churn", target="churn"
    )
    convert_bundle(bundle)
    server = start_server(bundle.path)

    rows = result.X_test.to_numpy(dtype=np.float32)
    body = {
        "inputs": [
            {
                "name": "input",
                "datatype": "FP32",
                "shape": list(rows.shape),
                "data": rows.ravel().tolist(),
            }
        ]
    }
    response = httpx.post(f"{server.url}/v2/models/churn/infer", json=body, timeout=60)
    assert response.status_code == 200, response.text
    outputs = {o["name"]: o for o in response.json()["outputs"]}
    assert outputs["label"]["datatype"] == "BYTES"
    assert outputs["label"]["data"] == result.estimator.predict(result.X_test).tolist()
    probabilities = np.asarray(outputs["probabilities"]["data"]).reshape(len(rows), 2)
    np.testing.assert_allclose(
        probabilities, result.estimator.predict_proba(result.X_test), atol=1e-5, rtol=0
    )
