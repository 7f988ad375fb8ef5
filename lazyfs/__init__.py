"""A filesystem that loses what was not fsynced when the power goes (Jepsen's lazyfs, in ours)."""
