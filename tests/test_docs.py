"""The documentation cannot drift: every command and Python block of README.md, docs/ and examples/
runs here, and what it prints is compared with the page (rules in tests/docs_support.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from docs_support import (
    PAGES,
    ROOT,
    describe,
    make_start,
    matches,
    read_steps,
    run_page,
)


@pytest.fixture(scope="module")
def start(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_start(tmp_path_factory.mktemp("docs") / "start")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_prints_what_it_shows(page: Path, start: Path, tmp_path: Path) -> None:
    outcomes = run_page(page, start, tmp_path / "page")
    report = describe(page, outcomes)
    assert not report, "the page no longer shows what its commands print:\n" + report


def test_pages_are_all_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert {"README.md", "docs/convert.md", "docs/index.md", "examples/README.md"} <= names


# The harness itself: it must fail on drift and accept only the documented placeholders.


def _run_text(text: str, start: Path, tmp_path: Path) -> str:
    tmp_path.mkdir()
    page = tmp_path / "page.md"
    page.write_text(text)
    return describe(page, run_page(page, start, tmp_path / "run"))


def test_a_changed_output_fails(start: Path, tmp_path: Path) -> None:
    good = "```\n$ echo 'took 1.5 ms'\ntook <time>\n```\n"
    assert _run_text(good, start, tmp_path / "a") == ""
    drifted = "```\n$ echo 'took 1.5 ms, 3 rows'\ntook <time>\n```\n"
    report = _run_text(drifted, start, tmp_path / "b")
    assert "printed other lines" in report and "+took 1.5 ms, 3 rows" in report


def test_a_failing_command_fails_unless_shown(start: Path, tmp_path: Path) -> None:
    report = _run_text("```\n$ onnxbridge validate runs/nope\n```\n", start, tmp_path / "a")
    assert "exited 2" in report
    shown = (
        '```\n$ onnxbridge validate runs/nope || echo "exit status $?"\n'
        "error: bundle 'runs/nope' does not exist or is not a folder; create one with "
        "`onnxbridge train --out DIR`\nexit status 2\n```\n"
    )
    assert _run_text(shown, start, tmp_path / "b") == ""


def test_python_blocks_share_one_process_and_compare_output(start: Path, tmp_path: Path) -> None:
    text = "```python\nx = 20\n```\n\n```python\nprint(x + 1)\n```\n```\n21\n```\n"
    assert _run_text(text, start, tmp_path / "a") == ""
    wrong = text.replace("\n21\n", "\n22\n")
    assert "printed other lines" in _run_text(wrong, start, tmp_path / "b")
    silent = "```python\nprint('hidden')\n```\n"
    assert "printed other lines" in _run_text(silent, start, tmp_path / "c")
    raising = "```python\nraise ValueError('boom')\n```\n"
    assert "raised an exception" in _run_text(raising, start, tmp_path / "d")


def test_a_page_starts_where_make_demo_leaves_off(start: Path, tmp_path: Path) -> None:
    text = (
        "```\n$ ls runs/iris-rf/model.onnx examples/README.md\n"
        "examples/README.md\nruns/iris-rf/model.onnx\n```\n"
    )
    assert _run_text(text, start, tmp_path / "a") == ""


def test_a_command_without_dollar_is_refused() -> None:
    with pytest.raises(ValueError, match="not run by the tests"):
        read_steps("```\nonnxbridge convert runs/iris-rf\n```\n")


@pytest.mark.parametrize(
    ("shown", "printed", "same"),
    [
        (["took <time>"], ["took 12.5 ms"], True),
        (["took <time>"], ["took 3e-05"], True),
        (["took <time>"], ["took twelve"], False),
        (["<rate> rows/s"], ["1,234,567 rows/s"], True),
        (["speed-up <ratio>"], ["speed-up 2.3×"], True),
        (["peak <memory>"], ["peak 512.3 MiB"], True),
        (["wrote <path>"], ["wrote /tmp/x/y.csv"], True),
        (["wrote <path>"], ["wrote a b"], False),
        (["on <date>"], ["on 2030-01-02T03:04:05Z"], True),
        (["│ a │ 1 │"], ["│ a    │    1 │"], True),
        (["┏━━┳━┓"], ["┏━━━━━━┳━━━━┓"], True),
        (["python <version>"], ["python 3.11.7"], True),
        (["sha256 <hash>"], ["sha256 a81c4ded07f0"], True),
        (["sha256 <hash>"], ["sha256 not-hex"], False),
        (["chose <choice> (2 threads)"], ["chose G (2 threads)"], True),
        (["a 1"], ["a 2"], False),
        (["x", "y"], ["x"], False),
        (["x"], ["x", "", ""], True),
        (["x"], ["", "x"], False),
    ],
)
def test_matching_rules(shown: list[str], printed: list[str], same: bool) -> None:
    assert matches(shown, printed) is same


_BUILD_TALK = re.compile(
    r"\bissues? ?#?[0-9]+|\bthe issue\b|\bsessions? [0-9]|\bshared/|DESIGN\.md|STYLE\.md|/work/|"
    r"#+ choices made|choices made where|where the issue|"
    r"\bas of (?:January|February|March|April|May|June|July|"
    r"August|September|October|November|December)\b|"
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December) 20[0-9]{2}|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b",
    re.IGNORECASE,
)


def _user_texts() -> list[Path]:
    texts = [*PAGES, *sorted((ROOT / "examples").rglob("*.py"))]
    texts += sorted((ROOT / "examples").rglob("*.ipynb"))
    texts += sorted((ROOT / "src").rglob("*.py"))
    texts += [
        *sorted((ROOT / "benchmarks").glob("*.py")),
        ROOT / "pyproject.toml",
        ROOT / "Makefile",
    ]
    return texts


def test_user_texts_do_not_speak_of_how_the_project_was_built() -> None:
    found = []
    for path in _user_texts():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _BUILD_TALK.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_benchmarks_page_is_a_results_page() -> None:
    assert len((ROOT / "docs" / "benchmarks.md").read_text().splitlines()) <= 400


def test_shipped_example_data_is_what_its_script_makes(tmp_path: Path) -> None:
    import pandas as pd

    spec = importlib.util.spec_from_file_location(
        "make_data", ROOT / "examples" / "data" / "make_data.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    write = module.write

    write(tmp_path)
    shipped = ROOT / "examples" / "data"
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert made == sorted(
        p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file() and p.suffix != ".py"
    )
    for name in made:
        if name.suffix == ".parquet":
            pd.testing.assert_frame_equal(
                pd.read_parquet(tmp_path / name), pd.read_parquet(shipped / name)
            )
        else:
            assert (tmp_path / name).read_text() == (shipped / name).read_text(), name


def test_a_background_command_runs_until_the_page_ends(start: Path, tmp_path: Path) -> None:
    text = (
        "```\n$ python -m http.server 8000 --bind 127.0.0.1 &\n"
        '$ python -c "import urllib.request as u; '
        "print(u.urlopen('http://127.0.0.1:8000/examples/data/new_flowers.csv').read()[:12])\"\n"
        "b'sepal_length'\n```\n"
    )
    assert _run_text(text, start, tmp_path / "a") == ""
    shown_wrong = text.replace("&\n", "&\nServing nothing\n")
    assert "printed other lines" in _run_text(shown_wrong, start, tmp_path / "b")


def test_every_block_with_a_command_is_run(start: Path, tmp_path: Path) -> None:
    for number, text in enumerate(
        [
            "```shell-session\n$ false\n```\n",
            "```\n$ echo one\none\n$ false\n```\n",
            "```text\n\n$ false\n```\n",
        ]
    ):
        assert "exited 1" in _run_text(text, start, tmp_path / str(number))


def test_text_before_the_first_command_of_a_session_is_refused() -> None:
    with pytest.raises(ValueError, match="text before the first command"):
        read_steps("```\n# make a bundle\n$ false\n```\n")


def test_a_python_block_compares_everything_it_prints(start: Path, tmp_path: Path) -> None:
    text = (
        "```python\nimport subprocess, sys, warnings\n"
        "subprocess.run(['echo', 'from a child'])\n"
        "warnings.warn('careful')\n"
        "print('from print')\n```\n"
        "```\nfrom a child\n<doc block>:3: UserWarning: careful\nfrom print\n```\n"
    )
    assert _run_text(text, start, tmp_path / "a") == ""
    report = _run_text(text.replace("from a child\n", ""), start, tmp_path / "b")
    assert "printed other lines" in report and "+from a child" in report
    report = _run_text(
        text.replace("<doc block>:3: UserWarning: careful\n", ""), start, tmp_path / "c"
    )
    assert "printed other lines" in report and "UserWarning: careful" in report


def test_a_python_block_cannot_disturb_the_harness(start: Path, tmp_path: Path) -> None:
    text = (
        "```python\nimport os\nos.write(1, b'partial')\n```\n```\npartial\n```\n\n"
        "```python\nprint('next')\n```\n```\nnext\n```\n"
    )
    assert _run_text(text, start, tmp_path / "a") == ""


def test_a_python_block_that_does_not_end_fails(
    start: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docs_support

    monkeypatch.setattr(docs_support, "COMMAND_TIMEOUT", 2)
    text = "```python\nimport time\nprint('waiting', flush=True)\ntime.sleep(60)\n```\n"
    report = _run_text(text, start, tmp_path / "a")
    assert "did not end within 2 s" in report and "+waiting" in report


def test_a_background_command_that_fails_fails(start: Path, tmp_path: Path) -> None:
    report = _run_text("```\n$ onnxbridge serve runs/nope &\n```\n", start, tmp_path / "a")
    assert "exited 2" in report
    later = "```\n$ (sleep 2; exit 3) &\n$ sleep 3\n```\n"
    assert "exited 3 before the page ended" in _run_text(later, start, tmp_path / "b")


def test_a_short_background_command_is_compared_when_it_has_printed(
    start: Path, tmp_path: Path
) -> None:
    text = "```\n$ (sleep 2; echo done) &\ndone\n$ true\n```\n"
    assert _run_text(text, start, tmp_path / "a") == ""
    assert "printed other lines" in _run_text(
        text.replace("done\n$", "finished\n$"), start, tmp_path / "b"
    )


def test_a_python_output_block_is_not_read_again() -> None:
    steps = read_steps("```python\nprint('onnxbridge 1.0')\n```\n```\nonnxbridge 1.0\n```\n")
    assert [(s.kind, s.expected) for s in steps] == [("python", ["onnxbridge 1.0"])]


def test_a_leading_blank_line_is_part_of_the_output(start: Path, tmp_path: Path) -> None:
    printed = "```\n$ printf '\\nerror: x\\n'\n\nerror: x\n```\n"
    assert _run_text(printed, start, tmp_path / "a") == ""
    report = _run_text(printed.replace("\n\nerror", "\nerror"), start, tmp_path / "b")
    assert "printed other lines" in report
    report = _run_text("```\n$ echo hi\n\nhi\n```\n", start, tmp_path / "c")
    assert "printed other lines" in report
