"""Deliberately broken overrides of the gradient checkpointing switches, one or more per probe, one for the advice
per method, and two controls.

Each broken class breaks one thing the probes observe. Its base implementation (the broken method deleted) is
`Reference`: CharacterCausalLMWrapper's forwarding overrides, made to accept every argument that any release
passes, so it works on every release and the probes must report `differs` wherever the break shows. The
controls change nothing and must stay `same`. `selfcheck.toml` names, per class, where `differs` is expected and
which probe observations must show it; the tests and `nox -s selfcheck` hold the suite to it.
"""

from __future__ import annotations

from functools import partial

from torch.utils.checkpoint import checkpoint  # bound in this module: the kwargs spy must see calls through it
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.utils import logging
from utf8_tokenizer.char_causal_lm import CharacterCausalLMWrapper

logger = logging.get_logger(__name__)


class Reference(CharacterCausalLMWrapper):
    """The working reference: both switches forward everything to the wrapped model."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs, **kwargs)

    def gradient_checkpointing_disable(self):
        self.model.gradient_checkpointing_disable()


def _layers(model):
    return [m for m in model.modules() if m is not model and getattr(m, "_gradient_checkpointing_func", None)]


def _decoder_layers(model):
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


class DropsKwargs(Reference):
    """Enables checkpointing on the wrapped model but forgets the caller's kwargs."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.model.gradient_checkpointing_enable()


class FlagsWrapperOnly(Reference):
    """Sets the wrapper's own flag, which an aggregate `is_gradient_checkpointing` would also report.

    Takes any keyword, so that on every version the Trainer path reaches it and trains with the layers off.
    """

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.gradient_checkpointing = True


class NeverRecomputes(Reference):
    """Flags every layer, but the layers call their forward directly: nothing is checkpointed or recomputed."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)
        for layer in _layers(self.model):
            layer._gradient_checkpointing_func = lambda function, *args, **kwargs: function(*args)


class CutsGraph(Reference):
    """Checkpoints every layer, but detaches each layer's input: no gradient flows back between layers."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)
        for layer in _layers(self.model):
            checkpointed = layer._gradient_checkpointing_func

            def detached(function, *args, checkpointed=checkpointed, **kwargs):
                args = [a.detach() if hasattr(a, "detach") else a for a in args]
                return checkpointed(function, *args, **kwargs)

            layer._gradient_checkpointing_func = detached


class DisableDoesNothing(Reference):
    """Disabling leaves every layer checkpointed."""

    def gradient_checkpointing_disable(self):
        pass


class InventsDefaultKwargs(Reference):
    """Passes kwargs of its own when the caller gives none: `use_reentrant=True`, the 4.x default. Harmless on
    4.x, a different checkpoint on 5.x, whose default is `use_reentrant=False`."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        invented = gradient_checkpointing_kwargs or {"use_reentrant": True}
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=invented, **kwargs)


class RefusesReentrantInventsKwargs(Reference):
    """Refuses `use_reentrant=True` with a `raise` of its own, as adapters' does, and gives torch's checkpoint
    `preserve_rng_state=False` when the caller gives no kwargs. The refusal is its own decision, but what it invents
    breaks a contract the base keeps: never Keep."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        given = dict(gradient_checkpointing_kwargs or {"preserve_rng_state": False})
        if given.get("use_reentrant"):
            raise ValueError("use_reentrant=True is not supported: this wrapper needs a context_fn")
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=given, **kwargs)


class ForcesReentrant(Reference):
    """Rewrites the caller's kwargs: `use_reentrant` is always True, whatever was asked for."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        kwargs = {**(gradient_checkpointing_kwargs or {}), "use_reentrant": True}
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


class EnablesOnce(Reference):
    """An idempotency guard: a later enable is ignored, with other kwargs too and after a disable, so the kwargs a
    `Trainer` passes never arrive on a model the user had enabled before."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        if getattr(self, "_checkpointing_enabled", False):
            return
        self._checkpointing_enabled = True
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)


class DisableLeavesModelFlag(Reference):
    """Disabling turns every decoder layer off but leaves the decoder's own flag on, so `is_gradient_checkpointing`
    still reads True afterwards (and `Trainer` decides accordingly)."""

    def gradient_checkpointing_disable(self):
        for layer in _decoder_layers(self.model):
            layer.gradient_checkpointing = False


class DropsNewArguments(Reference):
    """Accepts the arguments that newer releases pass to the switch (`every_n_layers`, `offload`, …) and drops
    them: the same as the base where no such arguments exist."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)


class WarnsOnEnable(Reference):
    """Enables correctly, and warns once through the library's transformers-style logger (`warning_once`), like a
    notice left behind by a refactor: users see a warning the base implementation never gives."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        logger.warning_once("gradient checkpointing is applied to the wrapped model only")
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs, **kwargs)


class BindsOwnCheckpointDropsKwargs(Reference):
    """Binds a `checkpoint` imported into its own module for every layer, without the caller's kwargs: only a spy
    that sees every caller of torch's checkpoint function can tell."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs, **kwargs)
        for layer in _layers(self.model):
            layer._gradient_checkpointing_func = partial(checkpoint, use_reentrant=False)


class DisablesOnlyItsOwnEnable(Reference):
    """Disable undoes only an enable of its own (a mark that its enable sets), and `get_input_embeddings` returns
    the wrapped model's. With all three deleted, the round trip agrees with the shipped class; with only `enable`
    deleted, the layers stay on after a disable. Advice per method must come from running that variant."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        super().gradient_checkpointing_enable(gradient_checkpointing_kwargs, **kwargs)
        self.enabled_here = True

    def gradient_checkpointing_disable(self):
        if getattr(self, "enabled_here", False):
            super().gradient_checkpointing_disable()
            self.enabled_here = False

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()


class EnablesWhereItsAccessorIsOwn(Reference):
    """An identity check, as libraries write `type(self).x is not Base.x`: enable turns checkpointing on only where
    `get_input_embeddings` is overridden (it returns what the inherited one does). With all three deleted, or none,
    checkpointing works; with `get_input_embeddings` alone deleted, enable does nothing, in probes where
    `get_input_embeddings` itself never runs. Deleting it is not safe, and only its per-name variant can tell."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        if type(self).get_input_embeddings is not CharacterCausalLMWrapper.get_input_embeddings:
            super().gradient_checkpointing_enable(gradient_checkpointing_kwargs, **kwargs)

    def gradient_checkpointing_disable(self):
        super().gradient_checkpointing_disable()

    def get_input_embeddings(self):
        return self.char_embedding


# --- controls: correct overrides that must stay `same` ---------------------------------------------------------


class ForwardsToParent(Reference):
    """Control: both switches only forward to the parent's."""

    def gradient_checkpointing_enable(self, *args, **kwargs):
        return super().gradient_checkpointing_enable(*args, **kwargs)

    def gradient_checkpointing_disable(self, *args, **kwargs):
        return super().gradient_checkpointing_disable(*args, **kwargs)


class BindsOwnCheckpoint(Reference):
    """Control: binds a partial of a `checkpoint` imported into its own module, with the caller's kwargs, for
    every layer. Correct; a spy that watched only transformers' names would read it as "drops kwargs"."""

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs, **kwargs)
        if gradient_checkpointing_kwargs:
            for layer in _layers(self.model):
                layer._gradient_checkpointing_func = partial(checkpoint, **gradient_checkpointing_kwargs)
