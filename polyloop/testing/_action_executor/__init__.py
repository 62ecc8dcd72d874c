"""The action executor's contract: its suite, its call sequences and its cancellation and
leak probes."""
