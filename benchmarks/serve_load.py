"""Benchmark: ``onnxbridge serve`` under load, against MLServer serving the scikit-learn model.

Benchmark model: "the benchmark forest" of docs/benchmarks.md (RandomForestClassifier(
n_estimators=100, random_state=0) on make_classification(n_samples=20000, n_features=28,
n_informative=15, n_classes=2, random_state=0), fitted on the first 10 000 rows; requests carry
rows of the other 10 000). onnxbridge serves its ONNX conversion; the baseline, MLServer with its
scikit-learn runtime, serves the fitted estimator itself (saved with joblib in a temporary folder,
for MLServer only), measured in the same run.

Load: ``wrk`` (Debian package ``wrk``, one thread, a Lua script for the POST bodies) on
127.0.0.1 only, each scenario for ``--seconds``; every round runs every scenario on every server,
interleaved, so machine noise hits them alike. Scenarios: single-row requests at concurrency 1,
8 and 32 (JSON), single-row binary at 8, and 1 000-row requests at 8, JSON and binary (binary
tensor data extension; MLServer does not implement it, so it gets those rows as JSON). Reported:
medians over rounds of requests/s, rows/s, p50 and p99 latency, the server's CPU time per
request (its process tree, from psutil), with min-max, and the ratio onnxbridge / MLServer.

    .venv/bin/python benchmarks/serve_load.py [--rounds 3] [--seconds 5] [--workers 1]
        [--intra-op-threads N] [--inference-threads N] [--no-merge-requests]
        [--mlserver PATH] [--no-mlserver] [--json]
        [--scenarios 2,4]

Bounded: at most rounds × scenarios × servers × seconds of load, plus start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

SCENARIOS = [
    # name, rows per request, concurrency, binary
    ("1 row JSON, c=1", 1, 1, False),
    ("1 row JSON, c=8", 1, 8, False),
    ("1 row JSON, c=32", 1, 32, False),
    ("1 row binary, c=8", 1, 8, True),
    ("1000 rows JSON, c=8", 1000, 8, False),
    ("1000 rows binary, c=8", 1000, 8, True),
]
LUA = """
local f = io.open(os.getenv("BENCH_BODY"), "rb"); wrk.body = f:read("*a"); f:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = os.getenv("BENCH_TYPE")
local h = os.getenv("BENCH_HLEN")
if h ~= nil and h ~= "" then wrk.headers["Inference-Header-Content-Length"] = h end
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_ready(url: str, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}: {url}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"server not ready after {timeout} s: {url}")


def _build_models(tmp: Path) -> tuple[Path, Path, np.ndarray]:
    import joblib
    import pandas as pd
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    from onnxbridge import convert_estimator

    X, y = make_classification(
        n_samples=20000, n_features=28, n_informative=15, n_classes=2, random_state=0
    )
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(28)])
    model = RandomForestClassifier(n_estimators=100, random_state=0).fit(frame[:10000], y[:10000])
    converted = convert_estimator(model, frame[:100])
    ours = tmp / "onnx-repo" / "forest"
    ours.mkdir(parents=True)
    (ours / "model.onnx").write_bytes(converted.model.SerializeToString())
    theirs = tmp / "mlserver-models" / "forest"
    theirs.mkdir(parents=True)
    # The baseline needs the estimator itself; joblib (pickle) in our own temporary folder.
    joblib.dump(model.fit(X[:10000], y[:10000]), theirs / "model.joblib")
    (theirs / "model-settings.json").write_text(
        json.dumps(
            {
                "name": "forest",
                "implementation": "mlserver_sklearn.SKLearnModel",
                "parameters": {"uri": "./model.joblib"},
            }
        )
    )
    return ours.parent, theirs.parent, X[10000:]


def _bodies(tmp: Path, rows: np.ndarray) -> dict[tuple[str, int, bool], tuple[Path, str, str]]:
    """(server, rows, binary) -> (body file, content type, header length)."""
    out = {}
    for n in (1, 1000):
        block = rows[:n]
        for server, datatype, dtype in (("onnxbridge", "FP32", "<f4"), ("mlserver", "FP64", "<f8")):
            name = "input" if server == "onnxbridge" else "predict"
            payload = {
                "inputs": [
                    {
                        "name": name,
                        "datatype": datatype,
                        "shape": [n, 28],
                        "data": block.astype(dtype).ravel().tolist(),
                    }
                ]
            }
            path = tmp / f"{server}-{n}.json"
            path.write_text(json.dumps(payload))
            out[(server, n, False)] = (path, "application/json", "")
        raw = block.astype("<f4").tobytes()
        header = json.dumps(
            {
                "inputs": [
                    {
                        "name": "input",
                        "datatype": "FP32",
                        "shape": [n, 28],
                        "parameters": {"binary_data_size": len(raw)},
                    }
                ],
                "parameters": {"binary_data_output": True},
            }
        ).encode()
        path = tmp / f"onnxbridge-{n}.bin"
        path.write_bytes(header + raw)
        out[("onnxbridge", n, True)] = (path, "application/octet-stream", str(len(header)))
    return out


_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def _seconds(text: str) -> float:
    match = re.fullmatch(r"([0-9.]+)([a-z]+)", text)
    if match is None:
        return float("nan")
    return float(match.group(1)) * _UNIT[match.group(2)]


def _wrk(url: str, body: tuple[Path, str, str], conns: int, seconds: float, lua: Path) -> dict:
    env = {
        **os.environ,
        "BENCH_BODY": str(body[0]),
        "BENCH_TYPE": body[1],
        "BENCH_HLEN": body[2],
    }
    result = subprocess.run(
        ["wrk", "-t1", f"-c{conns}", f"-d{int(seconds)}s", "--latency", "-s", str(lua), url],
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    out = result.stdout
    if "Requests/sec" not in out or " 99%" not in out:
        raise SystemExit(f"cannot read wrk's output:\n{out}\n{result.stderr}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1)),  # type: ignore[union-attr]
        # Anchored at the start of a line: the thread stats' "+/- Stdev" column ("90.50%")
        # also contains "50%".
        "p50": _seconds(re.search(r"(?m)^\s+50%\s+(\S+)", out).group(1)),  # type: ignore[union-attr]
        "p99": _seconds(re.search(r"(?m)^\s+99%\s+(\S+)", out).group(1)),  # type: ignore[union-attr]
        "non2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": errors.group(1) if errors else "",
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its children (uvicorn workers)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _check_answers(servers: dict[str, str], bodies: dict) -> None:
    """One request of each kind must succeed before timing."""
    for (server, n, binary), (path, ctype, hlen) in bodies.items():
        if server not in servers:
            continue
        headers = {"Content-Type": ctype}
        if hlen:
            headers["Inference-Header-Content-Length"] = hlen
        response = httpx.post(
            servers[server], content=path.read_bytes(), headers=headers, timeout=60
        )
        if response.status_code != 200:
            raise SystemExit(
                f"{server} {n} rows binary={binary}: {response.status_code} {response.text[:300]}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1, help="onnxbridge serve --workers")
    parser.add_argument("--intra-op-threads", type=int, default=None)
    parser.add_argument("--inference-threads", type=int, default=None)
    parser.add_argument(
        "--no-merge-requests", action="store_true", help="onnxbridge serve --no-merge-requests"
    )
    parser.add_argument(
        "--mlserver",
        default=shutil.which("mlserver") or "mlserver",
        help="the mlserver command, installed in its own environment [default: found on PATH]",
    )
    parser.add_argument("--no-mlserver", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--scenarios",
        default=None,
        help="comma-separated scenario numbers to run (1-6, in the order above; default: all)",
    )
    args = parser.parse_args()
    if args.scenarios:
        picked = [int(i) - 1 for i in args.scenarios.split(",")]
        SCENARIOS[:] = [SCENARIOS[i] for i in picked]
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    use_mlserver = not args.no_mlserver and Path(args.mlserver).exists()

    processes: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        repo, mlserver_models, rows = _build_models(tmp)
        bodies = _bodies(tmp, rows)
        lua = tmp / "post.lua"
        lua.write_text(LUA)
        try:
            port = _free_port()
            command = [
                sys.executable,
                "-m",
                "onnxbridge._cli.main",
                "serve",
                str(repo),
                "--port",
                str(port),
                "--workers",
                str(args.workers),
            ]
            if args.intra_op_threads:
                command += ["--intra-op-threads", str(args.intra_op_threads)]
            if args.inference_threads:
                command += ["--inference-threads", str(args.inference_threads)]
            if args.no_merge_requests:
                command.append("--no-merge-requests")
            processes.append(subprocess.Popen(command, stderr=subprocess.DEVNULL))
            servers = {"onnxbridge": f"http://127.0.0.1:{port}/v2/models/forest/infer"}
            pids = {"onnxbridge": processes[-1].pid}
            _wait_ready(f"http://127.0.0.1:{port}/v2/health/ready", processes[-1])
            if use_mlserver:
                mport = _free_port()
                (mlserver_models / "settings.json").write_text(
                    json.dumps(
                        {
                            "host": "127.0.0.1",
                            "http_port": mport,
                            "grpc_port": _free_port(),
                            "metrics_port": _free_port(),
                            "debug": False,
                        }
                    )
                )
                processes.append(
                    subprocess.Popen(
                        [args.mlserver, "start", str(mlserver_models)],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                servers["mlserver"] = f"http://127.0.0.1:{mport}/v2/models/forest/infer"
                pids["mlserver"] = processes[-1].pid
                _wait_ready(f"http://127.0.0.1:{mport}/v2/models/forest/ready", processes[-1])
            _check_answers(servers, bodies)
            results: dict[tuple[str, str], list[dict]] = {}
            for round_ in range(args.rounds):
                for scenario, n, conns, binary in SCENARIOS:
                    for server, url in servers.items():
                        key = (server, n, binary and server == "onnxbridge")
                        before = _cpu_seconds(pids[server])
                        run = _wrk(url, bodies[key], conns, args.seconds, lua)
                        run["rows_per_s"] = run["rps"] * n
                        # Server CPU per request (its whole process tree): steadier than
                        # requests/s on a shared machine, where other work takes cores away.
                        run["cpu_us"] = (
                            (_cpu_seconds(pids[server]) - before)
                            / max(1.0, run["rps"] * args.seconds)
                            * 1e6
                        )
                        results.setdefault((scenario, server), []).append(run)
                        print(
                            f"round {round_ + 1} {scenario:<22} {server:<10} "
                            f"{run['rps']:>9.0f} req/s p99 {run['p99'] * 1e3:7.2f} ms"
                            f" {run['cpu_us']:6.1f} us CPU/req"
                            + (f" NON-2XX {run['non2xx']}" if run["non2xx"] else ""),
                            file=sys.stderr,
                        )
        finally:
            for process in processes:
                process.send_signal(signal.SIGINT)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    load = os.getloadavg()
    summary = _summarise(results, servers)
    if args.json:
        print(json.dumps({"load_average": load, "scenarios": summary}, indent=2))
        return
    _print(summary, args, load)


def _summarise(results: dict, servers: dict) -> list[dict]:
    rows = []
    for scenario, n, conns, binary in SCENARIOS:
        entry = {"scenario": scenario, "rows": n, "concurrency": conns, "binary": binary}
        for server in servers:
            runs = results[(scenario, server)]
            for field in ("rps", "rows_per_s", "p50", "p99", "cpu_us"):
                # wrk sometimes prints no value for a percentile: leave that round out
                values = [r[field] for r in runs if r[field] == r[field]] or [float("nan")]
                entry[f"{server}_{field}"] = statistics.median(values)
                entry[f"{server}_{field}_range"] = (min(values), max(values))
            entry[f"{server}_non2xx"] = sum(r["non2xx"] for r in runs)
        if "mlserver" in servers:
            ratios = [
                a["rps"] / b["rps"]
                for a, b in zip(
                    results[(scenario, "onnxbridge")], results[(scenario, "mlserver")], strict=True
                )
            ]
            entry["ratio"] = statistics.median(ratios)
            entry["ratio_range"] = (min(ratios), max(ratios))
        rows.append(entry)
    return rows


def _print(summary: list[dict], args: argparse.Namespace, load: tuple[float, ...]) -> None:
    servers = ["onnxbridge"] + (["mlserver"] if "mlserver_rps" in summary[0] else [])
    print(
        f"benchmark forest (100 trees, 28 features), {args.rounds} rounds x {args.seconds:g} s, "
        f"wrk -t1, onnxbridge --workers {args.workers} --intra-op-threads "
        f"{args.intra_op_threads or 'default'} --inference-threads "
        f"{args.inference_threads or 'default'}"
        + (" --no-merge-requests" if args.no_merge_requests else "")
        + f", {os.cpu_count()} cores, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )
    print("medians over rounds [min-max]")
    for entry in summary:
        print(f"\n{entry['scenario']}" + (" (MLServer: JSON)" if entry["binary"] else ""))
        for server in servers:
            lo, hi = entry[f"{server}_rps_range"]
            p99lo, p99hi = entry[f"{server}_p99_range"]
            line = (
                f"  {server:<10} {entry[f'{server}_rps']:>8.0f} req/s [{lo:.0f}-{hi:.0f}]"
                f"  {entry[f'{server}_rows_per_s']:>9.0f} rows/s"
                f"  p50 {entry[f'{server}_p50'] * 1e3:6.2f} ms"
                f"  p99 {entry[f'{server}_p99'] * 1e3:6.2f} ms"
                f" [{p99lo * 1e3:.2f}-{p99hi * 1e3:.2f}]"
                f"  server CPU {entry[f'{server}_cpu_us']:6.1f} us/req"
            )
            if entry[f"{server}_non2xx"]:
                line += f"  NON-2XX: {entry[f'{server}_non2xx']}"
            print(line)
        if "ratio" in entry:
            lo, hi = entry["ratio_range"]
            print(f"  onnxbridge / MLServer: {entry['ratio']:.1f}x [{lo:.1f}-{hi:.1f}]")


if __name__ == "__main__":
    main()
