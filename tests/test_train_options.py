"""TrainOptions: one typed model for the CLI, the API and the runner; its defaults pinned."""

from __future__ import annotations

import argparse
import inspect

import pytest

from guarddiag.cli import build_parser
from guarddiag.cli.train import train_options
from guarddiag.spec import SpecError
from guarddiag.train import train_branches, train_one, train_run
from guarddiag.train.options import TrainOptions
from guarddiag.typed import validate

PINNED = {"checkpoint_every_s": 60.0, "checkpoint_every_steps": None, "stop_after_steps": None,
          "log_every": 20, "eval_batch_size": 128, "pretrained": {}, "threads": None,
          "device": "auto", "micro_batch": None, "compile": False, "wait_for_lock": False}


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_defaults_are_pinned():
    # Every field is listed: a new option, or a changed default, fails here first.
    assert TrainOptions().model_dump() == PINNED


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_the_command_line_defaults_are_the_models(command):
    assert train_options(_args(command)) == TrainOptions()


def test_the_api_and_the_runner_default_to_the_same_object():
    for func in (train_branches, train_one, train_run):
        assert inspect.signature(func).parameters["options"].default is None  # → TrainOptions()


def test_flags_reach_the_options():
    got = train_options(_args("train", "--checkpoint-every", "5", "--checkpoint",
                              "micro=/models/x", "--threads", "2", "--device", "cpu",
                              "--micro-batch", "8", "--compile", "--wait"))
    assert got == TrainOptions(checkpoint_every_s=5.0, pretrained={"micro": "/models/x"},
                               threads=2, device="cpu", micro_batch=8, compile=True,
                               wait_for_lock=True)


def test_a_bad_flag_value_is_one_line_naming_the_flag():
    with pytest.raises(SpecError) as exc:
        train_options(_args("train", "--micro-batch", "0"))
    assert str(exc.value) == "--micro-batch: input should be greater than or equal to 1, got 0"
    with pytest.raises(SpecError) as exc:
        train_options(_args("train", "--checkpoint-every", "-1", "--threads", "0"))
    assert exc.value.problems == [
        "--checkpoint-every: input should be greater than 0, got -1.0",
        "--threads: input should be greater than or equal to 1, got 0"]


def test_unknown_options_are_errors():
    with pytest.raises(SpecError, match='api field "checkpoint_every": unknown key'):
        validate(TrainOptions, {"checkpoint_every": 5}, where="api")
