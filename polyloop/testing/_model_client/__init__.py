"""The model client's contract: its suite, the failure catalogue and the misbehaving HTTP
server it is judged against."""
