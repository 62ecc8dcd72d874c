"""``downstream/`` is a project of its own: CI copies it out of the checkout and runs its
conformance job against polyloop installed from the built wheel (``.ci/run``; and
``tests/docs/test_downstream.py`` against the installed package). The main job leaves it out so
it is judged only as its users would run it, from its own directory."""

collect_ignore = ["downstream"]
