"""The engine: the imperative shell around the pure core. It is the single writer of scheduling state."""
