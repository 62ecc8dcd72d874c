"""The loop: ``run``/``resume`` (``_run``), the stopping order (``_stopping``, its one home),
the model history (``_history``), commit strategies (``_commit``) and event delivery
(``_delivery``). Imports the types and the stores; nothing below it imports it."""
