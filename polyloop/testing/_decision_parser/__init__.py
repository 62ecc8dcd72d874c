"""The decision parser's contract: its suite, the golden samples and the child parses of the
cross-process check."""
