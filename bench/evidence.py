"""What keeping the brokers' evidence costs a run: `make bench-evidence` reads the run folders
under a results root (RESULTS, default results/) and prints, per run that has evidence/, the
seconds its collection added before teardown (copying the data files, decoding them, asking the
nodes) and the bytes it left in the run's folder, beside the targets (TARGET_SECONDS per run,
TARGET_BYTES per folder by default: a failing run's data archive is counted apart, it is kept
on purpose).

Figures from real runs, not a timed test: the runs are whatever the results root holds (a
`make test` run, a hunt, a nightly), and the median and worst of each system are printed.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contract.rundir import EVIDENCE, EVIDENCE_INDEX, MANIFEST

TARGET_SECONDS = 15.0
TARGET_BYTES = 50 * 2**20
DATA_ARCHIVE_GLOB = "*-data.tar.zst"


@dataclass(frozen=True)
class EvidenceCost:
    run: str  # <scenario>/<run-id>
    system: str
    nodes: int
    seconds: float
    decoded_bytes: int  # everything in evidence/ but the raw data archives
    data_bytes: int  # the raw data archives a run that found something keeps

    @property
    def within(self) -> bool:
        return self.seconds <= TARGET_SECONDS and self.decoded_bytes <= TARGET_BYTES


def _size(paths: Iterator[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def cost_of(run_dir: Path) -> EvidenceCost | None:
    """The evidence cost of one run folder, or None when it kept no evidence index."""
    evidence = run_dir / EVIDENCE
    try:
        index = json.loads((evidence / EVIDENCE_INDEX).read_text())
    except (OSError, ValueError):
        return None
    try:
        system = str(json.loads((run_dir / MANIFEST).read_text()).get("system", "?"))
    except (OSError, ValueError):
        system = "?"
    data = _size(evidence.glob(DATA_ARCHIVE_GLOB))
    return EvidenceCost(
        run=f"{run_dir.parent.name}/{run_dir.name}",
        system=system,
        nodes=len(index.get("nodes", [])),
        seconds=float(index.get("seconds", 0.0)),
        decoded_bytes=_size(evidence.rglob("*")) - data,
        data_bytes=data,
    )


def costs_under(root: Path) -> list[EvidenceCost]:
    """Every run folder's cost under a results root (<scenario>/<run-id>/), oldest first."""
    found = (cost_of(p.parent) for p in sorted(root.glob(f"*/*/{EVIDENCE}")))
    return [c for c in found if c is not None]


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def table(costs: list[EvidenceCost]) -> list[str]:
    lines = [
        f"{'run':44} {'system':9} {'nodes':>5} {'seconds':>8} {'MiB kept':>9} {'MiB data':>9}  "
        f"within",
    ]
    for c in costs:
        lines.append(
            f"{c.run:44} {c.system:9} {c.nodes:>5} {c.seconds:>8.1f} {_mib(c.decoded_bytes):>9} "
            f"{_mib(c.data_bytes):>9}  {'yes' if c.within else 'NO'}"
        )
    for system in sorted({c.system for c in costs}):
        of = [c for c in costs if c.system == system]
        seconds = [c.seconds for c in of]
        kept = [c.decoded_bytes for c in of]
        lines.append(
            f"{system}: {len(of)} runs; seconds median {statistics.median(seconds):.1f}, worst "
            f"{max(seconds):.1f} (target {TARGET_SECONDS:.0f}); MiB kept median "
            f"{_mib(statistics.median(kept))}, worst {_mib(max(kept))} (target "
            f"{_mib(TARGET_BYTES)}); {sum(not c.within for c in of)} over a target"
        )
    return lines


def main() -> int:
    root = Path(os.environ.get("RESULTS", "results"))
    costs = costs_under(root)
    if not costs:
        print(f"bench-evidence: no run with evidence under {root}/ (set RESULTS=...)")
        return 2
    print("\n".join(table(costs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
