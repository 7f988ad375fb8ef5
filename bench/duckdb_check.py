"""The checker's definitions in DuckDB SQL: what `make bench` times `harness check` against.

Benchmark-only (DuckDB is the `bench` extra): it answers the same questions from the same files
— every per-group count with its ids written to a file, the observed log's counts, the reader and
producer anomalies, and lost messages by fault step — so the two can be timed and their answers
compared. The definitions themselves are stated once, in checkers.queries; this restates them in
SQL for the comparison and is checked against them by the bench. It does not validate lines: the
synthetic histories it reads are well formed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.verdict import METRICS
from contract.rundir import MANIFEST

COLUMNS = {
    "time": "DOUBLE",
    "process": "VARCHAR",
    "type": "VARCHAR",
    "f": "VARCHAR",
    "stream": "VARCHAR",
    "group": "VARCHAR",
    "producer": "VARCHAR",
    "seq": "BIGINT",
    "msg_id": "VARCHAR",
    "partition": "BIGINT",
    "offset": "BIGINT",
    "node": "VARCHAR",
    "error": "VARCHAR",
    "value": "JSON",
    "redelivered": "BOOLEAN",
}

# Each statement builds one table; its name is what it counts (checkers.queries has the words).
_TABLES = {
    "files": "SELECT file, min(rowid) AS first FROM raw GROUP BY file",
    "ev": "SELECT raw.* EXCLUDE (filename), raw.rowid - files.first + 1 AS line "
    "FROM raw JOIN files USING (file)",
    "outcomes": "SELECT msg_id, CASE max(CASE type WHEN 'ok' THEN 3 WHEN 'fail' THEN 2 "
    "WHEN 'info' THEN 1 ELSE 0 END) WHEN 3 THEN 'ok' WHEN 2 THEN 'fail' ELSE 'info' END AS outcome "
    "FROM ev WHERE f = 'send' GROUP BY msg_id",
    "acked": "SELECT msg_id FROM outcomes WHERE outcome = 'ok'",
    "invoked": "SELECT DISTINCT msg_id FROM ev WHERE f = 'send' AND type = 'invoke'",
    "recv": 'SELECT coalesce("group", stream) AS grp, '
    "coalesce(msg_id, '?' || file || ':' || line) AS msg_id, process, stream, producer, seq, "
    'partition, "offset", time, file, line, redelivered, '
    "json_extract_string(value, '$.death') IS NOT NULL AS dead FROM ev "
    "WHERE f = 'receive' AND type = 'ok'",
    "per_msg": "SELECT grp, msg_id, count(*) AS deliveries, count(*) FILTER (WHERE dead) AS dead "
    "FROM recv GROUP BY grp, msg_id",
    "m_acked": "SELECT grp, msg_id FROM groups CROSS JOIN acked",
    "m_received": "SELECT grp, msg_id FROM per_msg",
    "m_lost": "SELECT grp, msg_id FROM m_acked ANTI JOIN per_msg USING (grp, msg_id)",
    "m_duplicated": "SELECT grp, msg_id FROM per_msg WHERE deliveries > 1",
    "m_unexpected": "SELECT grp, msg_id FROM per_msg ANTI JOIN invoked USING (msg_id)",
    "m_recovered": "SELECT grp, msg_id FROM per_msg SEMI JOIN "
    "(SELECT msg_id FROM outcomes WHERE outcome <> 'ok') USING (msg_id)",
    "m_dead_lettered": "SELECT grp, msg_id FROM per_msg WHERE dead > 0",
    "m_both": "SELECT grp, msg_id FROM per_msg WHERE dead > 0 AND deliveries > dead",
    "m_unflagged": "SELECT DISTINCT grp, msg_id FROM recv QUALIFY row_number() OVER "
    "(PARTITION BY grp, msg_id ORDER BY time, file, line) > 1 AND redelivered = false "
    "AND NOT dead",
    "first_seen": "SELECT * FROM recv QUALIFY row_number() OVER "
    "(PARTITION BY grp, msg_id ORDER BY time, file, line) = 1",
    "m_reordered": "SELECT grp, msg_id FROM first_seen QUALIFY seq < max(seq) OVER "
    "(PARTITION BY grp, producer, partition ORDER BY time, file, line "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)",
    "placed": "SELECT * FROM ev WHERE type = 'ok' AND f IN ('send', 'receive') "
    'AND partition IS NOT NULL AND "offset" IS NOT NULL',
    "ack_positions": 'SELECT msg_id, stream, partition, "offset" FROM placed '
    "WHERE f = 'send' QUALIFY row_number() OVER "
    '(PARTITION BY msg_id ORDER BY stream, partition, "offset") = 1',
    "highest": 'SELECT grp, stream, partition, max("offset") AS highest FROM recv '
    'WHERE "offset" IS NOT NULL AND partition IS NOT NULL GROUP BY ALL',
    "m_unseen": "SELECT l.grp, l.msg_id FROM m_lost l JOIN ack_positions a USING (msg_id) "
    "LEFT JOIN highest h ON h.grp = l.grp AND h.stream = a.stream AND h.partition = a.partition "
    'WHERE h.highest IS NULL OR a."offset" > h.highest',
    "observed": 'SELECT DISTINCT stream, partition, "offset", msg_id FROM placed '
    "WHERE msg_id IS NOT NULL",
    "positions": 'SELECT stream, partition, "offset", lead("offset") OVER '
    '(PARTITION BY stream, partition ORDER BY "offset") AS next_offset FROM '
    '(SELECT DISTINCT stream, partition, "offset" FROM placed)',
    "pairs": 'SELECT process, stream, partition, a, "offset" AS b FROM (SELECT *, '
    'lag("offset") OVER (PARTITION BY process, stream, partition ORDER BY file, line) AS a '
    "FROM placed WHERE f = 'receive') WHERE a IS NOT NULL",
}

_COUNTS = {
    "positions": "SELECT count(*) FROM positions",
    "inconsistent_offsets": "SELECT count(*) FROM (SELECT 1 FROM observed "
    'GROUP BY stream, partition, "offset" HAVING count(*) > 1)',
    "duplicate_offsets": "SELECT count(*) FROM (SELECT 1 FROM observed GROUP BY stream, msg_id "
    "HAVING count(*) > 1)",
}

_PER_PROCESS = {
    "poll_skips": "SELECT process, count(*) FROM pairs p JOIN positions n "
    'ON n.stream = p.stream AND n.partition = p.partition AND n."offset" = p.a '
    "WHERE p.b > p.a AND n.next_offset < p.b GROUP BY process",
    "nonmonotonic_polls": "SELECT process, count(*) FROM pairs WHERE b <= a GROUP BY process",
    "nonmonotonic_sends": 'SELECT producer, count(*) FROM (SELECT producer, "offset", '
    'lag("offset") OVER (PARTITION BY producer, stream, partition ORDER BY seq) AS previous '
    "FROM placed WHERE f = 'send' AND producer IS NOT NULL) "
    'WHERE previous IS NOT NULL AND "offset" <= previous GROUP BY producer',
}

_LOST_BY_STEP = (
    "WITH steps AS (SELECT time AS start, lead(time) OVER (ORDER BY time, file, line) AS stop, "
    "row_number() OVER (ORDER BY time, file, line) AS step FROM ev "
    "WHERE process = 'nemesis' AND type = 'invoke' AND f <> 'leaders'), "
    "acks AS (SELECT msg_id, min(time) AS ack_time FROM ev WHERE f = 'send' AND type = 'ok' "
    "GROUP BY msg_id) "
    "SELECT l.grp, s.step, count(*) FROM m_lost l LEFT JOIN acks a USING (msg_id) "
    "LEFT JOIN steps s ON a.ack_time >= s.start AND (s.stop IS NULL OR a.ack_time < s.stop) "
    "GROUP BY ALL"
)


def check(history_dir: Path, ids_dir: Path, expected_groups: list[str]) -> dict[str, Any]:
    """The bench's answers: counts per group (ids written under ids_dir), log counts, readers,
    producers, and lost per fault step number (0: before any fault)."""
    import duckdb

    con = duckdb.connect()
    files = sorted(str(p) for p in history_dir.glob("*.jsonl"))
    con.execute(
        "CREATE TEMP TABLE raw AS SELECT *, regexp_extract(filename, '[^/]*$') AS file FROM "
        "read_json($files, columns = $columns, format = 'newline_delimited', filename = true)",
        {"files": files, "columns": COLUMNS},
    )
    groups = sorted(
        {
            g
            for (g,) in con.execute(
                'SELECT DISTINCT coalesce("group", stream) FROM raw '
                "WHERE f = 'receive' AND type = 'ok'"
            ).fetchall()
        }
        | set(expected_groups)
    )
    con.execute("CREATE TEMP TABLE groups (grp VARCHAR)")
    con.executemany("INSERT INTO groups VALUES (?)", [(g,) for g in groups])
    for name, sql in _TABLES.items():
        con.execute(f"CREATE TEMP TABLE {name} AS {sql}")
    counts = {g: dict.fromkeys(METRICS, 0) for g in groups}
    for metric in METRICS:
        for g, n in _write_ids(con, metric, ids_dir):
            counts[g][metric] = n
    log = {name: con.execute(sql).fetchall()[0][0] for name, sql in _COUNTS.items()}
    per_process = {name: dict(con.execute(sql).fetchall()) for name, sql in _PER_PROCESS.items()}
    lost_by_step: dict[str, dict[int, int]] = {}
    for g, step, n in con.execute(_LOST_BY_STEP).fetchall():
        lost_by_step.setdefault(g, {})[step or 0] = n
    con.close()
    return {"groups": counts, "log": log, "per_process": per_process, "lost_by_step": lost_by_step}


def _write_ids(con: Any, metric: str, ids_dir: Path) -> list[tuple[str, int]]:
    """ids/<group>/<metric>.txt in natural order (producer, then seq as a number)."""
    out = []
    for (g,) in con.execute("SELECT grp FROM groups").fetchall():
        target = ids_dir / g / f"{metric}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        con.execute(
            f"COPY (SELECT msg_id FROM m_{metric} WHERE grp = $g ORDER BY "
            "regexp_extract(msg_id, '^(.*):\\d+$', 1), "
            "TRY_CAST(regexp_extract(msg_id, ':(\\d+)$', 1) AS BIGINT), msg_id) "
            f"TO '{target}' (FORMAT csv, HEADER false, QUOTE '')",
            {"g": g},
        )
        n = con.execute(f"SELECT count(*) FROM m_{metric} WHERE grp = $g", {"g": g}).fetchone()
        out.append((g, n[0] if n else 0))
    return out


def main(argv: list[str]) -> int:
    """python -m bench.duckdb_check RUN_DIR OUT.json (the bench runs it in its own process)."""
    import json

    run, out = Path(argv[0]), Path(argv[1])
    manifest = json.loads((run / MANIFEST).read_text())
    answers = check(run / "history", run / "ids-duckdb", manifest.get("groups") or [])
    out.write_text(json.dumps(answers, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
