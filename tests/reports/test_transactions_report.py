"""The report's transactions section: what read_committed groups saw wrong, the commits of
fenced instances, the exactly-once copy and the dependency cycles, and verdicts with less."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from reports.write import write_run_reports
from tests.reports.pages import checked_run, section

# The outcome counts of a transactions section, as two report tests share them.
SIXTY_TRANSACTIONS = {
    "transactions": 60,
    "committed": 50,
    "aborted": 8,
    "planned_aborts": 7,
    "unknown": 2,
    "unknown_seen_committed": 1,
}


def test_report_names_the_transactions_a_read_committed_group_saw_wrong(tmp_path: Path) -> None:
    zero = {"aborted_reads": 0, "aborted_read_txns": 0, "torn": 0}
    transactions = {
        **SIXTY_TRANSACTIONS,
        "open_in_faults": 5,
        "commits_in_faults": 2,
        "commits_across_coordinator_moves": 1,
        "clients": {"P1": "java kafka-clients 4.4.0"},
        "groups": {
            "committed": {
                "isolation": "read_committed",
                "aborted_reads": 2,
                "aborted_read_txns": 1,
                "torn": 1,
                "lost_txns": 1,
            },
            "uncommitted": {"isolation": "read_uncommitted"} | zero,
        },
        "samples": {
            "aborted_reads": [
                {
                    "group": "committed",
                    "msg_id": "P1:111",
                    "txn": "P1:t12",
                    "partition": 0,
                    "offset": 47,
                },
                {
                    "group": "committed",
                    "msg_id": "P1:112",
                    "txn": "P1:t12",
                    "partition": 1,
                    "offset": 9,
                },
            ],
            "torn": [
                {
                    "group": "committed",
                    "txn": "P1:t3",
                    "read": 3,
                    "missed": 1,
                    "missed_ids": ["P1:9"],
                }
            ],
            "lost": [
                {
                    "group": "committed",
                    "txn": "P1:t3",
                    "records": 4,
                    "lost": 1,
                    "lost_ids": ["P1:9"],
                }
            ],
        },
    }
    report, _ = write_run_reports(checked_run(tmp_path / "T2" / "t1", transactions))
    html = report.read_text()
    assert "<h2>Transactions</h2>" in html
    assert section(html, "p", "transactions-summary").startswith(
        "60 transactions: 50 committed, 8 aborted (7 of them planned by their producer), "
        "2 of unknown outcome (1 of them seen committed by a read_committed reader)."
    )
    assert section(html, "p", "transactions-in-faults") == (
        "While a fault was in effect, 5 transactions were open and 2 had their commit (EndTxn) "
        "in flight; 1 were committing when the broker coordinating their client (its transaction "
        "coordinator, or a copier's group coordinator) moved."
    )
    assert section(html, "p", "transactions-clients") == "Written by P1: java kafka-clients 4.4.0."
    table = section(html, "table", "transactions")
    assert (
        '<td>committed</td><td>read_committed</td><td class="n">2</td><td class="n">1</td>'
        '<td class="n">1</td><td class="n">1</td>' in table
    )
    assert (
        'href="ids/committed/aborted_reads.txt"' in table
        and 'href="ids/committed/torn.txt"' in table
        and 'href="ids/committed/lost_txns.txt"' in table
    )
    # The checker never counts a read_uncommitted group: its zeros are not a clean bill.
    assert "<td>read_uncommitted</td>" + '<td class="n">-</td>' * 4 in table
    assert "ids/uncommitted/" not in table
    assert "read_uncommitted group is expected to read aborted records" in html
    aborted = section(html, "ul", "transaction-aborted-reads")
    assert aborted.count("<li>") == 2
    assert (
        "<code>P1:t12</code> (aborted): record <code>P1:111</code> at <code>0@47</code>" in aborted
    )
    torn = section(html, "ul", "transaction-torn")
    assert "(committed): group committed read 3 of its records and missed 1" in torn
    assert torn.count("<li>") == 1 and "<code>P1:t3</code>" in torn and "<code>P1:9</code>" in torn
    lost = section(html, "ul", "transaction-lost")
    assert lost.count("<li>") == 1
    assert (
        "transaction <code>P1:t3</code> (committed, 4 records): group committed never received "
        "1 of them: <code>P1:9</code></li>" in lost
    )
    # Plain transactional producers: no copy, and a checker that did not look for cycles.
    assert "exactly-once copy" not in html and "Dependency cycles" not in html
    assert 'id="transactions-copy' not in html and 'id="transactions-cycles' not in html
    assert "ids/copied_twice.txt" not in html and "ids/cycles.txt" not in html
    # A checker before the fencing counts said nothing of them: nothing is shown.
    assert 'id="transactions-fencing"' not in html


def test_report_names_the_commits_of_fenced_instances(tmp_path: Path) -> None:
    zombie = {
        "producer": "P1",
        "txn": "P1:t601",
        "transactional_id": "shared",
        "asked": 1040.25,
        "fenced_by": "P2",
        "fenced_at": 1025.5,
        "outcome": "ok",
        "seen": True,
    }
    transactions = {
        **SIXTY_TRANSACTIONS,
        "fenced_open": 2,
        "fenced_while_paused": 1,
        "fenced_commits": 3,
        "zombie_commits": 1,
        "groups": {},
        "samples": {"zombie_commits": [zombie]},
    }
    report, _ = write_run_reports(checked_run(tmp_path / "T3" / "t1", transactions))
    html = report.read_text()
    assert section(html, "p", "transactions-fencing") == (
        "Fencing: 2 transactions were open when a newer instance of their transactional id "
        "initialised (1 of them while their client was paused); 3 commits were asked by an "
        "instance after a newer instance of its "
        "transactional id had initialised (fencing it); 1 of them took effect (zombie commits: "
        'acknowledged, or read by a read_committed group): <a href="ids/zombie_commits.txt">'
        "ids/zombie_commits.txt</a>."
    )
    zombies = section(html, "ul", "transaction-zombie-commits")
    assert (
        "<li>transaction <code>P1:t601</code> of P1 (ok, read by a read_committed group): its "
        "commit asked 14.750 s after P2 initialised <code>shared</code></li>" in zombies
    )
    clean = transactions | {"zombie_commits": 0, "samples": {"zombie_commits": []}}
    report, _ = write_run_reports(checked_run(tmp_path / "T3" / "t2", clean))
    html = report.read_text()
    assert section(html, "p", "transactions-fencing").endswith(
        "; 0 of them took effect (zombie commits: acknowledged, or read by a read_committed group)."
    )
    assert 'id="transaction-zombie-commits"' not in html


def ww(src: str, dst: str, partition: int, offset: int, msg_id: str, to_msg_id: str) -> dict:
    """A ww edge of a cycle: src's write at partition@offset just before dst's at offset + 1."""
    where = {"stream": "in", "partition": partition, "to_stream": "in", "to_partition": partition}
    return where | {
        "src": src,
        "dst": dst,
        "kind": "ww",
        "offset": offset,
        "msg_id": msg_id,
        "to_offset": offset + 1,
        "to_msg_id": to_msg_id,
    }


def copy_and_cycles() -> dict[str, Any]:
    """A transactions section with an exactly-once copy and dependency cycles (checkers.eos,
    checkers.cycles): 4 cycles, of which the report lists 3."""
    zero = {"aborted_reads": 0, "aborted_read_txns": 0, "torn": 0}
    g0 = {
        "kind": "G0",
        "transactions": ["P1:t4", "P2:t9"],
        "edges": [
            ww("P1:t4", "P2:t9", 0, 41, "P1:40", "P2:88"),
            ww("P2:t9", "P1:t4", 1, 17, "P2:89", "P1:41"),
        ],
    }
    wr = {
        "src": "P1:t5",
        "dst": "C1:t2",
        "kind": "wr",
        "stream": "in",
        "partition": 2,
        "offset": 7,
        "msg_id": "P1:50",
        "to_stream": "in-copy",
        "to_partition": 2,
        "to_offset": 3,
        "to_msg_id": "P1:50",
    }
    g1c = {
        "kind": "G1c",
        "transactions": ["C1:t2", "P1:t5"],
        "edges": [ww("C1:t2", "P1:t5", 2, 5, "P1:48", "P1:51"), wr],
    }
    other = {"kind": "G0", "transactions": ["P3:t1", "P4:t1"], "edges": []}
    late = {"kind": "G0", "transactions": ["P8:t1", "P9:t1"], "edges": []}
    return {
        "transactions": 40,
        "committed": 36,
        "aborted": 3,
        "planned_aborts": 2,
        "unknown": 1,
        "unknown_seen_committed": 1,
        "clients": {"C1": "confluent-kafka 2.16.1"},
        "groups": {"copied": {"isolation": "read_committed"} | zero},
        "samples": {"aborted_reads": [], "torn": []},
        "copy": {
            "copies": {"committed": 1234, "aborted": 56, "unknown": 7},
            "unknown_seen_committed": 1,
            "copied_twice": 2,
            "never_copied": 3,
            "input_duplicates": 4,
            "output_duplicates_from_input": 4,
            "samples": {
                "copied_twice": [
                    {
                        "msg_id": "P1:17",
                        "txns": ["C1:t3", "C2:t8"],
                        "from_stream": "in",
                        "from_partition": 1,
                        "from_offset": 33,
                    },
                    {
                        "msg_id": "P1:18",
                        "txns": ["C1:t3", "C2:t8"],
                        "from_stream": "in",
                        "from_partition": 1,
                        "from_offset": 34,
                    },
                ],
                "never_copied": ["P1:90", "P1:91", "<P1:92>"],
                "input_duplicates": ["P1:60", "P1:61", "P1:62", "P1:63"],
            },
        },
        "cycles": {
            "G0": 3,
            "G1c": 1,
            "transactions": 35,
            "edges": {"ww": 60, "wr": 12},
            "samples": [g0, g1c, other, late],
        },
    }


def test_report_shows_the_exactly_once_copy_and_the_dependency_cycles(tmp_path: Path) -> None:
    report, _ = write_run_reports(checked_run(tmp_path / "T1" / "t1", copy_and_cycles()))
    html = report.read_text()
    assert section(html, "p", "transactions-copy") == (
        "The exactly-once copy: 1234 copies committed, 56 aborted, 7 of unknown outcome (1 of "
        "their transactions seen committed by a read_committed reader: their copies count as "
        "committed)."
    )
    copy = section(html, "table", "transactions-copy-counts")
    assert copy.count("<tr>") == 4  # a header, then copied twice, never copied, input's twice
    for name, count, file in [
        ("copied twice", 2, "ids/copied_twice.txt"),
        ("never copied", 3, "ids/never_copied.txt"),
        ("written twice by their producer", 4, "ids/input_duplicates.txt"),
    ]:
        assert f'<td>{name}</td><td class="n">{count}</td>' in copy
        assert f'<a href="{file}">{file}</a>' in copy
    assert "the copy&#39;s duplicate" in copy and "no committed transaction copied" in copy
    assert "the verdict does not count against the copy" in copy
    # Every value is escaped: a msg_id is the history's, not the page's markup.
    assert "<code>P1:90, P1:91, &lt;P1:92&gt;</code>" in copy and "<P1:92>" not in html
    assert "<code>P1:60, P1:61, P1:62, P1:63</code>" in copy
    assert section(html, "p", "transactions-copy-input-duplicates").startswith(
        "The output holds 4 of the input's duplicates twice"
    )
    twice = section(html, "ul", "transaction-copied-twice")
    assert twice.count("<li>") == 2
    assert (
        "record <code>P1:17</code> read at <code>in/1@33</code>, copied by <code>C1:t3</code>, "
        "<code>C2:t8</code>" in twice
    )

    cycles = section(html, "p", "transactions-cycles")
    assert cycles.startswith("Dependency cycles between the 35 committed transactions")
    assert "(60 ww edges" in cycles and "12 wr edges" in cycles
    assert "G0 is a write cycle: two committed transactions whose writes two partitions" in cycles
    counts = section(html, "table", "transactions-cycles-counts")
    assert '<td>G0 (write cycle)</td><td class="n">3</td>' in counts
    assert '<td>G1c (cyclic information flow)</td><td class="n">1</td>' in counts
    assert '<a href="ids/cycles.txt">ids/cycles.txt</a>' in counts
    listed = section(html, "ul", "transaction-cycles")
    assert listed.count("<li>") == 3 and "P8:t1" not in listed  # the first 3; cycles.txt: all
    first, second, third = re.findall(r"<li>(.*?)</li>", listed, re.S)
    assert first.startswith("G0: <code>P1:t4</code> → <code>P2:t9</code> → <code>P1:t4</code>")
    assert (
        "<code>P1:t4</code>'s record at <code>in/0@41</code> (<code>P1:40</code>) just "
        "before <code>P2:t9</code>'s at <code>in/0@42</code> (<code>P2:88</code>) (ww)"
    ) in first
    assert "<code>in/1@17</code> (<code>P2:89</code>)" in first
    assert second.startswith("G1c: <code>C1:t2</code> → <code>P1:t5</code> → <code>C1:t2</code>")
    assert (
        "<code>C1:t2</code> copied <code>P1:t5</code>'s record at <code>in/2@7</code> "
        "(<code>P1:50</code>) to <code>in-copy/2@3</code> (wr)"
    ) in second
    assert third == "G0: <code>P3:t1</code> → <code>P4:t1</code> → <code>P3:t1</code>"


def test_report_of_an_older_copy_verdict_shows_only_what_it_holds(tmp_path: Path) -> None:
    """A verdict from before the input's duplicates were counted apart, and before cycles."""
    transactions = copy_and_cycles()
    del transactions["cycles"]
    for key in ("unknown_seen_committed", "input_duplicates", "output_duplicates_from_input"):
        del transactions["copy"][key]
    del transactions["copy"]["samples"]["input_duplicates"]
    report, _ = write_run_reports(checked_run(tmp_path / "T1" / "t1", transactions))
    html = report.read_text()
    assert section(html, "p", "transactions-copy").endswith("7 of unknown outcome.")
    copy = section(html, "table", "transactions-copy-counts")
    assert copy.count("<tr>") == 3 and "ids/never_copied.txt" in copy
    assert "input_duplicates" not in html and "written twice by their producer" not in html
    assert "Dependency cycles" not in html and "ids/cycles.txt" not in html
    # A checker that looked and found no cycle: the counts, and no list.
    transactions["cycles"] = copy_and_cycles()["cycles"] | {"G0": 0, "G1c": 0, "samples": []}
    run_dir = checked_run(tmp_path / "T1" / "t2", transactions)
    html = write_run_reports(run_dir)[0].read_text()
    assert '<td>G0 (write cycle)</td><td class="n">0</td>' in html
    assert "ids/cycles.txt" in html and 'id="transaction-cycles"' not in html


def test_report_of_a_run_without_transactions_has_no_such_section(tmp_path: Path) -> None:
    run_dir = checked_run(tmp_path / "K4" / "r1", None)
    report, _ = write_run_reports(run_dir)
    assert "Transactions" not in report.read_text()
    # A verdict from before the transactions check has no such key at all.
    verdict = json.loads((run_dir / "verdict.json").read_text())
    del verdict["transactions"]
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    report, _ = write_run_reports(run_dir)
    assert "Transactions" not in report.read_text() and 'id="transaction' not in report.read_text()
    assert "ids/cycles.txt" not in report.read_text()
    assert "exactly-once copy" not in report.read_text()


def test_report_says_how_an_unknown_transaction_was_judged(tmp_path: Path) -> None:
    """A transaction whose client never learnt its outcome, judged committed because a
    read_committed group saw it: torn says so, and one read past unseen by another group is
    its own finding."""
    zero = {"aborted_reads": 0, "aborted_read_txns": 0, "torn": 0}
    torn = {"group": "C", "txn": "P1:t7", "outcome": "info", "evidence": "seen committed by C",
            "read": 2, "missed": 1, "missed_ids": ["P1:71"]}  # fmt: skip
    missed = {"group": "D", "txn": "P1:t8", "outcome": "info", "evidence": "seen committed by C",
              "read": 0, "missed": 3, "missed_ids": ["P1:80", "P1:81", "P1:82"]}  # fmt: skip
    transactions = {
        **SIXTY_TRANSACTIONS,
        "unknown_missed": 1,
        "groups": {
            "C": {"isolation": "read_committed"} | zero | {"torn": 1},
            "D": {"isolation": "read_committed"} | zero,
        },
        "samples": {"aborted_reads": [], "torn": [torn], "unknown_missed": [missed]},
    }
    html = write_run_reports(checked_run(tmp_path / "T2" / "t2", transactions))[0].read_text()
    assert "(committed: seen committed by C): group C read 2" in section(
        html, "ul", "transaction-torn"
    )
    assert section(html, "p", "transactions-unknown-missed").startswith("1 transactions of unknown")
    unseen = section(html, "ul", "transaction-unknown-missed")
    assert "<code>P1:t8</code> (seen committed by C): group D read past 3" in unseen
