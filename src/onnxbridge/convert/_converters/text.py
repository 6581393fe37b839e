"""Text vectorizers (CountVectorizer, TfidfVectorizer): default options, no converter of our own.

skl2onnx's converters lower the text with ONNX's ``StringNormalizer``, whose default locale in
ONNX Runtime is ``en_US.UTF-8``; where that locale is not installed (slim containers, most CI
images) the model fails to load. The ``locale='C'`` option avoids it, and gives the same result
for the ASCII and UTF-8 text scikit-learn lowercases (Python's ``str.lower`` does not depend on
the locale either). onnxbridge passes it for every vectorizer inside any model.
"""

from __future__ import annotations

from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from onnxbridge.convert._registry import register_default_options

# TfidfVectorizer subclasses CountVectorizer; both are named so the table reads plainly.
register_default_options(CountVectorizer, {"locale": "C"})
register_default_options(TfidfVectorizer, {"locale": "C"})
