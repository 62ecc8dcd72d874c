"""ScriptedModel keeps every promise of the model-client contract."""

from __future__ import annotations

import pytest

from polyloop.models import ScriptedModel
from polyloop.testing import ModelClientContract, ModelSamples
from polyloop.types import Message

SCRIPTED_SAMPLES = ModelSamples(
    messages=[
        Message(role="system", content="You are a careful agent."),
        Message(role="user", content="List the files."),
    ],
    # A scripted model never reaches the endpoint; its failure is a script that has run out of
    # replies, which must raise, not answer.
    failing_client_factory=lambda base_url: ScriptedModel([]),
    failure_bound_s=1.0,
    # It reads no response body at all: its replies are the script's strings.
    no_wire_format=True,
)


class TestScriptedModelContract(ModelClientContract):
    @pytest.fixture
    def model_client(self) -> ScriptedModel:
        # The samples hold no assistant message, so every call answers with reply 0.
        return ScriptedModel(["ACT ls", "FINAL done"])

    @pytest.fixture
    def model_samples(self) -> ModelSamples:
        return SCRIPTED_SAMPLES
