"""The dual-policy training pool: public prompts labelled under policy A and policy B.

``build_pool`` reads the sources a recipe names, applies both policies as data, adds the
synthetic rows the recipe asks for (copyright-reproduction requests from title lists, COMPOUND
rows that join a benign instruction to a blocked request and record its character span,
jailbreak wrappers around benign requests), removes duplicates (equal
:func:`guarddiag.text.normalise` forms; the first source in recipe order wins), assigns
train/val/cal splits and measures how far the two policies agree.

Modules:

* :mod:`~guarddiag.pool.spec` - labelling policies and the keyword pillar tagger;
* :mod:`~guarddiag.pool.recipe` - the pool recipe (sources, titles, wrappers, constructions);
* :mod:`~guarddiag.pool.sources` - reading a source's pinned files into rows;
* :mod:`~guarddiag.pool.rows` - rows under construction: labelling, sampling, de-duplication;
* :mod:`~guarddiag.pool.synthetic` - the synthetic rows;
* :mod:`~guarddiag.pool.splits` - group-aware, stratified split assignment, and the train
  copies of multilingual val rows (``splits.multilingual_train_overlap``);
* :mod:`~guarddiag.pool.agreement` - agreement statistics (Cohen's κ, confusion);
* :mod:`~guarddiag.pool.build` - ``build_pool`` and ``load_pool``;
* :mod:`~guarddiag.pool.table` - the pool as training reads it, and its hash-ordered samples.

Example (CPU, well under a minute)::

    guarddiag pool build --out work/pool
"""

from guarddiag.pool.agreement import AgreementResult, agreement, cohen_kappa
from guarddiag.pool.build import PoolResult, build_pool, load_pool
from guarddiag.pool.recipe import Recipe, load_recipe
from guarddiag.pool.rows import POOL_SCHEMA

__all__ = ["POOL_SCHEMA", "AgreementResult", "PoolResult", "Recipe", "agreement", "build_pool",
           "cohen_kappa", "load_pool", "load_recipe"]
