"""The checker: reads a run's history with PySpark and writes its verdict."""
