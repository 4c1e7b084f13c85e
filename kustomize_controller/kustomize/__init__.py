"""From a source artifact to the objects to apply (download, extraction, generation, confinement,
kustomize build, decoding, post-build substitution).

Entry points live in the submodules — :mod:`.pipeline` (``BuildPipeline``, ``BuildOptions``,
``Decryptor``), :mod:`.errors` (the exception tree and the Ready reason of each error),
:mod:`.build` (builder discovery), :mod:`.fetch`, :mod:`.extract`, :mod:`.substitute`. This package
module imports nothing so that importing any one of them stays cheap.
"""
