"""The predictions table: the one hand-off every analysis and report reads.

One row per (run, benchmark, prompt). Branch runs, the TF-IDF baseline and outside guards all
write this same shape, so every analysis treats them alike.

=====================  ========  ==========================================================
column                 dtype     meaning
=====================  ========  ==========================================================
run_id                 str       ``<size>/<branch>/seed=<s>`` for branches; ``guard/<name>``
                                 for outside guards; ``baseline/<name>/seed=<s>``
guard_kind             str       ``branch`` | ``baseline`` | ``outside``
branch                 str       branch name (``E1`` … ``reference``) or guard name
size                   str       model size (``micro`` … ``large``); guard kind otherwise
seed                   i64?      training seed; null for outside guards
label_policy           str       label policy the run was trained on (``A``, ``B``, a mix
                                 such as ``A25+B75``, or ``outside``)
role                   str?      the branch's roles (:mod:`guarddiag.roles`): ``teacher``,
route                  str?      ``reference``, ``student`` or ``control``; the route of its
last_policy            str?      last label signal; that signal's policy (``A``/``B``); its
teacher                str?      teacher, the branch it is a control for, the branch it is a
control_of             str?      variant of. Null for baselines and outside guards (a file
variant_of             str?      without these columns reads as all null)
benchmark              str       benchmark subset id, or ``pool_val`` for the pool's val split
prompt_id              str       id of the prompt within its benchmark
p_GENERIC_SAFE …       f64?      class probabilities (null when the guard gives none)
p_COMPOUND
p_unsafe               f64?      P(unsafe) under the *loose* mapping (HARMFUL + COMPOUND);
                                 null only when ``status`` is ``failed``
pred_class             str?      argmax class (null when the guard gives no classes)
survives_decontam      bool      the prompt is in the benchmark's decontaminated subset
status                 str       ``ok`` | ``failed`` (an outside guard whose output could
                                 not be parsed; never silently read as safe)
=====================  ========  ==========================================================
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.files import read_table
from guarddiag.labels import CLASSES, LOOSE, PROB_COLUMNS, BinaryMapping
from guarddiag.paths import RunsFolder
from guarddiag.protocol import protocol
from guarddiag.roles import POLICIES, ROLE_COLUMNS, ROLE_KINDS, ROLE_SCHEMA, ROUTES

KEY: tuple[str, ...] = ("run_id", "benchmark", "prompt_id")

SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "guard_kind": pl.String(),
    "branch": pl.String(),
    "size": pl.String(),
    "seed": pl.Int64(),
    "label_policy": pl.String(),
    **ROLE_SCHEMA,
    "benchmark": pl.String(),
    "prompt_id": pl.String(),
    **{col: pl.Float64() for col in PROB_COLUMNS},
    "p_unsafe": pl.Float64(),
    "pred_class": pl.String(),
    "survives_decontam": pl.Boolean(),
    "status": pl.String(),
}
COLUMNS: tuple[str, ...] = tuple(SCHEMA)
OWN_DECONTAM = "survives_own_decontam"
"""An outside guard's optional extra column: the prompt survives the audit of the guard's own
training data (null where that audit was not run). Not part of :data:`SCHEMA`: ``validate``
drops it, and ``survives_decontam`` stays the pool audit's flag every run shares."""
GUARD_KINDS = ("branch", "baseline", "outside")
STATUSES = ("ok", "failed")
_PROB_TOL = 1e-4


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def _missing(df: pl.DataFrame) -> list[str]:
    """Required columns ``df`` lacks (the role columns are optional: absent, they are null)."""
    return [c for c in COLUMNS if c not in df.columns and c not in ROLE_COLUMNS]


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """Select the schema's columns in order and cast them to the schema's dtypes (absent role
    columns come out null)."""
    missing = _missing(df)
    if missing:
        raise GuarddiagError(f"predictions: missing column(s) {', '.join(missing)}")
    return df.select([(pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c)
                      for c, t in SCHEMA.items()])


def validate(df: pl.DataFrame, *, source: str = "predictions",
             same_prompt_sets: bool = False) -> pl.DataFrame:
    """Check a predictions table and return it conformed to the schema.

    Raises a one-line :class:`GuarddiagError` for missing columns, duplicate keys, probabilities
    outside [0, 1], class probabilities that do not sum to 1, unknown classes, kinds or statuses,
    and (with ``same_prompt_sets``) runs that cover different prompts of the same benchmark.
    """
    missing = _missing(df)
    if missing:
        raise GuarddiagError(
            f"{source}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}"
        )
    try:
        df = conform(df)
    except pl.exceptions.PolarsError as exc:
        raise GuarddiagError(f"{source}: a column has the wrong type ({exc})") from None

    dup = df.group_by(KEY).len().filter(pl.col("len") > 1)
    if dup.height:
        row = dup.row(0, named=True)
        raise GuarddiagError(
            f"{source}: {dup.height} duplicate key(s) (run_id, benchmark, prompt_id), first "
            f"{row['run_id']!r} / {row['benchmark']!r} / {row['prompt_id']!r}"
        )
    for col in (*PROB_COLUMNS, "p_unsafe"):
        bad = df.filter(pl.col(col).is_not_null() & ~pl.col(col).is_between(0.0, 1.0))
        if bad.height:
            row = bad.row(0, named=True)
            raise GuarddiagError(
                f"{source} column {col}: {bad.height} value(s) outside [0, 1], first "
                f"{row[col]!r} at run {row['run_id']!r} prompt {row['prompt_id']!r}"
            )
    has_probs = df.filter(pl.all_horizontal([pl.col(c).is_not_null() for c in PROB_COLUMNS]))
    if has_probs.height:
        total = pl.sum_horizontal([pl.col(c) for c in PROB_COLUMNS])
        bad = has_probs.filter((total - 1.0).abs() > _PROB_TOL)
        if bad.height:
            row = bad.row(0, named=True)
            raise GuarddiagError(
                f"{source}: class probabilities of {bad.height} row(s) do not sum to 1, first "
                f"at run {row['run_id']!r} prompt {row['prompt_id']!r}"
            )
    for col, allowed in (("pred_class", CLASSES), ("guard_kind", GUARD_KINDS),
                         ("status", STATUSES), ("role", ROLE_KINDS), ("route", ROUTES),
                         ("last_policy", POLICIES)):
        bad = df.filter(pl.col(col).is_not_null() & ~pl.col(col).is_in(list(allowed)))
        if bad.height:
            raise GuarddiagError(
                f"{source} column {col}: value {bad[col][0]!r} is not one of "
                f"{', '.join(allowed)}"
            )
    bad = df.filter((pl.col("status") == "ok") & pl.col("p_unsafe").is_null())
    if bad.height:
        raise GuarddiagError(f"{source}: {bad.height} row(s) with status ok but no p_unsafe, "
                             f"first at run {bad['run_id'][0]!r}")
    if same_prompt_sets:
        check_same_prompt_sets(df, source=source)
    return df


def check_same_prompt_sets(df: pl.DataFrame, *, source: str = "predictions") -> None:
    """Every run must cover the same prompts of each benchmark it scores."""
    for (bench,), part in df.group_by(["benchmark"], maintain_order=True):
        sets = part.group_by("run_id", maintain_order=True).agg(
            pl.col("prompt_id").sort().str.join("\x1f").hash().alias("h"), pl.len().alias("n"))
        if sets.select(pl.col("h").n_unique()).item() > 1 or sets["n"].n_unique() > 1:
            runs = sets.sort("n")
            raise GuarddiagError(
                f"{source}: runs cover different prompt sets of benchmark {bench!r} "
                f"(e.g. {runs['run_id'][0]!r} has {runs['n'][0]} prompts, "
                f"{runs['run_id'][-1]!r} has {runs['n'][-1]})"
            )


def read(path: str | Path, *, same_prompt_sets: bool = False) -> pl.DataFrame:
    return validate(read_table(path), source=str(path), same_prompt_sets=same_prompt_sets)


def run_files(runs_dir: str | Path) -> list[Path]:
    """Every predictions file of a runs folder: the branches' ``predictions.parquet`` and one
    ``outside/<guard>.parquet`` per outside guard scored into it."""
    folder = RunsFolder(Path(runs_dir))
    files = [folder.predictions] if folder.predictions.is_file() else []
    return files + folder.outside_tables()


def load_runs(runs_dir: str | Path, *, same_prompt_sets: bool = False) -> pl.DataFrame:
    """All predictions of a runs folder as one validated table (branches and outside guards)."""
    files = run_files(runs_dir)
    if not files:
        raise GuarddiagError(
            f"{runs_dir}: no predictions.parquet or outside/*.parquet; run `guarddiag predict` "
            f"or `guarddiag guards score` first"
        )
    parts = [validate(read_table(f), source=str(f)) for f in files]
    return validate(pl.concat(parts), source=str(runs_dir), same_prompt_sets=same_prompt_sets)


# ─── binary read-out ───────────────────────────────────────────────────────────────────────────

def with_unsafe_probability(df: pl.DataFrame, mapping: BinaryMapping, *,
                            column: str = "p_unsafe_mapped") -> pl.DataFrame:
    """Add P(unsafe) under ``mapping`` (``column``) and the read-out used (``readout``).

    P(unsafe) is the sum of the class probabilities of the mapping's unsafe classes where the row
    has class probabilities (``readout = "class_probs"``), and the guard's own ``p_unsafe``
    otherwise (``readout = "p_unsafe"``).
    """
    has_probs = pl.all_horizontal([pl.col(c).is_not_null() for c in PROB_COLUMNS])
    unsafe_cols = [f"p_{c}" for c in CLASSES if c in mapping.unsafe]
    mapped = pl.sum_horizontal([pl.col(c) for c in unsafe_cols]) if unsafe_cols else pl.lit(0.0)
    return df.with_columns(
        pl.when(has_probs).then(mapped).otherwise(pl.col("p_unsafe")).alias(column),
        pl.when(has_probs).then(pl.lit("class_probs")).otherwise(pl.lit("p_unsafe"))
        .alias("readout"),
    )


def check_threshold(threshold: float | None) -> float:
    """``threshold`` as a float (None: the protocol's cut-off), or a one-line error unless it is
    a number in [0, 1]."""
    if threshold is None:
        return protocol().cutoff
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0.0 <= float(threshold) <= 1.0:
        raise GuarddiagError(f"threshold: expected a number in [0, 1], got {threshold!r}")
    return float(threshold)


def unsafe_decisions(predictions: pl.DataFrame, *, mapping: BinaryMapping = LOOSE,
                     threshold: float | None = None) -> pl.DataFrame:
    """``predictions`` (status ok rows only) with a boolean ``unsafe`` column: P(unsafe) under
    ``mapping`` >= ``threshold`` (None: the protocol's cut-off), the read-out the report's
    scores use (failed rows are never read as safe: they are left out)."""
    needed = ("run_id", "benchmark", "prompt_id", "p_unsafe", "status")
    missing = [c for c in needed if c not in predictions.columns]
    if missing:
        raise GuarddiagError(f"predictions: missing column(s) {', '.join(missing)}")
    threshold = check_threshold(threshold)
    ok = predictions.filter(pl.col("status") == "ok")
    return with_unsafe_probability(ok, mapping, column="_p").with_columns(
        (pl.col("_p") >= threshold).alias("unsafe")).drop("_p", "readout")
