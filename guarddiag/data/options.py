"""The options of ``guarddiag data add``, ``data list`` and ``data pull``, declared once:
:class:`AddOptions`, :class:`ListOptions`, :class:`PullOptions`.

The command line's flags are generated from them; :func:`~guarddiag.data.add.add_file` takes
an :class:`AddOptions` whole (:func:`~guarddiag.data.add.add_benchmark` and
:func:`~guarddiag.data.add.add_labelled_benchmark` its fields by name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from guarddiag.typed import Model


class AddOptions(Model):
    """How one of the user's files is described as a benchmark (the file is the argument)."""

    subset_id: str
    """Benchmark id: lower-case letters, digits, _ and - (not a built-in id)."""
    text_column: str
    """Column holding the prompt text."""
    kind: Literal["harmful", "benign"] | None = None
    """What a guard should call every prompt of it (required unless label_column splits the
    file)."""
    label_column: str | None = None
    """Column holding each row's label: split the file into ID_harmful (rows with a
    harmful_values value) and ID_benign (rows with a benign_values value)."""
    harmful_values: tuple[str, ...] = ()
    """With label_column: the values that mean harmful (case and spaces ignored: Harmful,
    ' harmful ' and harmful are one value)."""
    benign_values: tuple[str, ...] = ()
    """With label_column: the values that mean benign; required when the column holds any
    other value, and a value in neither list is an error listing every value with its
    count."""
    whole_file: bool = False
    """Every row is kind even though a column looks like a per-row label (without it such a
    file is refused)."""
    category_column: str | None = None
    """Column holding a category (optional)."""
    id_column: str | None = None
    """Column holding unique prompt ids (unset: row numbers)."""
    response_column: str | None = None
    """Column holding a model's response to each prompt, for guards that read prompt +
    response (optional)."""
    title: str | None = None
    """A readable name (unset: the id)."""
    file_format: Literal["csv", "jsonl", "jsonl.gz", "json", "parquet", "lines"] | None = None
    """File format when the suffix does not say."""
    manifests_dir: Path | None = None
    """User manifests folder (unset: ``$GUARDDIAG_USER_MANIFESTS``, else
    ``$XDG_DATA_HOME/guarddiag/user_manifests``)."""
    replace: bool = False
    """Replace an earlier add under the same id (a changed file, another file or other
    options)."""


class ListOptions(Model):
    """Which subsets ``guarddiag data list`` checks, and how it prints them."""

    ids: str = "all,derived"
    """Subset ids and/or selectors, comma-separated: all (every base subset), study, extra
    (other built-in ones), user (added with data add), derived."""
    manifests_dir: Path | None = None
    """User manifests folder (unset: ``$GUARDDIAG_USER_MANIFESTS``, else
    ``$XDG_DATA_HOME/guarddiag/user_manifests``)."""
    as_json: bool = False
    """Print a JSON list of subset records instead of the table."""


class PullOptions(Model):
    """Which subsets ``guarddiag data pull`` (:func:`~guarddiag.data.pull.pull`) fetches, and
    from where."""

    ids: str = "all"
    """Subset ids and/or selectors, comma-separated: all (every base subset), study, extra
    (other built-in ones), user (added with data add), derived."""
    mirror: str | None = None
    """Fetch <URL>/<relative path> instead of the public sources: a copy of the data
    directory served over HTTP (unset: ``$GUARDDIAG_MIRROR``)."""
    timeout: float = Field(default=60.0, gt=0.0)
    """Seconds to wait for a server before giving up on a URL."""
