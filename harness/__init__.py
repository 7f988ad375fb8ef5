"""brokerjepsen: a Jepsen-style fault-injection harness for message brokers."""

__version__ = "0.1.0"
