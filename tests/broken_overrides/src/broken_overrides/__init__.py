"""Deliberately broken overrides of CharacterCausalLMWrapper, one or more per probe.

Each class breaks one thing the probes observe. Its base implementation (the broken method deleted) is the
wrapper's own, working override, so the probe must report `differs`. `CATCHES` says which probe and which of
its observations must tell each one apart; the tests and `nox -s selfcheck` hold the suite to it.
"""

from __future__ import annotations

from utf8_tokenizer.char_causal_lm import CharacterCausalLMWrapper


def _layers(model):
    return [m for m in model.modules() if m is not model and getattr(m, "_gradient_checkpointing_func", None)]


class DropsKwargs(CharacterCausalLMWrapper):
    """Enables checkpointing on the wrapped model but forgets the caller's kwargs."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.model.gradient_checkpointing_enable()


class FlagsWrapperOnly(CharacterCausalLMWrapper):
    """Sets the wrapper's own flag, which an aggregate `is_gradient_checkpointing` would also report.

    Takes any keyword, so that on every version the Trainer path reaches it and trains with the layers off.
    """

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.gradient_checkpointing = True


class NeverRecomputes(CharacterCausalLMWrapper):
    """Flags every layer, but the layers call their forward directly: nothing is checkpointed or recomputed."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)
        for layer in _layers(self.model):
            layer._gradient_checkpointing_func = lambda function, *args, **kwargs: function(*args)


class CutsGraph(CharacterCausalLMWrapper):
    """Checkpoints every layer, but detaches each layer's input: no gradient flows back between layers."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)
        for layer in _layers(self.model):
            checkpointed = layer._gradient_checkpointing_func

            def detached(function, *args, checkpointed=checkpointed, **kwargs):
                args = [a.detach() if hasattr(a, "detach") else a for a in args]
                return checkpointed(function, *args, **kwargs)

            layer._gradient_checkpointing_func = detached


class DisableDoesNothing(CharacterCausalLMWrapper):
    """Disabling leaves every layer checkpointed."""

    def gradient_checkpointing_disable(self):
        pass


# class name -> the (probe, observation) pairs that must differ from the base implementation on every version
CATCHES = {
    "DropsKwargs": [("kwargs_forwarded", "forwarded")],
    "FlagsWrapperOnly": [
        ("enable_reaches_wrapped_model", "layers_on"),
        ("entry_points", "gradient_checkpointing_enable"),
        ("trainer_step", "layers_on_during_step"),
    ],
    "NeverRecomputes": [("backward_through_checkpointed_model", "recomputed_layers")],
    "CutsGraph": [("backward_through_checkpointed_model", "grads_match_plain")],
    "DisableDoesNothing": [("disable_round_trip", "layers_on"), ("entry_points", "gradient_checkpointing_disable")],
}
