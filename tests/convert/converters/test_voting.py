"""VotingClassifier: soft voting with the default flatten_transform, hard voting, string labels,
dropped estimators and pipelines as voters."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import VotingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

X, Y = make_classification(
    n_samples=120, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=1
)
VOTERS = [
    ("lr", make_pipeline(StandardScaler(), LogisticRegression())),
    ("nb", GaussianNB()),
    ("tree", DecisionTreeClassifier(max_depth=3, random_state=0)),
]


@pytest.mark.parametrize("precision", ["float", "double"])
def test_soft_voting_with_default_flatten_transform(assert_converts, precision: str) -> None:
    model = VotingClassifier(VOTERS, voting="soft").fit(X, Y)
    assert model.flatten_transform is True
    got = assert_converts(model, X, precision)
    assert got["probabilities"].shape == (len(X), 3)


def test_hard_voting_with_weights_and_string_labels(assert_converts) -> None:
    labels = np.array(["cat", "dog", "eel"])[Y]
    model = VotingClassifier(VOTERS, voting="hard", weights=[1, 2, 1]).fit(X, labels)
    got = assert_converts(model, X, "double")
    assert set(got["label"]) <= {"cat", "dog", "eel"}
    # The second output is transform(): one class index per voter.
    assert got["scores"].shape == (len(X), 3)


def test_dropped_voter_is_left_out(assert_converts) -> None:
    voters = [*VOTERS[:2], ("tree", "drop")]
    model = VotingClassifier(voters, voting="soft", weights=[1, 3, 5]).fit(X, Y)
    assert_converts(model, X, "float")
