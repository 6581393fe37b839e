"""serve runs the session settings `onnxbridge tune` stored in the model, by batch size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from onnxbridge import Bundle
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from onnxbridge.serve._model import ServedModel
from tuning_support import store_spec

LATENCY = SessionSettings(intra_op_num_threads=1, allow_spinning=True)
THROUGHPUT = SessionSettings(intra_op_num_threads=2, allow_spinning=False)


def _threads(session) -> int:
    return session.get_session_options().intra_op_num_threads


def test_infer_uses_the_tuned_session_of_its_batch_size(iris_bundle: Bundle) -> None:
    path: Path = iris_bundle.onnx_path
    store_spec(path, TuningSpec(latency=LATENCY, throughput=THROUGHPUT, latency_max_rows=4))

    served = ServedModel("iris", "1", path, {})
    assert served.predictor.settings_for(1) == LATENCY
    X = np.random.RandomState(0).uniform(0, 8, size=(10, 4)).astype(np.float32)
    small = served.run(["label"], {"input": X[:2]})
    assert len(small[0]) == 2
    # Only the latency session exists until a large batch arrives; then the throughput one.
    assert _threads(served.predictor.session_for(2)) == 1
    large = served.run(["label", "probabilities"], {"input": X})
    assert large[1].shape == (10, 3)
    throughput = served.predictor.session_for(10)
    assert throughput is not served.predictor.session_for(2)
    assert _threads(throughput) == THROUGHPUT.clamped().intra_op_num_threads
    np.testing.assert_array_equal(large[0][:2], small[0])
