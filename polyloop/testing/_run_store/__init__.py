"""The run store's contract: its suite by promise family, the crash writer, the power-loss
model and trace, the index and inline-commit probes, the store model and its state machine."""
