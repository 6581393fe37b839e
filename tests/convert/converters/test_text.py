"""Text vectorizers get locale='C' wherever they sit in a model, so they load without the
en_US.UTF-8 locale; default options are per class and refuse contradictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import VotingClassifier
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from onnxbridge.convert import _registry as registry
from onnxbridge.convert._registry import default_options, tree_default_options
from onnxbridge.errors import ConverterRegistryError

WORDS = "good bad great awful fine poor nice terrible ok superb".split()


def _reviews() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.RandomState(0)
    text = [" ".join(rng.choice(WORDS, 5)) for _ in range(80)]
    good = {"good", "great", "fine", "nice", "superb"}
    y = np.array([sum(w in good for w in t.split()) >= 3 for t in text]).astype(int)
    return pd.DataFrame({"review": text, "stars": rng.rand(80)}), y


def _locales(model) -> list[str]:
    return [
        a.s.decode()
        for node in model.graph.node
        if node.op_type == "StringNormalizer"
        for a in node.attribute
        if a.name == "locale"
    ]


def test_vectorizers_in_a_column_transformer_get_locale_c(assert_converts) -> None:
    from onnxbridge import convert_estimator

    frame, y = _reviews()
    model = make_pipeline(
        ColumnTransformer(
            [("tfidf", TfidfVectorizer(), "review"), ("count", CountVectorizer(), "review")],
            remainder="passthrough",
        ),
        LogisticRegression(),
    ).fit(frame, y)
    result = convert_estimator(model, frame.head(20), precision="float")
    assert _locales(result.model) == ["C", "C"]
    got = assert_converts(model, frame, "float")
    assert got["probabilities"].shape == (80, 2)


def test_default_options_walk_meta_estimators() -> None:
    vectorizer = CountVectorizer()
    inner = make_pipeline(vectorizer, LogisticRegression())
    model = VotingClassifier([("a", inner)])
    assert default_options(TfidfVectorizer) == {"locale": "C"}
    assert tree_default_options(model) == {id(vectorizer): {"locale": "C"}}


def test_contradicting_default_option_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(registry, "_DEFAULT_OPTIONS", {CountVectorizer: {"locale": "C"}})
    with pytest.raises(ConverterRegistryError, match="'locale' of CountVectorizer is 'C'"):
        registry.register_default_options(CountVectorizer, {"locale": "en_US.UTF-8"})
