"""The event sink's contract: its suite and the span-delivery probe."""
