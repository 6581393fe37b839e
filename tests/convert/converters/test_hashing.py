"""HashingVectorizer: scikit-learn's MurmurHash3 of each token, through ONNX Runtime's own
MurmurHash3; signs, binary, norms, accents and digits, empty documents, a text pipeline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from onnxbridge import ConversionError, Predictor, convert_estimator

WORDS = "Onnx RUNTIME model tree forest été café naïve déjà 2024 x a_b über straße".split()
RNG = np.random.RandomState(1)
DOCS = [" ".join(RNG.choice(WORDS, RNG.randint(1, 10))) + "!" for _ in range(120)]
UNSEEN = ["!?", "x y z", "Brand-new words, never seen: zebra42 ÿes", "onnx onnx onnx tree", "__"]


def _onnx(model, docs: list[str], **kwargs) -> np.ndarray:
    frame = pd.DataFrame({"text": docs})
    result = convert_estimator(model, frame.head(20), **kwargs)
    return Predictor(result.model.SerializeToString()).predict(frame).transformed


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"alternate_sign": False, "norm": None},
        {"binary": True, "norm": "l1"},
        {"lowercase": False, "norm": "l1", "n_features": 2**16},
        {"ngram_range": (1, 3)},
        {"ngram_range": (2, 2), "binary": True, "alternate_sign": False},
    ],
)
def test_like_scikit_learn_on_unseen_documents(params) -> None:
    model = HashingVectorizer(**{"n_features": 256, **params}).fit(DOCS[:100])
    docs = DOCS[100:] + UNSEEN
    got = _onnx(model, docs)
    expected = model.transform(docs).toarray()
    assert got.shape == expected.shape
    # Text input: the counts are exact, the norms float32 arithmetic (as the text vectorizers).
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=1e-6)
    assert (np.sign(got) == np.sign(expected)).all()
    assert (got[len(DOCS) - 100] == 0).all()  # a document without a token


def test_a_text_pipeline_predicts_the_same_labels() -> None:
    labels = np.array([("forest" in d) + ("2024" in d) for d in DOCS])
    model = make_pipeline(
        ColumnTransformer([("words", HashingVectorizer(n_features=128), "text")]),
        LogisticRegression(max_iter=1000),
    ).fit(pd.DataFrame({"text": DOCS[:100]}), labels[:100])
    rows = pd.DataFrame({"text": DOCS[100:] + UNSEEN})
    result = convert_estimator(model, rows.head(5))
    predicted = Predictor(result.model.SerializeToString()).predict(rows)
    np.testing.assert_array_equal(predicted.labels, model.predict(rows))
    np.testing.assert_allclose(predicted.probabilities, model.predict_proba(rows), atol=1e-5)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"stop_words": "english"}, r"stop_words='english'\) cannot be converted.*None"),
        ({"analyzer": "char"}, r"analyzer='char'\) cannot be converted.*'word'"),
        ({"token_pattern": r"\w+"}, r"token_pattern='\\\\w\+'\) cannot be converted"),
    ],
)
def test_settings_the_graph_cannot_follow_are_refused(params, message: str) -> None:
    model = HashingVectorizer(n_features=32, **params).fit(DOCS[:10])
    with pytest.raises(ConversionError, match=message):
        convert_estimator(model, pd.DataFrame({"text": DOCS[:5]}))
