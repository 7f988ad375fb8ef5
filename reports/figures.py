"""The run's timeline as one plotly figure: rates, latency, anomalies and faults over the run's
seconds, every nemesis step a labelled band across all of them (Jepsen's nemesis shading)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.messages import ABORTED
from checkers.releases import nodes_words
from reports.run_data import RunData

if TYPE_CHECKING:
    import plotly.graph_objects as go

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
RELEASE_LINE_PREFIX = "release period "  # a line where a release period begins
RELEASE_COLOUR = "#4e342e"
# A trace as plain properties and its row: plotly validates each trace once, when the figure
# (whose template depends on the trace types) takes them all.
Trace = tuple[int, dict[str, Any]]


def timeline_figure(run: RunData) -> go.Figure:
    # plotly is imported here, where a figure is drawn: the runs' index imports this module
    # (through reports.html) and draws none, and importing plotly took it a tenth of a second.
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    timeline = run.timeline or {}
    traces = [
        *_rates(timeline),
        *_latency(timeline),
        *_anomalies(timeline),
        *_windows(run, timeline),
        *_partition_states(timeline.get("partition_states") or []),
    ]
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
        # The template given with the figure, not after: a figure made without one gets
        # plotly's default template first, copied only to be replaced.
        figure=go.Figure(layout={"template": _template({t["type"] for _, t in traces})}),
    )
    fig.add_traces(
        [trace for _, trace in traces], rows=[row for row, _ in traces], cols=[1] * len(traces)
    )
    notes: list[dict[str, Any]] = []
    if not any((timeline.get("anomalies_at_ack") or {}).values()):
        notes.append(_note_in_row(fig, 4, "none"))
    if not timeline.get("fault_windows") and not timeline.get("partition_states"):
        notes.append(_note_in_row(fig, 5, "no fault"))
    steps = timeline.get("steps") or []
    fig.update_xaxes(title_text="seconds since the run's first event", row=5, col=1)
    fig.update_yaxes(type="log", row=3, col=1)
    fig.update_layout(
        height=1000,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        legend={"orientation": "h", "y": -0.08},
        hovermode="x unified",
    )
    # All at once: add_shape and add_annotation validate every shape or annotation already
    # there again, and a run of 60 steps took two seconds. Assigned, not given to
    # update_layout, which walks the subplot titles' annotations property by property and took
    # ten times as long.
    periods = _release_periods(run)
    fig.layout.shapes = [
        *(_step_band(step) for step in steps),
        *(_release_line(p, run.run_start) for p in periods),
    ]
    fig.layout.annotations = [
        *fig.layout.annotations,
        *notes,
        *(_step_number(step) for step in steps),
        *(_release_label(p, run.run_start) for p in periods),
    ]
    return fig


def _template(trace_types: set[str]) -> dict[str, Any]:
    """plotly_white with only the trace defaults of the figure's own trace types: plotly.js
    applies a template's defaults to traces of their type alone, and validating those of all
    of plotly's trace types cost the first figure of a process a tenth of a second."""
    import plotly.io as pio

    template = pio.templates["plotly_white"].to_plotly_json()
    template["data"] = {k: v for k, v in template["data"].items() if k in trace_types}
    return template


def _trace(row: int, kind: str, **properties: Any) -> Trace:
    return row, {"type": kind, **properties}


def _rates(timeline: dict[str, Any]) -> list[Trace]:
    out = []
    sends = timeline.get("sends") or []
    seconds = [row["second"] for row in sends]
    for outcome, name, colour in OUTCOME_SERIES:
        values = [row.get(outcome, 0) for row in sends]
        if outcome != "ok" and not any(values):
            continue
        out.append(_trace(1, "scatter", x=seconds, y=values, name=name, line={"color": colour}))
    for group, points in sorted((timeline.get("deliveries") or {}).items()):
        out.append(
            _trace(
                2,
                "scatter",
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                name=f"received/s ({group})",
            )
        )
    return out


def _latency(timeline: dict[str, Any]) -> list[Trace]:
    rows = timeline.get("sends") or []
    return [
        _trace(
            3,
            "scatter",
            x=[row["second"] for row in rows],
            # a log axis has no zero; a second with no ack is a gap in the line
            y=[None if row.get(key) is None else max(row[key], 0.1) for row in rows],
            name=f"latency {name}",
            line={"color": colour},
        )
        for key, name, colour in (("p50_ms", "p50", "#455a64"), ("p99_ms", "p99", "#b71c1c"))
    ]


def _anomalies(timeline: dict[str, Any]) -> list[Trace]:
    return [
        _trace(
            4,
            "bar",
            x=[p[0] for p in points],
            y=[p[1] for p in points],
            name=f"{metric} ({group})",
            marker={"color": ANOMALY_COLOURS.get(metric)},
        )
        for metric, groups in (timeline.get("anomalies_at_ack") or {}).items()
        for group, points in sorted(groups.items())
    ]


def _windows(run: RunData, timeline: dict[str, Any]) -> list[Trace]:
    """Fault windows and each producer's unavailable intervals as bars on rows of their own."""
    rows = [("faults in effect", timeline.get("fault_windows") or [], "#c62828")]
    unavailable = ((run.verdict or {}).get("unavailability")) or {}
    for producer, figures in sorted(unavailable.items()):
        spans = [
            [i["start"] - run.run_start, i["end"] - run.run_start]
            for i in figures.get("longest") or []
        ]
        rows.append((f"{producer} unavailable", spans, "#ef6c00"))
    out = []
    for label, spans, colour in rows:
        xs: list[float | None] = []
        for start, end in spans:
            xs += [start, max(end, start + 0.2), None]  # a 0 s interval still shows
        out.append(
            _trace(
                5,
                "scatter",
                x=xs,
                y=[label if x is not None else None for x in xs],
                mode="lines",
                line={"color": colour, "width": 12},
                name=label,
                showlegend=False,
                connectgaps=False,
            )
        )
    return out


def _partition_states(states: list[dict[str, Any]]) -> list[Trace]:
    """Kafka: each leader/ISR change clients were told of, a marker on its partition's row."""
    out = []
    for partition in sorted({s["partition"] for s in states}):
        mine = [s for s in states if s["partition"] == partition]
        label = f"p{partition} leader/ISR"
        out.append(
            _trace(
                5,
                "scatter",
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
            )
        )
    return out


def _note_in_row(fig: go.Figure, row: int, text: str) -> dict[str, Any]:
    """Text in the middle of a row with nothing to draw: "nothing" is a finding too."""
    low, high = fig.layout[f"yaxis{row}"].domain
    return {
        "text": text,
        "showarrow": False,
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": (low + high) / 2,
    }


def _step_band(step: dict[str, Any]) -> dict[str, Any]:
    """A nemesis step's shaded band, across every row."""
    return {
        "type": "rect",
        "name": f"{STEP_BAND_PREFIX}{step['number']}",
        "xref": "x",
        "yref": "paper",
        "x0": step["start"],
        "x1": step["end"],
        "y0": 0,
        "y1": 1,
        "fillcolor": _band_colour(step),
        "opacity": 0.08,
        "line": {"width": 0},
        "layer": "below",
    }


def _step_number(step: dict[str, Any]) -> dict[str, Any]:
    """A nemesis step's number at the top of its band; its label on hover."""
    return {
        "x": step["start"],
        "xref": "x",
        "y": 0.995 - 0.02 * (step["number"] % 2),  # neighbours' numbers do not overlap
        "yref": "paper",
        "text": str(step["number"]),
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "top",
        "font": {"size": 10, "color": _band_colour(step)},
        "hovertext": step["label"],
    }


def _release_periods(run: RunData) -> list[dict[str, Any]]:
    """The release periods of a run that upgraded (checkers.releases) but the first: each
    begins where a node changed release or a feature was finalized."""
    section = (run.verdict or {}).get("releases") or {}
    return list(section.get("periods") or [])[1:]


def _release_line(period: dict[str, Any], run_start: float) -> dict[str, Any]:
    """Where a release period begins: a dotted line across every row."""
    x = period["start"] - run_start
    return {
        "type": "line",
        "name": f"{RELEASE_LINE_PREFIX}{period['number']}",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"color": RELEASE_COLOUR, "width": 1, "dash": "dot"},
        "layer": "below",
    }


def _release_label(period: dict[str, Any], run_start: float) -> dict[str, Any]:
    """A release period's cluster ("mixed", "all on 4.4.0") beside its line; who ran what on
    hover."""
    return {
        "x": period["start"] - run_start,
        "xref": "x",
        "y": 0.94,
        "yref": "paper",
        "text": f"R{period['number']} {period['kind']}",
        "textangle": -90,
        "showarrow": False,
        "xanchor": "right",
        "yanchor": "top",
        "font": {"size": 9, "color": RELEASE_COLOUR},
        "hovertext": f"release period {period['number']}: {nodes_words(period)}",
    }


def _band_colour(step: dict[str, Any]) -> str:
    return BAND_COLOURS[step["number"] % len(BAND_COLOURS)]
