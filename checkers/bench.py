"""Checker benchmark: `make bench` prints seconds and memory per history size.

Synthetic histories (one producer pair, two groups, a sprinkling of loss, duplicates and
reorders) of growing size; figures only, no assertions.
"""

from __future__ import annotations

import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path

from checkers.spark import check_history, spark_session
from harness.history import FIELDS


def synth(history: Path, messages: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    history.mkdir(parents=True)
    base: dict = dict.fromkeys(FIELDS)
    lines = 0
    t = 1.7e9
    with open(history / "P.jsonl", "w") as send_fh:
        for seq in range(1, messages + 1):
            for type_ in ("invoke", "ok"):
                t += 0.0001
                send_fh.write(
                    json.dumps(
                        {
                            **base,
                            "time": t,
                            "process": "P",
                            "type": type_,
                            "f": "send",
                            "producer": "P",
                            "seq": seq,
                            "msg_id": f"P:{seq}",
                            "stream": "x",
                        }
                    )
                    + "\n"
                )
                lines += 1
    for group in ("g1", "g2"):
        with open(history / f"c-{group}.jsonl", "w") as fh:
            seqs = [s for s in range(1, messages + 1) if rng.random() > 0.001]
            for i in range(0, len(seqs) - 1, 997):
                seqs[i], seqs[i + 1] = seqs[i + 1], seqs[i]
            seqs += rng.sample(seqs, k=min(len(seqs), messages // 500))
            for seq in seqs:
                t += 0.0001
                fh.write(
                    json.dumps(
                        {
                            **base,
                            "time": t,
                            "process": f"c-{group}",
                            "type": "ok",
                            "f": "receive",
                            "producer": "P",
                            "seq": seq,
                            "msg_id": f"P:{seq}",
                            "group": group,
                            "stream": group,
                        }
                    )
                    + "\n"
                )
                lines += 1
    return lines


def main() -> None:
    sizes = [int(s) for s in os.environ.get("BENCH_SIZES", "10000,100000,300000").split(",")]
    spark = spark_session(os.environ.get("BENCH_MASTER", "local[*]"))
    print(f"{'messages':>10} {'lines':>10} {'MB':>8} {'seconds':>8} {'lines/s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        check_history(spark, _warm(Path(tmp)), Path(tmp) / "warm-ids")
        for n in sizes:
            history = Path(tmp) / f"h{n}"
            lines = synth(history, n)
            mb = sum(p.stat().st_size for p in history.iterdir()) / 1e6
            started = time.monotonic()
            result = check_history(spark, history, Path(tmp) / f"ids{n}", ["g1", "g2"])
            took = time.monotonic() - started
            print(
                f"{n:>10} {lines:>10} {mb:>8.1f} {took:>8.1f} {lines / took:>10.0f}"
                f"   lost g1={result.groups['g1']['lost']}"
            )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: python driver {rss:.0f} MB, Spark JVM {_jvm_peak_mb(spark)}")
    spark.stop()


def _jvm_peak_mb(spark: object) -> str:
    """The JVM's high-water mark from /proc (Linux); the JVM is not our child to rusage."""
    try:
        pid = spark.sparkContext._gateway.proc.pid  # type: ignore[attr-defined]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return f"{int(line.split()[1]) / 1024:.0f} MB"
    except (AttributeError, OSError, ValueError):
        pass
    return "unknown"


def _warm(tmp: Path) -> Path:
    history = tmp / "warm"
    synth(history, 100)
    return history


if __name__ == "__main__":
    main()
