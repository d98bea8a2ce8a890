"""LR schedules and the S1/S2 areas (laws.md §4.1, §4.4, §5.7)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixlaw.errors import InputError
from mixlaw.schedules import (
    Schedule,
    annealing_area,
    annealing_momentum,
    areas,
    cpt_areas,
    forward_area,
)


def test_wsd_areas_reproduce_laws_md_check() -> None:
    # laws.md §4.4: 40k-step WSD, 8k-step linear decay 2e-4 -> 0, decay 0.999: S1 = 7.1999, S2 = 0.17503.
    s = Schedule.parse("wsd:peak=2e-4,steps=40000,decay=8000")
    a = areas(s, decay=0.999)
    assert a.s1[-1] == pytest.approx(7.1999, abs=1e-9)
    assert a.s2[-1] == pytest.approx(0.17503, abs=5e-6)
    # the annealing drop C·S2 for C = 0.299
    assert 0.299 * a.s2[-1] == pytest.approx(0.052, abs=5e-4)


def test_s2_limit_after_long_tail() -> None:
    s = Schedule.parse("wsd:peak=2e-4,steps=40000,decay=8000")
    tail = Schedule.from_lr(np.concatenate([s.lrs(), np.zeros(30000)]))
    assert areas(tail).s2[-1] == pytest.approx(0.2, abs=1e-6)


def test_closed_form_matches_recurrence() -> None:
    rng = np.random.default_rng(0)
    lr = np.abs(rng.normal(1e-3, 3e-4, size=300))
    lam = 0.99
    s2 = annealing_area(lr, decay=lam, eta0=lr[0])
    prev = np.concatenate([[lr[0]], lr[:-1]])
    d = prev - lr
    k = np.arange(1, lr.size + 1)
    for s in (1, 17, 150, 300):
        closed = np.sum(d[:s] * (1 - lam ** (s - k[:s] + 1)) / (1 - lam))
        assert s2[s] == pytest.approx(closed, rel=1e-10, abs=1e-14)
    # decay -> 0 gives eta_0 - eta_s
    assert annealing_area(lr, decay=0.0)[-1] == pytest.approx(lr[0] - lr[-1])


def test_constant_has_no_annealing_and_linear_s1() -> None:
    s = Schedule.parse("constant:peak=3e-3,steps=2000")
    a = areas(s)
    assert np.all(a.s2 == 0)
    assert a.s1[1234] == pytest.approx(1234 * 3e-3)


def test_multipowerlaw_logged_lrs_reconstructed() -> None:
    cos = Schedule.parse("cosine:peak=3e-4,steps=24000,warmup=2160,final=3e-5")
    np.testing.assert_allclose(cos.lr([2160, 2288, 23920]), [3e-4, 2.999771173709568e-4, 3.000893868085248e-05])
    wsd = Schedule.parse("wsd:peak=3e-4,steps=24000,warmup=2160,final=3e-5,decay=4000,shape=exp")
    np.testing.assert_allclose(wsd.lr([20064, 20192]), [2.891487070871911e-4, 2.686094296648783e-4])
    con = Schedule.parse("multistep:peak=3e-4,steps=16000,warmup=2160,milestones=8000,gamma=0.3")
    np.testing.assert_allclose(con.lr([7936, 8000, 8128]), [3e-4, 9e-5, 9e-5])


def test_warmup_conventions() -> None:
    s = Schedule.parse("cosine:peak=3e-4,steps=1000,warmup=100,final=3e-5")
    peak, logged, raw = (areas(s, warmup=w) for w in ("peak", "logged", "raw"))
    assert peak.s1[100] == pytest.approx(100 * 3e-4)
    assert logged.s1[100] == pytest.approx(3e-4 * 101 / 2)
    np.testing.assert_allclose(peak.s2, logged.s2)
    assert np.all(peak.s2[:101] == 0)
    assert raw.s2[100] < 0  # LR increases give negative annealing area
    np.testing.assert_allclose(peak.s1[-1] - peak.s1[100], logged.s1[-1] - logged.s1[100])


@pytest.mark.parametrize("split", ["time", "origin"])
def test_cpt_split_sums_to_total(split: str) -> None:
    pt = Schedule.parse("wsd:peak=2e-4,steps=4000,decay=800,final=1e-4")
    cpt = Schedule.parse("rewarmup:peak=2e-4,steps=3000,warmup=200,start=1e-4,shape=cosine")
    c = cpt_areas(pt, cpt, split=split)
    whole = areas(Schedule.from_lr(np.concatenate([pt.lrs(), cpt.lrs()])))
    np.testing.assert_allclose(c.s1, whole.s1, atol=1e-12)
    np.testing.assert_allclose(c.s2, whole.s2, atol=1e-12)
    assert np.all(c.s1_cpt[:4001] == 0) and np.all(c.s2_cpt[:4001] == 0)
    if split == "origin":  # re-warm-up gives a negative CPT annealing area at first
        assert c.s2_cpt[4000 + 200] < 0


def test_split_conventions_differ_without_rewarmup() -> None:
    pt = Schedule.parse("wsd:peak=2e-4,steps=4000,decay=2000")  # annealed to 0 right at the end
    cpt = Schedule.parse("constant:peak=1e-12,steps=3000")
    t, o = cpt_areas(pt, cpt, split="time"), cpt_areas(pt, cpt, split="origin")
    assert t.s2_pt[-1] == pytest.approx(t.s2_pt[4000])
    assert o.s2_pt[-1] > o.s2_pt[4000]  # PT momentum keeps accruing into s2_pt
    assert abs(o.s2_cpt[-1]) < 1e-9
    assert t.s2_cpt[-1] > 0.01


def test_round_trip_and_json() -> None:
    specs = [
        "wsd:peak=3e-3,steps=4000,warmup=100,decay=800",
        "cosine:peak=3e-4,steps=24000,warmup=2160,final=3e-5",
        "constant:peak=3e-3,steps=2000",
        "linear:peak=1e-3,steps=500,final=1e-5",
        "multistep:peak=1e-3,steps=500,milestones=100/300,gamma=0.5",
        "rewarmup:peak=2e-4,steps=3000,warmup=200,start=1e-5,final=0,shape=cosine",
    ]
    for spec in specs:
        s = Schedule.parse(spec)
        d = json.loads(json.dumps(s.to_dict()))
        assert Schedule.from_dict(d) == s
        assert Schedule.parse(s.spec()) == s
    t = Schedule.from_lr([1e-3, 2e-3, 1e-3])
    assert Schedule.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    assert Schedule.from_dict({"kind": "table", "lr": [1.0, 0.5]}).total_steps == 2


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "foo:peak=1e-3,steps=10",
        "cosine:peak=abc,steps=10",
        "cosine:steps=10",
        "cosine:peak=1e-3",
        "cosine:peak=1e-3,steps=10.5",
        "cosine:peak=1e-3,steps=10,bogus=1",
        "cosine:peak=1e-3,steps=10,warmup=20",
        "wsd:peak=1e-3,steps=10",
        "multistep:peak=1e-3,steps=10",
        "cosine:peak=1e-3,steps=10,final=1",
        "table:steps=3",
        "cosine:peak=1e-3,steps",
    ],
)
def test_bad_specs_raise_one_line(spec: str) -> None:
    with pytest.raises(InputError) as ei:
        Schedule.parse(spec)
    assert "\n" not in str(ei.value)


def test_table_from_file(tmp_path) -> None:
    p = tmp_path / "lr.csv"
    p.write_text("step,lr\n1,0.001\n2,0.002\n3,0.001\n")
    s = Schedule.parse(f"table:file={p}")
    np.testing.assert_allclose(s.lrs(), [1e-3, 2e-3, 1e-3])
    p.write_text("step,lr\n1,0.001\n3,0.002\n")
    with pytest.raises(InputError, match="row"):
        Schedule.parse(f"table:file={p}")
    with pytest.raises(InputError, match="not found"):
        Schedule.parse(f"table:file={tmp_path / 'nope.csv'}")


def test_lr_out_of_range_raises() -> None:
    s = Schedule.parse("constant:peak=3e-3,steps=20")
    with pytest.raises(InputError):
        s.lr([21])
    assert s.lr(np.arange(21)).shape == (21,)


@settings(max_examples=40, deadline=None)
@given(
    peak=st.floats(1e-5, 1e-2),
    total=st.integers(10, 400),
    frac=st.floats(0.05, 0.9),
    final_frac=st.floats(0.0, 1.0),
    kind=st.sampled_from(["cosine", "linear", "wsd"]),
)
def test_decay_properties(peak: float, total: int, frac: float, final_frac: float, kind: str) -> None:
    decay = max(1, int(frac * total))
    s = Schedule(kind=kind, peak_lr=peak, total_steps=total, final_lr=final_frac * peak, decay_steps=decay)  # type: ignore[arg-type]
    lr = s.lrs()
    assert np.all(np.diff(lr) <= 1e-15)  # monotone non-increasing
    assert lr[-1] == pytest.approx(final_frac * peak, rel=1e-9, abs=1e-15)
    a = areas(s)
    assert np.all(np.diff(a.s1) >= 0)
    assert np.all(np.diff(a.s2) >= -1e-18)
    assert a.s2[-1] <= (peak - lr[-1]) / (1 - 0.999) + 1e-12
    np.testing.assert_allclose(forward_area(lr)[1:], np.cumsum(lr))
    assert annealing_momentum(lr).shape == (total + 1,)
