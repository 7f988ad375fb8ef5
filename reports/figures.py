"""The run's timeline as one plotly figure: rates, latency, anomalies and faults over the run's
seconds, every nemesis step a labelled band across all of them (Jepsen's nemesis shading)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from checkers.messages import ABORTED
from reports.run_data import RunData

OUTCOME_SERIES = (  # a send's outcome (timeline.json) -> how the report names it, and its colour
    ("ok", "acknowledged sends/s", "#2e7d32"),
    ("fail", "refused sends/s", "#c62828"),
    ("info", "unknown sends/s", "#ef6c00"),
    # grey: the producer's own choice, neither a success nor the broker's refusal
    (ABORTED, "aborted sends/s", "#9e9e9e"),
)
ANOMALY_COLOURS = {"lost": "#c62828", "duplicated": "#6a1b9a", "reordered": "#8d6e63"}
BAND_COLOURS = ("#1565c0", "#00838f")  # alternate, so neighbouring steps stay apart
STEP_BAND_PREFIX = "step "  # shape names; the browser test counts them


def timeline_figure(run: RunData) -> go.Figure:
    timeline = run.timeline or {}
    fig = make_subplots(
        rows=5,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        row_heights=[0.26, 0.16, 0.2, 0.22, 0.16],
        subplot_titles=(
            "sends per second, by outcome",
            "deliveries per second, by reader group",
            "send latency, ms (acknowledged sends)",
            "lost, duplicated and reordered messages, at their ack time",
            "faults in effect, unavailability, leader and ISR changes",
        ),
    )
    _rates(fig, timeline)
    _latency(fig, timeline)
    _anomalies(fig, timeline)
    _windows(fig, run, timeline)
    _partition_states(fig, timeline.get("partition_states") or [])
    _step_bands(fig, timeline.get("steps") or [])
    fig.update_xaxes(title_text="seconds since the run's first event", row=5, col=1)
    fig.update_yaxes(type="log", row=3, col=1)
    fig.update_layout(
        height=1000,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        legend={"orientation": "h", "y": -0.08},
        hovermode="x unified",
        template="plotly_white",
    )
    return fig


def _rates(fig: go.Figure, timeline: dict[str, Any]) -> None:
    sends = timeline.get("sends") or []
    seconds = [row["second"] for row in sends]
    for outcome, name, colour in OUTCOME_SERIES:
        values = [row.get(outcome, 0) for row in sends]
        if outcome != "ok" and not any(values):
            continue
        fig.add_trace(
            go.Scatter(x=seconds, y=values, name=name, line={"color": colour}), row=1, col=1
        )
    for group, points in sorted((timeline.get("deliveries") or {}).items()):
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                name=f"received/s ({group})",
            ),
            row=2,
            col=1,
        )


def _latency(fig: go.Figure, timeline: dict[str, Any]) -> None:
    rows = timeline.get("sends") or []
    for key, name, colour in (("p50_ms", "p50", "#455a64"), ("p99_ms", "p99", "#b71c1c")):
        fig.add_trace(
            go.Scatter(
                x=[row["second"] for row in rows],
                # a log axis has no zero; a second with no ack is a gap in the line
                y=[None if row.get(key) is None else max(row[key], 0.1) for row in rows],
                name=f"latency {name}",
                line={"color": colour},
            ),
            row=3,
            col=1,
        )


def _anomalies(fig: go.Figure, timeline: dict[str, Any]) -> None:
    found = timeline.get("anomalies_at_ack") or {}
    if not any(found.values()):
        _note_in_row(fig, 4, "none")
    for metric, groups in found.items():
        for group, points in sorted(groups.items()):
            fig.add_trace(
                go.Bar(
                    x=[p[0] for p in points],
                    y=[p[1] for p in points],
                    name=f"{metric} ({group})",
                    marker_color=ANOMALY_COLOURS.get(metric),
                ),
                row=4,
                col=1,
            )


def _windows(fig: go.Figure, run: RunData, timeline: dict[str, Any]) -> None:
    """Fault windows and each producer's unavailable intervals as bars on rows of their own."""
    if not timeline.get("fault_windows") and not timeline.get("partition_states"):
        _note_in_row(fig, 5, "no fault")
    rows = [("faults in effect", timeline.get("fault_windows") or [], "#c62828")]
    unavailable = ((run.verdict or {}).get("unavailability")) or {}
    for producer, figures in sorted(unavailable.items()):
        spans = [
            [i["start"] - run.run_start, i["end"] - run.run_start]
            for i in figures.get("longest") or []
        ]
        rows.append((f"{producer} unavailable", spans, "#ef6c00"))
    for label, spans, colour in rows:
        xs: list[float | None] = []
        for start, end in spans:
            xs += [start, max(end, start + 0.2), None]  # a 0 s interval still shows
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[label if x is not None else None for x in xs],
                mode="lines",
                line={"color": colour, "width": 12},
                name=label,
                showlegend=False,
                connectgaps=False,
            ),
            row=5,
            col=1,
        )


def _partition_states(fig: go.Figure, states: list[dict[str, Any]]) -> None:
    """Kafka: each leader/ISR change clients were told of, a marker on its partition's row."""
    for partition in sorted({s["partition"] for s in states}):
        mine = [s for s in states if s["partition"] == partition]
        label = f"p{partition} leader/ISR"
        fig.add_trace(
            go.Scatter(
                x=[s["at"] for s in mine],
                y=[label] * len(mine),
                mode="markers",
                marker={"symbol": "diamond", "size": 9, "color": "#37474f"},
                hovertext=[
                    f"leader {s['leader'] or 'none'}, ISR {','.join(s['isr']) or 'empty'}"
                    f" (told by {s['answered_by'] or '?'})"
                    for s in mine
                ],
                hoverinfo="text+x",
                name=label,
                showlegend=False,
            ),
            row=5,
            col=1,
        )


def _note_in_row(fig: go.Figure, row: int, text: str) -> None:
    """Text in the middle of a row with nothing to draw: "nothing" is a finding too."""
    low, high = fig.layout[f"yaxis{row}"].domain
    fig.add_annotation(
        text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=(low + high) / 2
    )


def _step_bands(fig: go.Figure, steps: list[dict[str, Any]]) -> None:
    """One shaded band per nemesis step, across every row, numbered at the top."""
    for step in steps:
        colour = BAND_COLOURS[step["number"] % len(BAND_COLOURS)]
        fig.add_shape(
            type="rect",
            name=f"{STEP_BAND_PREFIX}{step['number']}",
            xref="x",
            yref="paper",
            x0=step["start"],
            x1=step["end"],
            y0=0,
            y1=1,
            fillcolor=colour,
            opacity=0.08,
            line_width=0,
            layer="below",
        )
        fig.add_annotation(
            x=step["start"],
            xref="x",
            y=0.995 - 0.02 * (step["number"] % 2),  # neighbours' numbers do not overlap
            yref="paper",
            text=str(step["number"]),
            showarrow=False,
            xanchor="left",
            yanchor="top",
            font={"size": 10, "color": colour},
            hovertext=step["label"],
        )
