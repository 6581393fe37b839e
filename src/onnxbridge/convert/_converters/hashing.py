"""HashingVectorizer: text to hashed token counts, with scikit-learn's own hash.

skl2onnx has no converter for it. scikit-learn lowercases each document, finds its tokens
(the default ``token_pattern``: runs of two or more word characters), hashes each token's UTF-8
bytes with MurmurHash3 (32 bits, seed 0, signed) and adds ``sign(h)`` (``alternate_sign``) or 1
at column ``|h| % n_features``; then ``binary`` keeps 1 where any token landed, and ``norm``
scales each row. The graph does the same with ONNX Runtime's operators:

- ``StringNormalizer`` lowercases, in the ``C`` locale as for the other text vectorizers (a
  model that loads everywhere). That locale lowercases ASCII letters only: a word with an
  upper-case non-ASCII letter (``École``) hashes differently from scikit-learn's ``école``, a
  difference ``validate`` reports on such text. (skl2onnx's ``locale`` option of this converter
  takes ``en_US.UTF-8`` where that locale is installed.)
- ``com.microsoft.Tokenizer`` with ``[\\p{L}\\p{N}_][\\p{L}\\p{N}_]+`` finds the tokens Python's
  ``(?u)\\b\\w\\w+\\b`` finds (letters, digits and ``_`` of any script);
- ``com.microsoft.MurmurHash3`` (``positive=0``, seed 0) is the same hash, bit for bit;
- ``ScatterElements(reduction="add")`` sums each row's tokens into its ``[N, n_features]`` row.

The output is dense: ``n_features`` columns per row (2**20 by default; a smaller
``n_features`` keeps results small). Settings the graph cannot follow are refused: analyzers
other than ``word``, stop words, another ``token_pattern``, custom preprocessors or
tokenizers, ``strip_accents``, and inputs other than text content. Word n-grams
(``ngram_range``) are the words of each window joined by a space (``StringConcat``, opset 20).

``[N, 1]`` string -> ``[N, n_features]`` in the graph's float type.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.feature_extraction.text import HashingVectorizer

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

_DEFAULT_PATTERN = r"(?u)\b\w\w+\b"
# RE2 (ONNX Runtime's regex engine) spelling of the default pattern: Python's \w is a letter,
# digit or _ of any script; RE2's \w and \b are ASCII only.
_TOKEN_REGEX = r"[\p{L}\p{N}_][\p{L}\p{N}_]+"
_PAD = "#"  # never a token: tokens are letters, digits and _
_INT32_MIN = -(2**31)
_LOCALES = ["C", "en_US.UTF-8"]


def _check(model: Any) -> None:
    """Refuse settings the graph does not follow, naming the setting and what works."""
    unsupported = {
        "analyzer": (model.analyzer, "word"),
        "token_pattern": (model.token_pattern, _DEFAULT_PATTERN),
        "stop_words": (model.stop_words, None),
        "strip_accents": (model.strip_accents, None),
        "preprocessor": (model.preprocessor, None),
        "tokenizer": (model.tokenizer, None),
        "input": (model.input, "content"),
    }
    for name, (value, wanted) in unsupported.items():
        if value != wanted:
            raise ConversionError(
                f"HashingVectorizer({name}={value!r}) cannot be converted; onnxbridge converts "
                f"{name}={wanted!r} (scikit-learn's default)"
            )
    if model.norm not in ("l1", "l2", None):
        raise ConversionError(
            f"HashingVectorizer(norm={model.norm!r}) cannot be converted; use l1, l2 or None"
        )


def _shape(operator: Any) -> None:
    _check(operator.raw_operator)
    width = int(operator.raw_operator.n_features)
    operator.outputs[0].type = float_tensor_type(operator)([None, width])


def _tokens(g: Nodes, model: Any, text: str, locale: str) -> str:
    """``[N, T]`` tokens of each row, padded with :data:`_PAD`."""
    flat = g.op("Reshape", [text, g.const(np.array([-1]))])
    if model.lowercase:
        flat = g.op(
            "StringNormalizer",
            [flat],
            case_change_action="LOWER",
            is_case_sensitive=0,
            locale=locale,
        )
    tokens = g.op(
        "Tokenizer",
        [flat],
        domain="com.microsoft",
        op_version=1,
        pad_value=_PAD,
        mark=0,
        mincharnum=1,
        tokenexp=_TOKEN_REGEX,
    )
    # [N, T] (or [N, 1, T] on some shapes): one row of tokens per document.
    rows = g.op("Shape", [flat])
    return g.op("Reshape", [tokens, g.op("Concat", [rows, g.const(np.array([-1]))], axis=0)])


def _terms(g: Nodes, model: Any, words: str) -> tuple[str, str]:
    """The terms scikit-learn hashes, ``[N, K]``, and which of them are real (not padding).

    Word n-grams of ``ngram_range=(lo, hi)``: for each ``k``, the ``k`` consecutive tokens
    joined by a space. The tokenizer pads at the end of a row, so a window is real when its
    last token is.
    """
    lo, hi = (int(v) for v in model.ngram_range)
    real_words = g.op("Not", [g.op("Equal", [words, g.const(np.array([_PAD], dtype=object))])])
    if hi > 1 and g.opset < 20:
        raise ConversionError(
            f"HashingVectorizer(ngram_range={model.ngram_range!r}) needs opset 20 or more "
            f"(StringConcat joins the words), got opset {g.opset}; pass opset=20 or higher",
            arguments=("opset",),
        )
    terms, masks = [], []
    for k in range(lo, hi + 1):
        if k == 1:
            terms.append(words)
            masks.append(real_words)
            continue
        gram = None
        for j in range(k):
            # Words j .. T - (k - 1 - j): the j-th word of every window.
            end = -(k - 1 - j) if j < k - 1 else np.iinfo(np.int64).max
            part = g.op(
                "Slice",
                [words, g.const(np.array([j])), g.const(np.array([end])), g.const(np.array([1]))],
            )
            if gram is None:
                gram = part
            else:
                spaced = g.op("StringConcat", [gram, g.const(np.array(" ", dtype=object))])
                gram = g.op("StringConcat", [spaced, part])
        last = g.op(
            "Slice",
            [
                real_words,
                g.const(np.array([k - 1])),
                g.const(np.array([np.iinfo(np.int64).max])),
                g.const(np.array([1])),
            ],
        )
        assert gram is not None  # k >= 2 words were joined
        terms.append(gram)
        masks.append(last)
    if len(terms) == 1:
        return terms[0], masks[0]
    return g.op("Concat", terms, axis=1), g.op("Concat", masks, axis=1)


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check(model)
    options = scope.get_options(model, {"locale": "C"})
    g = Nodes(scope, operator, container)
    if g.opset < 18:
        raise ConversionError(
            f"HashingVectorizer needs opset 18 or more (ScatterElements adding into a row, "
            f"reductions over given axes), got opset {g.opset}; pass opset=18 or higher",
            arguments=("opset",),
        )
    n = int(model.n_features)
    words = _tokens(g, model, operator.inputs[0].full_name, options["locale"])
    tokens, real = _terms(g, model, words)
    hashed = g.op("MurmurHash3", [tokens], domain="com.microsoft", op_version=1, positive=0, seed=0)
    h = g.op("Cast", [hashed], to=TensorProto.INT64)
    column = g.op(
        "Where",
        [
            g.op("Equal", [h, g.const(np.array(_INT32_MIN))]),
            g.const(np.array((2**31 - 1 - (n - 1)) % n)),
            g.op("Mod", [g.op("Abs", [h]), g.const(np.array(n))]),
        ],
    )
    ones = g.cast_float(real)  # 1 for a token, 0 for padding
    if model.alternate_sign and not model.binary:
        negative = g.op("Less", [h, g.const(np.array(0))])
        sign = g.op("Where", [negative, g.const(np.array(-1.0)), g.const(np.array(1.0))])
        values = g.op("Mul", [ones, sign])
    else:
        values = ones
    shape = g.op(
        "Concat",
        [
            g.op(
                "Slice", [g.op("Shape", [tokens]), g.const(np.array([0])), g.const(np.array([1]))]
            ),
            g.const(np.array([n])),
        ],
        axis=0,
    )
    zeros = g.op("ConstantOfShape", [shape], value=_zero(g))
    summed = g.op("ScatterElements", [zeros, column, values], axis=1, reduction="add")
    if model.binary:
        # scikit-learn sets every stored entry to 1: where any token landed, whatever the signs.
        summed = g.cast_float(g.op("Greater", [summed, g.const(np.array(0.0))]))
    out = operator.outputs[0].full_name
    if model.norm is None:
        g.identity(summed, out)
        return
    if model.norm == "l2":
        norm = g.op("Sqrt", [g.op("ReduceSumSquare", [summed, g.const(np.array([1]))], keepdims=1)])
    else:
        norm = g.op("ReduceL1", [summed, g.const(np.array([1]))], keepdims=1)
    # A row without tokens keeps its zeros (scikit-learn's normalize leaves zero rows alone).
    safe = g.op(
        "Where", [g.op("Equal", [norm, g.const(np.array(0.0))]), g.const(np.array(1.0)), norm]
    )
    g.op("Div", [summed, safe], output=out)


def _zero(g: Nodes) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros(1, dtype=g.dtype))


def _example() -> tuple[Any, Any]:
    words = "Onnx runtime model TREE forest été Café naïve 2024 x a_b".split()
    rng = np.random.RandomState(0)
    docs = [" ".join(rng.choice(words, rng.randint(1, 9))) for _ in range(60)] + ["", "a"]
    model = HashingVectorizer(n_features=64)
    return model.fit(docs), np.array(docs, dtype=object).reshape(-1, 1)


register_converter(
    ConverterSpec(
        HashingVectorizer,
        _shape,
        _convert,
        _example,
        options={"locale": _LOCALES},
    )
)
