"""The ``onnxbridge`` command: thin commands that parse flags, call the library and print.

Exit codes: 0 success, 1 a check failed (validate: DIVERGENT), 2 an error (bad input, with a
one-line message; ``--debug`` anywhere on the command line shows the traceback), 130 interrupted
(Ctrl-C: ``interrupted`` on stderr; files are written atomically, so none is left half-written).
A reader gone (``onnxbridge predict ... | head``, on standard output or error) silences the
command, which still finishes its work and exits with its own code.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import re
import sys
import traceback
import warnings
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from onnxbridge._cli._console import console, quiet_when_unread
from onnxbridge._cli._out import check_not_a_source, check_out_file
from onnxbridge._cli._source import TrustOption
from onnxbridge.errors import BundleError, DataError, OnnxbridgeError, OnnxModelError

__all__ = ["app", "main", "run"]

# Typer's own names for option values (``<int>``) as usage-line words.
_VALUE_WORDS = {
    "int": "INTEGER",
    "float": "FLOAT",
    "str": "TEXT",
    "path": "PATH",
    "bool": "BOOLEAN",
}


class _Command(TyperCommand):
    """A command whose help reads ``Usage: onnxbridge convert [OPTIONS] SOURCE``: arguments by
    their upper-case name (``...`` only after one that takes several values), option values as
    words."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), record[1]))
            else:
                options.append((_value_words(record[0]), record[1]))
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(param: Any) -> str:
    name = param.metavar or param.name.upper()
    return name if param.nargs == 1 else f"{name}..."


def _value_words(text: str) -> str:
    """``--batch-size <int>`` → ``--batch-size INTEGER``."""
    return re.sub(r"<(?:list\[)?(\w+)\]?>", lambda m: _VALUE_WORDS.get(m[1], m[1].upper()), text)


# The commands written in other modules, by name: (module, function). Their modules import
# heavier libraries, so each loads only when its command runs or shows its help; `onnxbridge
# --help` and `--version` stay quick.
_ELSEWHERE: dict[str, tuple[str, str]] = {
    "bench": ("onnxbridge._cli.bench", "bench_command"),
    "coverage": ("onnxbridge._cli.coverage", "coverage"),
    "score": ("onnxbridge._cli.score", "score_command"),
    "serve": ("onnxbridge._cli.serve", "serve"),
    "tune": ("onnxbridge._cli.bench", "tune_command"),
    "validate": ("onnxbridge._cli.validate", "validate_command"),
}


class _Later(TyperCommand):
    """Stands for a command of :data:`_ELSEWHERE` until it is needed: its name and summary are
    enough for the list of commands and for "did you mean" hints."""

    def load(self) -> TyperCommand:
        assert self.name is not None
        module, function = _ELSEWHERE[self.name]
        single = typer.Typer(add_completion=False, rich_markup_mode=None)
        _command(self.name, single)(getattr(importlib.import_module(module), function))
        loaded = typer.main.get_command(single)
        assert isinstance(loaded, TyperCommand)
        return loaded


class _Group(TyperGroup):
    """The ``onnxbridge`` group: commands in the order of :data:`_SHORT_HELP`, those of
    :data:`_ELSEWHERE` imported only when used."""

    def __init__(self, *, commands: Any = None, **attrs: Any) -> None:
        super().__init__(commands=commands, **attrs)
        here = dict(self.commands)
        self.commands = {
            name: here.get(name) or _Later(name, short_help=_SHORT_HELP[name])
            for name in _SHORT_HELP
        }

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if isinstance(command, _Later):
            command = self.commands[cmd_name] = command.load()
        return command

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # Typer's listing, from the summaries alone (without loading any command).
        shown = [(name, c) for name, c in self.commands.items() if not c.hidden]
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in shown])


app = typer.Typer(
    cls=_Group,
    name="onnxbridge",
    help="Take a scikit-learn model to ONNX Runtime and prove the copy is faithful and fast: "
    "train → convert → inspect → predict → validate → bench / tune → serve → score.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    epilog="Exit codes: 0 success, 1 a check failed (validate: DIVERGENT), 2 an error, "
    "130 interrupted (Ctrl-C). "
    "Add --debug anywhere to see the traceback of an error.",
)


# One line per command in `onnxbridge --help`, short enough that no summary is cut.
_SHORT_HELP = {
    "train": "Fit a scikit-learn model and write its bundle folder.",
    "convert": "Convert a bundle or a model file to a checked model.onnx.",
    "inspect": "Summarise an ONNX file: opsets, inputs, outputs, operators, trees.",
    "predict": "Score a data file: labels and probabilities (or predictions).",
    "validate": "Check model.onnx against its source model on every probe set.",
    "score": "Score CSV / Parquet files larger than memory into Parquet.",
    "demo": "Run the reference workflow on Iris, from training to timing.",
    "bench": "Time scikit-learn against ONNX Runtime over batch sizes.",
    "tune": "Measure session settings and store the fastest in the model.",
    "serve": "Serve ONNX models over the Open Inference Protocol (KServe v2).",
    "coverage": "Convert every estimator and compare: a table of what works.",
}


def _command(name: str | None = None, into: typer.Typer | None = None) -> Any:
    """``app.command`` (or ``into.command``) with the clean usage lines of :class:`_Command` and
    a one-line summary.

    Without ``name`` the command is named after the decorated function.
    """

    def register(function: Any) -> Any:
        command = name or function.__name__
        typer_app = app if into is None else into
        return typer_app.command(command, cls=_Command, short_help=_SHORT_HELP[command])(function)

    return register


def _version_callback(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"onnxbridge {version('onnxbridge')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """Take a scikit-learn model to ONNX Runtime and prove the copy is faithful and fast."""


EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR = 0, 1, 2
# 128 + SIGINT, what shells report for a command stopped by Ctrl-C. Typer returns it, without a
# word, for a KeyboardInterrupt raised inside a command; no command of ours exits with it.
EXIT_INTERRUPTED = 130
# The file system is out of room for what is being written.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


def _default_out(data: str, model: str) -> Path:
    stem = Path(data).stem if data not in _builtins() else data
    head = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", model.split("|")[-1])
    name = head[0].lower() if head else "model"
    return Path("runs") / f"{re.sub(r'[^a-z0-9_-]+', '-', stem.lower())}-{name}"


def _builtins() -> tuple[str, ...]:
    from onnxbridge.data import BUILTIN_DATASETS

    return BUILTIN_DATASETS


def _model_path(model: Path) -> Path:
    """A bundle folder stands for its model.onnx."""
    if not model.is_dir():
        return model
    onnx_file = model / "model.onnx"
    if onnx_file.is_file():
        return onnx_file
    if (model / "card.json").is_file():
        raise BundleError(
            f"bundle {str(model)!r} has no model.onnx yet; run `onnxbridge convert {model}` first"
        )
    raise OnnxModelError(
        f"{str(model)!r} is a folder, not a .onnx file or a bundle (no model.onnx in it); "
        "pass a .onnx file, or a bundle folder written by `onnxbridge train` and `convert`"
    )


# --------------------------------------------------------------------------------------- train
@_command()
def train(
    data: Annotated[
        str,
        typer.Option(
            help="Built-in dataset (iris, wine, breast_cancer, digits, diabetes) or a "
            "CSV, TSV, Parquet or JSON (lines or array) file."
        ),
    ],
    model: Annotated[
        str,
        typer.Option(
            help='Estimator, e.g. "RandomForestClassifier(n_estimators=10)", or a '
            'pipeline "StandardScaler() | LogisticRegression()". Literal arguments only.'
        ),
    ],
    target: Annotated[str | None, typer.Option(help="Target column (required for files).")] = None,
    test_size: Annotated[float, typer.Option(help="Fraction of rows held out.")] = 0.3,
    seed: Annotated[int, typer.Option(help="random_state of the split.")] = 42,
    stratify: Annotated[
        bool, typer.Option("--stratify", help="Keep class proportions in the split (classifiers).")
    ] = False,
    preprocess: Annotated[
        str,
        typer.Option(
            help="none: the model takes the columns as they are; auto: impute, one-hot encode "
            "text/category columns and scale numbers (not for trees) in front of the model."
        ),
    ] = "none",
    out: Annotated[
        Path | None, typer.Option(help="Bundle folder to write [default: runs/<data>-<model>].")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing bundle folder.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the card as JSON.")] = False,
) -> None:
    """Fit a scikit-learn model and write its bundle (card.json, model.skops, holdout.parquet)."""
    from onnxbridge.bundle import train_bundle

    out = out or _default_out(data, model)
    bundle, result = train_bundle(
        data,
        model,
        out,
        target=target,
        test_size=test_size,
        seed=seed,
        stratify=stratify,
        overwrite=overwrite,
        preprocess=preprocess,
    )
    if as_json:
        _print_json({"bundle": str(bundle.path), **bundle.card})
        return
    metric, value = next(iter(result.metrics.items()))
    console.print(
        f"trained {type(result.estimator).__name__} on {data} "
        f"({len(result.X_train)} train / {len(result.X_test)} test rows, "
        f"{bundle.schema.n_features} feature{'s' if bundle.schema.n_features != 1 else ''})"
    )
    console.print(f"test {metric}: {value:.4f}")
    console.print(f"bundle: {bundle.path}")


# ------------------------------------------------------------------------------------- convert
@_command()
def convert(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="SOURCE",
            help="A bundle folder, or a model file (.skops; .pkl/.joblib with "
            "--allow-pickle) together with --sample.",
        ),
    ],
    opset: Annotated[
        int | None, typer.Option(help="Default-domain opset [default: highest that works].")
    ] = None,
    ml_opset: Annotated[
        int | None, typer.Option(help="ai.onnx.ml opset [default: highest that works].")
    ] = None,
    zipmap: Annotated[
        bool, typer.Option("--zipmap", help="Keep ZipMap (probabilities as a list of dicts).")
    ] = False,
    precision: Annotated[
        str,
        typer.Option(
            help="auto, float or double: float32 or float64 input and arithmetic; auto uses "
            "float unless that changes the model's decisions."
        ),
    ] = "auto",
    tree_block_nodes: Annotated[
        int | None,
        typer.Option(
            help="A tree ensemble of more nodes is written as blocks of whole trees of at most "
            "this many nodes, their scores added (or joined, in float64 graphs); 0 writes one "
            "operator per ensemble [default: 1048576].",
        ),
    ] = None,
    fold: Annotated[
        bool,
        typer.Option(
            "--fold/--no-fold",
            help="Fold a scaler before a linear model into its coefficients (one pass less per "
            "call); --no-fold keeps one node per pipeline step.",
        ),
    ] = True,
    sample: Annotated[
        Path | None,
        typer.Option(help="Data file with a few training rows (for a model file)."),
    ] = None,
    target: Annotated[
        str | None, typer.Option(help="Target column to drop from --sample, if present.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Where to write the .onnx (model file only).")
    ] = None,
    allow_pickle: Annotated[
        bool,
        typer.Option(
            "--allow-pickle",
            help="Allow loading .pkl / .joblib files. Unpickling runs code from the "
            "file: only for files you made.",
        ),
    ] = False,
    trust: TrustOption = None,
    allow_divergent: Annotated[
        bool,
        typer.Option(
            "--allow-divergent",
            help="Write the model even when ONNX Runtime and scikit-learn disagree on the "
            "sample or probe rows, or when no sample row could be compared (with a warning; "
            "the bundle records it as unchecked).",
        ),
    ] = False,
    external_data: Annotated[
        bool,
        typer.Option(
            "--external-data",
            help="Write the tensors to MODEL.onnx.data beside the .onnx (ONNX external data); "
            "done by itself for a model over the 2 GiB protobuf limit.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Convert a bundle's model (or a model file plus sample data) to a checked model.onnx."""
    from onnxbridge._cli._inspect_view import format_opsets
    from onnxbridge.convert import convert_bundle, convert_estimator
    from onnxbridge.convert._core import PRECISIONS, TREE_BLOCK_NODES, sample_rows

    # Flags first: they are the cheapest to check and name the mistake best.
    if precision not in PRECISIONS:
        raise DataError(
            f"--precision {precision!r} is not supported; use one of {', '.join(PRECISIONS)}"
        )
    if tree_block_nodes is None:
        tree_block_nodes = TREE_BLOCK_NODES
    if tree_block_nodes < 0:
        raise DataError(
            f"--tree-block-nodes {tree_block_nodes} is negative; pass a number of nodes "
            f"(default {TREE_BLOCK_NODES}), or 0 for one operator per tree ensemble"
        )
    if source.is_dir():
        if sample is not None or out is not None or allow_pickle:
            raise DataError(
                "--sample, --out and --allow-pickle are for model files; a bundle "
                "carries its own sample rows and writes BUNDLE/model.onnx"
            )
        from onnxbridge._files import restored_on_failure
        from onnxbridge._onnxfile import data_file_name
        from onnxbridge.bundle import CARD_NAME, ONNX_NAME
        from onnxbridge.validate import write_golden
        from onnxbridge.validate._golden import GOLDEN_NAME

        trusted = tuple(trust or ())
        # The model, the card, the golden file and the validation reports go together: should
        # the golden file fail after the model was written, all stay as they were.
        together = [ONNX_NAME, data_file_name(ONNX_NAME), CARD_NAME, GOLDEN_NAME]
        together += ["reports/validation.json", "reports/validation.html"]
        with restored_on_failure(source, together):
            result = convert_bundle(
                source,
                opset=opset,
                ml_opset=ml_opset,
                tree_block_nodes=tree_block_nodes,
                zipmap=zipmap,
                precision=precision,
                fold=fold,
                trusted=trusted,
                allow_divergent=allow_divergent,
                external_data=external_data or None,
            )
            golden_path = write_golden(source, trusted=trusted)
    else:
        from onnxbridge._cli._source import load_model_and_rows

        if not source.exists():
            raise DataError(
                f"{str(source)!r} does not exist; pass a bundle folder or a .skops model file"
            )
        if sample is None:
            raise DataError(
                f"converting the model file {str(source)!r} needs --sample FILE: a CSV / Parquet "
                "file with a few training rows, from which the input schema is taken"
            )
        check_out_file(out, "--out")
        from onnxbridge._onnxfile import data_file_name

        destination = out or source.with_suffix(".onnx")
        for written in (destination, destination.with_name(data_file_name(destination))):
            check_not_a_source(written, "--out", [source, sample])
        estimator, frame = load_model_and_rows(
            source, sample, target=target, allow_pickle=allow_pickle, trust=trust
        )
        result = convert_estimator(
            estimator,
            sample_rows(frame),
            opset=opset,
            ml_opset=ml_opset,
            tree_block_nodes=tree_block_nodes,
            zipmap=zipmap,
            precision=precision,
            target=target,
            description=type(estimator).__name__,
            fold=fold,
            allow_divergent=allow_divergent,
        )
        result.save(destination, external_data=external_data or None)
    from onnxbridge._onnxfile import external_data_files

    data_files = external_data_files(result.path) if result.path is not None else []
    if as_json:
        _print_json(
            {
                "path": str(result.path),
                "external_data": [str(path) for path in data_files],
                "opsets": result.metadata.opsets,
                "target_opsets": result.opsets.as_target(),
                "zipmap": result.zipmap,
                "precision": result.precision,
                "notes": result.notes,
                "checked": result.check is not None and result.check.ok is True,
                "check": None if result.check is None else result.check.as_dict(),
                "inputs": result.metadata.inputs,
                "outputs": result.metadata.outputs,
                **({"golden": str(golden_path)} if source.is_dir() else {}),
            }
        )
        return
    inputs = ", ".join(
        f"{i['name']}: {i['dtype']}[N,{len(i['columns'])}]" for i in result.metadata.inputs
    )
    opsets = format_opsets(result.metadata.opsets)
    console.print(f"wrote {result.path}")
    for path in data_files:
        console.print(f"wrote {path} (external data: {path.stat().st_size} bytes of tensors)")
    outputs = ", ".join(
        name if role == name else f"{name} ({role})"
        for role, name in result.metadata.outputs.items()
    )
    console.print(f"inputs: {inputs}; outputs: {outputs}")
    console.print(
        f"opsets: {opsets}; zipmap: {'on' if result.zipmap else 'off'}; "
        f"precision: {result.precision}"
    )
    for note in result.notes:
        if result.check is not None and not result.check.ok and note.startswith("NOT CHECKED"):
            continue
        console.print(f"note: {note}")
    if result.check is not None and result.check.ok is None:
        console.print(f"NOT checked (--allow-divergent): {result.check.unchecked}")
    elif result.check is not None and not result.check.ok:
        # The warning itself went to stderr (convert_estimator warns); say it here too.
        console.print(f"NOT checked (--allow-divergent): {result.check.summary()}")
    elif result.check is not None:
        console.print(f"checked: {result.check.summary()}")
    if source.is_dir():
        console.print(
            f"golden predictions: {golden_path} (onnxbridge validate --golden re-runs them)"
        )


# ------------------------------------------------------------------------------------- inspect
@_command()
def inspect(
    model: Annotated[
        Path, typer.Argument(metavar="MODEL", help="A .onnx file (or a bundle folder).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Summarise an ONNX file: validity, opsets, typed inputs/outputs, operators, trees."""
    from onnxbridge._cli._inspect_view import render_inspection
    from onnxbridge._inspection import inspect_model

    summary = inspect_model(_model_path(model))
    if as_json:
        _print_json(summary.to_dict())
    else:
        render_inspection(summary, console)


# ------------------------------------------------------------------------------------- predict
_OUT_FORMATS = ("csv", "tsv", "parquet", "jsonl")


@_command()
def predict(
    model: Annotated[
        Path, typer.Argument(metavar="MODEL", help="A .onnx file (or a bundle folder).")
    ],
    data: Annotated[
        Path, typer.Option(help="Rows to score: CSV, TSV, Parquet or JSON (lines or array).")
    ],
    out: Annotated[
        Path | None, typer.Option(help="Output file [default: CSV on standard output].")
    ] = None,
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format", help="csv, tsv, parquet or jsonl [default: from --out, else csv]."
        ),
    ] = None,
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="Score rows with missing values even if the source model refused them.",
        ),
    ] = False,
    ignore_extra: Annotated[
        bool,
        typer.Option(
            "--ignore-extra", help="Leave out columns the model does not use instead of failing."
        ),
    ] = False,
) -> None:
    """Score a data file: labels and one probability column per class (or predictions)."""
    from onnxbridge._onnxfile import model_files
    from onnxbridge.bundle import Bundle
    from onnxbridge.data import data_format, read_table, write_jsonl, write_table
    from onnxbridge.runtime import Predictor

    if output_format is not None and output_format not in _OUT_FORMATS:
        raise DataError(
            f"--format {output_format!r} is not supported; use one of {', '.join(_OUT_FORMATS)}"
        )
    fmt = output_format or (data_format(out, action="write") if out is not None else "csv")
    if fmt == "parquet" and out is None:
        raise DataError("Parquet is binary and cannot go to standard output; pass --out FILE")
    check_out_file(out, "--out")
    model_file = _model_path(model)
    read = [data, model_file]
    with contextlib.suppress(OSError, OnnxbridgeError):  # Predictor says what is wrong
        read = [data, *model_files(model_file)]  # and its external data files
    if model.is_dir():
        with contextlib.suppress(BundleError):  # a folder that is no bundle: nothing of its own
            read += Bundle.open(model).own_files()
    check_not_a_source(out, "--out", read)
    predictor = Predictor(model_file)
    frame = read_table(data)
    result = predictor.predict(
        frame, ignore_extra=ignore_extra, allow_missing=allow_missing
    ).to_frame()
    if out is not None:
        write_table(result, out, fmt)
        print(f"wrote {len(result)} predictions to {out}", file=sys.stderr)
        return
    if fmt == "jsonl":
        write_jsonl(result, sys.stdout)
    else:
        result.to_csv(sys.stdout, index=False, sep="\t" if fmt == "tsv" else ",")


# ---------------------------------------------------------------------------------------- demo
@_command()
def demo(
    out: Annotated[Path, typer.Option(help="Bundle folder to (re)write.")] = Path("runs/iris-rf"),
) -> None:
    """Run the reference workflow: Iris, RandomForest(10 trees), opset 15, validate, time."""
    from onnxbridge._cli.demo import run_demo

    report = run_demo(out, console)
    if not report.equivalent:
        raise typer.Exit(EXIT_CHECK_FAILED)


# ---------------------------------------------------------------------------------- entry point
def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (``sys.exit`` is applied by the console script)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("ONNXBRIDGE_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]
    return _run(args, debug)


def _run(args: list[str], debug: bool) -> int:
    """The command's exit code; every error becomes one ``error:`` line on standard error."""
    try:
        code = app(args=args, prog_name="onnxbridge", standalone_mode=False)
    except SystemExit as exc:
        if exc.code is None:
            return EXIT_OK
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return EXIT_ERROR
    except TyperException as exc:
        # Usage errors (missing option, bad value, unknown command): one line, exit 2.
        if type(exc).__name__ == "NoArgsIsHelpError":
            # Typer's own class (not public), a usage error that knows how to show itself.
            cast(Any, exc).show()  # prints the help text
            return EXIT_ERROR
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "onnxbridge"
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        print(f"error: {_one_line(message)} (see '{where} --help')", file=sys.stderr)
        return int(getattr(exc, "exit_code", EXIT_ERROR) or EXIT_ERROR)
    except OnnxbridgeError as exc:
        if debug:
            traceback.print_exc()
        print(f"error: {_one_line(_with_flags(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        # The file system said no (permissions, a file where a folder should be, disk full).
        if debug:
            traceback.print_exc()
        print(f"error: {_os_error_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:  # never a traceback for users; --debug shows it
        if debug:
            traceback.print_exc()
        print(
            f"error: unexpected {type(exc).__name__}: {_one_line(str(exc))} "
            "(rerun with --debug for the traceback and report it)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    if code == EXIT_INTERRUPTED:
        return _interrupted()
    return code if isinstance(code, int) else EXIT_OK


def _interrupted() -> int:
    print("interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def _os_error_line(exc: OSError) -> str:
    """One line for an OSError, naming the file as the user wrote it (never a temporary name)."""
    target = f" {str(exc.filename)!r}" if exc.filename else ""
    reason = exc.strerror or str(exc)
    if exc.errno in _NO_ROOM:
        return (
            f"cannot write{target}: {reason} (the disk or a size limit is full); free some "
            "space or write somewhere else, then run the command again"
        )
    if exc.errno == errno.EISDIR and exc.filename:
        return (
            f"{str(exc.filename)!r} is a folder where a file is expected; "
            "pass a file's path, or move the folder out of the way"
        )
    return f"cannot access{target}: {reason}; check the path and its permissions"


# The flag of a Python argument where it is not ``--`` and the name with dashes.
_FLAG_OF = {"trusted": "--trust", "output_format": "--format", "estimator": "--reference"}


def _flag(argument: str) -> str:
    return _FLAG_OF.get(argument, "--" + argument.replace("_", "-"))


# Words after which a flag and its value are something to type, not the value at fault.
_TO_TYPE = r"\b(?:pass|with|add|use|for|or|and) "
# A quoted value as repr() writes it ('...' or "...", with backslash escapes); an apostrophe
# inside a word ("can't") opens none.
_QUOTED = r"""(?<!\w)(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""


def _with_flags(exc: OnnxbridgeError) -> str:
    """The error's message with the Python arguments it names as the command's flags:
    ``model='Foo()'`` → ``--model 'Foo()'``, ``overwrite=True`` → ``--overwrite``. Text inside
    quoted values (a path, a model spec) is left exactly as it is."""
    text = str(exc)
    for argument in exc.arguments:
        flag = _flag(argument)
        name = rf"(?<![\w.-]){re.escape(argument)}="
        pattern = re.compile(
            rf"(?P<quoted>{_QUOTED})"
            # A value to type is shown as typed: "pass on_error='skip'" → "pass --on-error skip".
            rf"|(?P<to_type>{_TO_TYPE}){name}'(?P<typed>[\w.:/-]+)'"
            rf"|{name}(?P<true>True\b)?(?P<value>(?=[^\s,;.)]))?"
        )

        def rewrite(match: re.Match[str], flag: str = flag) -> str:
            if match["quoted"]:
                return match["quoted"]
            if match["to_type"]:
                return f"{match['to_type']}{flag} {match['typed']}"
            if match["true"] is None and match["value"] is not None:
                return flag + " "
            return flag

        text = pattern.sub(rewrite, text)
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _show_warning(message: Any, category: type, *_: Any, **__: Any) -> None:
    print(f"warning: {_one_line(str(message))}", file=sys.stderr)


def run() -> None:
    """Console-script entry point: warnings as one ``warning: ...`` line, then :func:`main`.

    Output nobody reads any more (``| head``, a closed socket, ``2>&-``) is dropped; the command
    still finishes and exits with its own code.
    """
    quiet_when_unread()
    warnings.showwarning = _show_warning
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
