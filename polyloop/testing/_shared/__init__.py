"""The contract kit's shared room: what several seams' suites use — the suite base and
its catalogue, samples, skips, shapes, time limits, clocks, child processes and the Hypothesis
strategies. It imports no seam's package."""
