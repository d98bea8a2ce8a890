"""The fast training path (``compile``/``bf16``, :mod:`mixlaw.probe.step`) trains and matches the default path."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import torch

import mixlaw.probe.step as step_mod
from mixlaw.probe.data import MixtureSampler
from mixlaw.probe.model import GPT, gpt_config
from mixlaw.probe.step import make_step

V, T, B = 300, 32, 4


@pytest.fixture(autouse=True)
def _one_thread_default_allocator(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """One thread, as probe runs train (busy-waiting OpenMP threads cost seconds on a loaded machine); the
    allocator setting is process-wide, so keep it out of the test process (tested in a subprocess below)."""
    monkeypatch.setattr(step_mod, "tune_allocator", lambda: False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _losses(steps: int, *, compile: bool, bf16: bool, seed: int = 3) -> list[float]:
    """Per-step training losses of the debug GPT on a learnable stream (a repeated random 'sentence')."""
    rng = np.random.default_rng(seed)
    text = np.tile(rng.integers(0, V, size=97), 200).astype(np.uint16)  # period 97: next token is predictable
    sampler = MixtureSampler({"g": text}, {"g": 1.0}, block_size=T, batch_size=B, seed=seed)
    torch.manual_seed(seed)
    model = GPT(gpt_config("debug", vocab_size=V, block_size=T))
    optim = model.configure_optimizer(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95))
    step, _ = make_step(model, optim, device="cpu", compile=compile, bf16=bf16, grad_clip=1.0)
    return [float(step(*sampler.next_batch())) for _ in range(steps)]


def test_bf16_fast_path_matches_default_at_step_one_and_trains() -> None:
    default = _losses(30, compile=False, bf16=False)
    fast = _losses(30, compile=False, bf16=True)
    # same init and batch: the first losses agree to bf16 precision (2^-8 relative on the logits)
    assert abs(fast[0] - default[0]) < 0.01 * default[0]
    assert abs(fast[1] - default[1]) < 0.01 * default[1]  # after one update with the same gradient direction
    assert default[0] == pytest.approx(np.log(V), abs=0.1)  # starts at chance, far from the learnt solution
    assert np.mean(fast[-5:]) < 0.5 * fast[0]  # the fast path learns the periodic stream
    assert abs(np.mean(fast[-5:]) - np.mean(default[-5:])) < 0.1 * np.mean(default[-5:])


# torch.compile imports a module that warns about torch.jit.script_method (torch's own deprecation, not ours)
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
# dynamo builds the context of an autograd.Function (the compiled cross-entropy) by instantiating the base class,
# which torch itself deprecates (torch/_dynamo/side_effects.py: torch.autograd.Function())
@pytest.mark.filterwarnings("ignore:<class 'torch.autograd.function.Function'> should not be instantiated")
def test_compiled_fast_path_matches_default_at_step_one_and_trains() -> None:
    default = _losses(12, compile=False, bf16=False, seed=5)
    fast = _losses(12, compile=True, bf16=True, seed=5)  # the full fast path: compiled forward with its loss
    assert abs(fast[0] - default[0]) < 0.01 * default[0]
    assert abs(fast[1] - default[1]) < 0.01 * default[1]
    assert fast[-1] < fast[0] - 0.5  # it trains


def test_default_path_is_the_plain_eager_fp32_step() -> None:
    """compile=False, bf16=False computes exactly what a hand-written eager fp32 step computes."""
    torch.manual_seed(0)
    model = GPT(gpt_config("debug", vocab_size=V, block_size=T))
    ref = GPT(gpt_config("debug", vocab_size=V, block_size=T))
    ref.load_state_dict(model.state_dict())
    opt = model.configure_optimizer(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95))
    ref_opt = ref.configure_optimizer(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95))
    step, autocast = make_step(model, opt, device="cpu", compile=False, bf16=False, grad_clip=0.5)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, y = torch.randint(0, V, (B, T), generator=gen), torch.randint(0, V, (B, T), generator=gen)
        loss = step(x, y)
        _, ref_loss = ref(x, y)
        assert ref_loss is not None
        ref_opt.zero_grad(set_to_none=True)
        ref_loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        ref_opt.step()
        assert float(loss) == float(ref_loss.detach())
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        assert torch.equal(p, q)
    assert not torch.is_autocast_enabled("cpu")
    with autocast():
        assert not torch.is_autocast_enabled("cpu")  # the default path never autocasts


def test_allocator_tuning_takes_effect_once_on_linux() -> None:
    code = "import sys; from mixlaw.probe.step import tune_allocator as t; print(t(), t())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    expected = "True" if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc" else "False"
    assert out == [expected, expected]


def test_sigmoid_gelu_is_the_tanh_gelu() -> None:
    """x·σ(2u) is 0.5·x·(1 + tanh u): equal to float64 rounding, and to fp32 rounding in fp32, gradients too."""
    from mixlaw.probe.model import gelu_tanh_sigmoid

    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(4096, generator=gen, dtype=torch.float64) * 4).requires_grad_()  # tails up to |x| ≈ 15
    ref = torch.nn.functional.gelu(x, approximate="tanh")
    ours = gelu_tanh_sigmoid(x)
    assert torch.allclose(ours, ref, rtol=1e-13, atol=1e-14)
    (g_ref,) = torch.autograd.grad(ref.sum(), x)
    (g_ours,) = torch.autograd.grad(ours.sum(), x)
    assert torch.allclose(g_ours, g_ref, rtol=1e-12, atol=1e-13)
    x32 = x.detach().float()
    assert torch.allclose(gelu_tanh_sigmoid(x32), torch.nn.functional.gelu(x32, approximate="tanh"), atol=2e-6)
    assert not torch.allclose(ours, x * torch.sigmoid(x), atol=1e-3)  # a wrong constant would be caught


def test_written_out_cross_entropy_matches_torch_in_value_and_gradient() -> None:
    from mixlaw.probe.model import _CrossEntropy

    gen = torch.Generator().manual_seed(11)
    z = (torch.randn(64, 50, generator=gen, dtype=torch.float64) * 3).requires_grad_()  # (n, V)
    y = torch.randint(0, 50, (64,), generator=gen)
    ref = torch.nn.functional.cross_entropy(z, y)
    ours = _CrossEntropy.apply(z, y)
    assert float(ours.detach()) == pytest.approx(float(ref.detach()), rel=1e-14)
    (g_ref,) = torch.autograd.grad(3.0 * ref, z)  # an upstream gradient other than 1 is honoured
    (g_ours,) = torch.autograd.grad(3.0 * ours, z)
    assert torch.allclose(g_ours, g_ref, rtol=1e-12, atol=1e-15)
    assert torch.autograd.gradcheck(lambda t: _CrossEntropy.apply(t, y), (z,))
    zb = z.detach().bfloat16().requires_grad_()  # bf16 logits: computed in fp32, gradient back in bf16
    out = _CrossEntropy.apply(zb, y)
    assert out.dtype == torch.float32
    (gb,) = torch.autograd.grad(out, zb)
    assert gb.dtype == torch.bfloat16
    assert float(out.detach()) == pytest.approx(
        float(torch.nn.functional.cross_entropy(zb.detach().float(), y)), rel=1e-6
    )
