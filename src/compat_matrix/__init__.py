'''compat-matrix: does an override of a transformers method still matter, release by release?

The API for probes of your own (a module named in a matrix file's `[matrix] probes`):

    from compat_matrix import probe

    @probe(exercises=("tie_weights",))
    def tied_after_resize(build):
        """What it observes, in a sentence or two."""
        instance = build()  # a fresh tiny instance of the variant under test
        instance.resize_token_embeddings(70)
        return {"tied": instance.get_output_embeddings().weight is instance.get_input_embeddings().weight}

`probe`, `Inconclusive`, `Build` (what a probe receives: `build()`, `build.cls`, `build.methods`), `ANY` (for
`exercises`: every audited method) and `preparation` are the whole of it; see compat_matrix.probes.
'''

from compat_matrix.probes import ANY, Build, Inconclusive, preparation, probe

__version__ = "0.1.0"
__all__ = ["ANY", "Build", "Inconclusive", "__version__", "preparation", "probe"]
