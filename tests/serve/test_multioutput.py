"""A multi-output classifier served: one label and one probability mapping per target on
/predict, one tensor per target output on /infer, bad input refused while serving goes on."""

from __future__ import annotations

import httpx
import numpy as np
import pandas as pd
from sklearn.datasets import make_multilabel_classification
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import MultiOutputClassifier

from onnxbridge import convert_estimator


def test_predict_and_infer_give_every_target(start_server, tmp_path) -> None:
    X, Y = make_multilabel_classification(n_samples=150, n_features=4, n_classes=2, random_state=1)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    targets = np.column_stack(
        [np.where(Y[:, 0] == 1, "spam", "ham"), np.array(["x", "y", "z"])[Y[:, 0] + Y[:, 1]]]
    )
    model = MultiOutputClassifier(LogisticRegression(max_iter=500)).fit(frame[:120], targets[:120])
    convert_estimator(model, frame.head(20)).save(tmp_path / "tags.onnx")
    server = start_server(tmp_path / "tags.onnx")
    rows = frame[120:]

    answer = httpx.post(
        f"{server.url}/v2/models/tags/predict", json=rows.to_dict(orient="records")
    ).json()
    predictions = answer["predictions"]
    expected = model.predict(rows)
    probabilities = model.predict_proba(rows)
    assert [p["label"] for p in predictions] == expected.tolist()
    for i, row in enumerate(predictions):
        assert [list(p) for p in row["probabilities"]] == [["ham", "spam"], ["x", "y", "z"]]
        for t in range(2):
            np.testing.assert_allclose(
                list(row["probabilities"][t].values()), probabilities[t][i], atol=1e-5
            )

    body = {
        "inputs": [
            {
                "name": "input",
                "datatype": "FP32",
                "shape": [len(rows), 4],
                "data": rows.to_numpy(np.float32).ravel().tolist(),
            }
        ]
    }
    infer = httpx.post(f"{server.url}/v2/models/tags/infer", json=body).json()
    outputs = {o["name"]: o for o in infer["outputs"]}
    assert sorted(outputs) == ["label_0", "label_1", "probabilities_0", "probabilities_1"]
    assert outputs["label_1"]["datatype"] == "BYTES"
    assert outputs["label_1"]["data"] == expected[:, 1].tolist()
    assert outputs["probabilities_1"]["shape"] == [len(rows), 3]

    bad = httpx.post(f"{server.url}/v2/models/tags/predict", json=[{"a": 1.0}])
    assert bad.status_code == 422
    assert "missing" in bad.json()["error"] and "'b'" in bad.json()["error"]
    again = httpx.post(f"{server.url}/v2/models/tags/predict", json=rows.head(1).to_dict("records"))
    assert again.status_code == 200
