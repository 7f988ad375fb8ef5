"""brokerjepsen: a Jepsen-style fault-injection harness for message brokers."""

from contract import VERSION as __version__

__all__ = ["__version__"]
