"""Names people log (W&B, TensorBoard, Hugging Face Trainer, Lightning) -> canonical RunTable columns (issue 14,
item 1): the recognised families, random spellings of them, an explicit --map beating every rule, --drop of a raw
name, and "not found" errors that show the closest names, raw ones included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixlaw.errors import InputError
from mixlaw.runs.io import canonical_metric_name, read_table
from mixlaw.runs.io.rules import closest_hint, map_metric_names

FAMILIES = [
    ("_step", "step"),
    ("trainer/global_step", "step"),
    ("train/global_step", "step"),
    ("train/loss", "loss_train"),
    ("val/loss", "loss"),
    ("eval/code_loss", "loss_code"),
    ("eval/code/loss", "loss_code"),
    ("eval/general_loss", "loss_general"),
    ("eval/c4_en-validation/CrossEntropyLoss", "loss_c4_en"),
    ("eval/dolma_common-crawl-validation/CrossEntropyLoss", "loss_dolma_common-crawl"),
    ("throughput/total_tokens", "tokens"),
    ("optim/learning_rate_group0", "lr"),
    ("lr", "lr"),
    ("learning_rate", "lr"),
    ("lr-AdamW", "lr"),
    ("lr-AdamW/pg1", "lr"),
    ("eval_loss", "loss"),  # Hugging Face
    ("eval_code_loss", "loss_code"),
    ("num_input_tokens_seen", "tokens"),
    ("val_loss", "loss"),  # Lightning
    ("train_loss_step", "loss_train"),
    ("model_params", "n_params"),
    ("data/code_frac", "w_code"),
    ("_runtime", None),
    ("epoch", None),
]


@pytest.mark.parametrize(("name", "canon"), FAMILIES)
def test_recognised_names(name: str, canon: str | None) -> None:
    assert canonical_metric_name(name) == canon


@pytest.mark.parametrize("name", ["learning_rate_peak", "optim/learning_rate_group1", "lr-AdamW/pg2", "grad_norm"])
def test_names_that_are_not_the_lr_keep_their_own(name: str) -> None:
    assert canonical_metric_name(name) not in ("lr", "loss") and canonical_metric_name(name) is not None


_word = st.builds(
    lambda a, b: a + b,
    st.sampled_from("abcdefghijkmnopqrsuwxyz"),
    st.text("abcdefghijkmnopqrsuwxyz0123456789", max_size=6),
).filter(
    lambda w: (
        w not in {"eval", "evals", "evaluation", "val", "valid", "validation", "test", "metrics", "charts"}
        and "loss" not in w
        and w not in {"lr", "step", "xent", "ce", "nll"}
    )
)
set_names = st.lists(_word, min_size=1, max_size=3).map("_".join)


def _case(draw: st.DrawFn, word: str) -> str:
    return draw(st.sampled_from([word, word.upper(), word.capitalize()]))


@st.composite
def loss_spellings(draw: st.DrawFn) -> tuple[str, str]:
    s = draw(set_names)
    ev, loss = _case(draw, "eval"), _case(draw, "loss")
    val = draw(st.sampled_from(["val", "validation", "valid", "eval"]))
    spelled = draw(
        st.sampled_from(
            [
                f"{ev}/{s}/{loss}",
                f"{val}/{s}/{loss}",
                f"{ev}/{s}_{loss}",
                f"{ev}/{s}-validation/CrossEntropyLoss",
                f"{ev}/{s}/CrossEntropyLoss",
                f"{loss}/{s}",
                f"eval_{s}_loss",
                f"{s}_loss",
                f"{ev}/loss_{s}",
            ]
        )
    )
    return spelled, f"loss_{s}"


@settings(max_examples=120, deadline=None)
@given(loss_spellings())
def test_random_loss_spellings_map_to_the_same_column(case: tuple[str, str]) -> None:
    spelled, canon = case
    assert canonical_metric_name(spelled) == canon


@st.composite
def other_spellings(draw: st.DrawFn) -> tuple[str, str]:
    canon = draw(st.sampled_from(["step", "lr", "tokens"]))
    opt = draw(st.sampled_from(["Adam", "AdamW", "SGD", "Lion"]))
    pre = draw(st.sampled_from(["train/", "optim/", "trainer/", ""]))
    pools = {
        "step": ["_step", "step", "Step", "global_step", "trainer/global_step", "train/global_step", "iteration"],
        "lr": [f"{pre}lr", f"{pre}learning_rate", f"{pre}LR", f"lr-{opt}", f"lr-{opt}/pg1"]
        + [f"{pre}learning_rate_group0"],
        "tokens": [f"{pre}tokens", f"{pre}total_tokens", f"{pre}tokens_seen", "num_input_tokens_seen"]
        + ["throughput/total_tokens"],
    }
    return draw(st.sampled_from(pools[canon])), canon


@settings(max_examples=60, deadline=None)
@given(other_spellings())
def test_random_step_lr_token_spellings_map_to_the_same_column(case: tuple[str, str]) -> None:
    spelled, canon = case
    assert canonical_metric_name(spelled) == canon


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.one_of(loss_spellings(), other_spellings()), min_size=2, max_size=6),
    st.data(),
)
def test_an_explicit_map_beats_every_automatic_rule(cases: list[tuple[str, str]], data: st.DataObject) -> None:
    """Whatever the rules say about the other names, ``--map canonical=foreign`` gives exactly that mapping and never
    the "pick one" error: every other name that the rules send to the same column keeps its own name."""
    foreign = list(dict.fromkeys(f for f, _ in cases))
    chosen = data.draw(st.sampled_from(foreign))
    target = data.draw(st.sampled_from(sorted({c for _, c in cases} | {"step", "lr", "loss"})))
    # only the explicit target may collide; keep the other names' own targets distinct
    seen: dict[str, str] = {}
    kept = []
    for f in foreign:
        c = canonical_metric_name(f) or ""
        if f != chosen and c != target and c in seen:
            continue
        seen.setdefault(c, f)
        kept.append(f)
    out = map_metric_names(kept, {target: chosen}, "t.csv")
    assert out[chosen] == target
    assert [f for f, c in out.items() if c == target] == [chosen]


def test_two_names_that_sanitise_alike_keep_distinct_columns_beside_an_explicit_map() -> None:
    """The example hypothesis found: ``--map step=eval/a/loss`` with ``_step`` and ``step`` present. Both lose the
    ``step`` column to the explicit map and both sanitise to ``step``; they must get two distinct names, no error."""
    out = map_metric_names(["eval/a/loss", "_step", "step"], {"step": "eval/a/loss"}, "t.csv")
    assert out["eval/a/loss"] == "step"
    assert out["_step"] == "raw_step" and out["step"] == "raw_step_2"


def _wandb(tmp_path: Path) -> Path:
    p = tmp_path / "run-a.csv"
    p.write_text(
        "_step,trainer/global_step,train/loss,eval/general_loss,model_params\n0,0,4.0,4.1,1000\n1,10,3.5,3.6,1000\n"
    )
    return p


def test_two_step_columns_ask_to_pick_one_and_map_or_drop_settles_it(tmp_path: Path) -> None:
    p = _wandb(tmp_path)
    with pytest.raises(InputError, match=r"pick one with --map step="):
        read_table(p)
    t = read_table(p, column_map={"step": "trainer/global_step"})
    assert t["step"].tolist() == [0, 10] and "raw_step" in t.columns
    t = read_table(p, column_map={"step": "_step"})
    assert t["step"].tolist() == [0, 1] and t["trainer_global_step"].tolist() == [0.0, 10.0]
    t = read_table(p, drop=["_step"])
    assert t["step"].tolist() == [0, 10] and "raw_step" not in t.columns
    t = read_table(p, drop=["trainer/global_step"])
    assert t["step"].tolist() == [0, 1]
    assert {"loss_general", "loss_train", "n_params"} <= set(t.columns)
    assert t.attrs["column_sources"]["loss_general"] == "eval/general_loss"


def test_not_found_errors_list_the_closest_names_raw_ones_included(tmp_path: Path) -> None:
    p = _wandb(tmp_path)
    with pytest.raises(InputError, match=r"closest: 'trainer/global_step'") as err:
        read_table(p, column_map={"step": "trainer/global_stp"})
    assert str(err.value).count("\n") == 0
    t = read_table(p, drop=["_step"])
    hint = closest_hint("loss_genral", t.columns, t.attrs["column_sources"])
    assert "'loss_general' (logged as 'eval/general_loss')" in hint
    hint = closest_hint("eval/general_los", t.columns, t.attrs["column_sources"])  # the raw spelling finds it too
    assert "loss_general" in hint
    assert closest_hint("zzzz", ["loss_a"]) == ""


def test_fit_target_not_found_names_the_closest_column(tmp_path: Path) -> None:
    import pandas as pd

    from mixlaw import api

    df = read_table(_wandb(tmp_path), drop=["_step"])
    df = pd.concat([df.assign(run_id=f"r{i}", n_params=1000.0 * (i + 1), tokens=1e6) for i in range(3)])
    with pytest.raises(InputError, match=r"closest: 'loss_general' \(logged as 'eval/general_loss'\)"):
        api.fit(df, "chinchilla", target="loss_genral")


def test_hugging_face_trainer_state(tmp_path: Path) -> None:
    d = tmp_path / "out" / "checkpoint-20"
    d.mkdir(parents=True)
    hist = [
        {"epoch": 0.5, "grad_norm": 1.2, "learning_rate": 5e-05, "loss": 3.1, "step": 10},
        {"epoch": 0.5, "eval_loss": 3.3, "eval_runtime": 1.0, "eval_samples_per_second": 9.0, "step": 10},
        {"epoch": 1.0, "learning_rate": 2e-05, "loss": 2.9, "num_input_tokens_seen": 40960, "step": 20},
        {"epoch": 1.0, "eval_loss": 3.0, "eval_code_loss": 3.5, "eval_runtime": 1.0, "step": 20},
        {"epoch": 1.0, "step": 20, "total_flos": 1e12, "train_loss": 3.0, "train_runtime": 30.0},
    ]
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 20, "log_history": hist}))
    t = read_table(d / "trainer_state.json")
    assert t["run_id"].unique().tolist() == ["out"]
    assert t["step"].tolist() == [10, 20]
    assert t["loss"].tolist() == [3.3, 3.0] and t["loss_train"].tolist() == [3.1, 2.9]
    assert t["lr"].tolist() == [5e-05, 2e-05] and t["loss_code"].iloc[1] == 3.5 and t["tokens"].iloc[1] == 40960
    assert not [c for c in t.columns if "runtime" in c or "flos" in c or c == "epoch"]
    t = read_table(d / "trainer_state.json", column_map={"loss": "loss"}, drop=["eval_loss"])  # explicit wins
    assert t["loss"].tolist() == [3.1, 2.9]


def test_lightning_csv_logger(tmp_path: Path) -> None:
    d = tmp_path / "lightning_logs" / "version_3"
    d.mkdir(parents=True)
    (d / "metrics.csv").write_text(
        "epoch,step,train_loss_step,lr-AdamW,val_loss,val/code_loss\n"
        "0,9,4.1,0.001,,\n0,19,3.9,0.001,,\n0,19,,,3.95,4.2\n1,29,3.7,0.0009,,\n"
    )
    t = read_table(d / "metrics.csv")
    assert t["run_id"].unique().tolist() == ["lightning_logs-version_3"]
    assert t["step"].tolist() == [9, 19, 29]
    assert t["loss_train"].tolist() == [4.1, 3.9, 3.7]
    assert t.loc[t["step"] == 19, "loss"].item() == 3.95 and t.loc[t["step"] == 19, "loss_code"].item() == 4.2
    assert t["lr"].tolist() == [0.001, 0.001, 0.0009]


def test_plain_csv_names_are_kept_as_they_are(tmp_path: Path) -> None:
    p = tmp_path / "plain.csv"
    p.write_text("run_id,step,train_loss,loss_code,Model Size\na,0,3.0,3.1,5\n")
    t = read_table(p)
    assert {"train_loss", "loss_code", "Model Size"} <= set(t.columns)  # no rules on a plain table
