"""The contracts other tools read: the history (one JSON object per line, one file per process),
the run directory and its manifest, and the words a scenario states its promise in. Plain data
and files; imports nothing else of ours."""

VERSION = "0.1.0"  # the harness that wrote a run, recorded in its manifest
