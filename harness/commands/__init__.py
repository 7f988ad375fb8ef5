"""The harness's commands, one module a group; harness.cli assembles them into the `harness`
app, and nothing here imports it."""
