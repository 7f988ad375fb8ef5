"""Which fault did it: a checked run's anomalies tied to the fault step in effect at their
acknowledgement and to the node that acknowledged them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers.run import check_run
from tests.checkers.histories import event, recv, send, write

pytestmark = pytest.mark.spark


def test_losses_are_tied_to_the_fault_step_and_the_acking_node(spark: Any, tmp_path: Path) -> None:
    ev: list[dict[str, Any]] = []
    for seq in range(1, 11):
        ev += send("A", seq, seq, None)
        node = "rabbit1" if seq % 2 else "rabbit2"
        ev.append(event("A", "ok", "send", seq + 0.5, producer="A", seq=seq, stream="x", node=node))
    # Step 1 starts as seq 3 is acknowledged (at or before: it is in effect), step 2 at 7.5.
    ev.append(
        event(
            "nemesis",
            "invoke",
            "start-partition",
            3.5,
            value={"op": "isolate", "nodes": ["rabbit2"]},
        )
    )
    ev.append(event("nemesis", "ok", "start-partition", 3.6, value={"op": "isolate"}))
    ev.append(
        event("nemesis", "invoke", "leaders", 5.0, value={"label": "snapshot"})
    )  # not a fault
    ev.append(event("nemesis", "invoke", "stop-partition", 7.5, value={"op": "heal"}))
    ev += [recv("g", "A", seq, 100 + seq) for seq in (1, 2, 4, 6, 9)]
    write(tmp_path / "run" / "history", ev)
    verdict = check_run(tmp_path / "run", spark=spark)
    lost = verdict["attribution"]["lost"]["g"]
    assert lost["by_step"] == {
        "1. start-partition isolate rabbit2 at +2.5 s": 2,  # seq 3 and 5
        "2. stop-partition heal at +6.5 s": 3,  # seq 7, 8 and 10
    }
    assert lost["by_node"] == {"rabbit1": 3, "rabbit2": 2}
    summary = (tmp_path / "run" / "summary.txt").read_text()
    assert "lost in g by fault step: 1. start-partition isolate rabbit2 at +2.5 s: 2" in summary
