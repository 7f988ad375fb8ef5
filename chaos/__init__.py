"""Generated fault schedules (seeded, replayable), and the shrinking of a schedule that broke
an invariant down to the fewest steps that still break it."""
