"""Data-parallel training through pejit with torch.distributed (docs/python.md
"Several processes"): 2 processes on this machine, the gloo backend, a
small model of pejit attention blocks (a learned T5 table and a learned RoPE
position scale) wrapped in DistributedDataParallel, or sharded by FSDP
(fully_shard, each block and the model), 10 SGD steps. After each step the
parameters equal, to 1e-5 relative, those of one process training the same
model on the concatenated batch (without the gradients' all-reduce they
differ by 5e-5 and more at the first step). The processes share one kernel
disk cache. Bounded in time (seconds); skipped without torch or gloo."""
import os
import tempfile

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch.distributed with gloo is not available")

STEPS, WORLD, PER_RANK, LENGTH, WIDTH = 10, 2, 2, 16, 32


class Block(torch.nn.Module):
    """Pre-norm attention block: pejit attention with a learned T5 table and
    a learned RoPE position scale."""

    def __init__(self, heads=2):
        super().__init__()
        import pejit.torch
        self.heads = heads
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.out = torch.nn.Linear(WIDTH, WIDTH)
        self.table = torch.nn.Parameter(torch.randn(32, heads) * 0.5)
        self.scale = torch.nn.Parameter(torch.full((1,), 0.9))
        self.options = pejit.torch.options(rope=True, causal=True,
                                           t5={"num_buckets": 32, "bidirectional": False})

    def forward(self, x):
        import pejit.torch
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        o = pejit.torch.attention(q, k, v, self.options, t5_table=self.table, rope_scale=self.scale)
        return x + self.out(o.transpose(1, 2).reshape(b, s, WIDTH))


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(Block(), Block())


def data():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(WORLD * PER_RANK, LENGTH, WIDTH, generator=g)
    return x, torch.randn(x.shape, generator=g)


def train(net, x, target, step_hook):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(net(x), target).backward()
        optimizer.step()
        step_hook()


def worker(rank, mode, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD)
    try:
        if mode == "ddp":
            net = torch.nn.parallel.DistributedDataParallel(model())
            params = lambda: [p.detach().clone() for p in net.module.parameters()]  # noqa: E731
        else:  # FSDP2: each rank holds a shard; full_tensor() gathers (a collective)
            from torch.distributed.fsdp import fully_shard
            net = model()
            for block in net:
                fully_shard(block)
            fully_shard(net)
            params = lambda: [p.full_tensor().detach().clone() for p in net.parameters()]  # noqa
        x, target = data()
        rows = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
        history = []
        train(net, x[rows], target[rows], lambda: history.append(params()))
        torch.save(history, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_two_processes_match_one_process_on_the_whole_batch(tmp_path, monkeypatch, mode):
    if mode == "fsdp":
        pytest.importorskip("torch.distributed.fsdp", reason="no FSDP in this torch")
        from torch.distributed import fsdp
        if not hasattr(fsdp, "fully_shard"):
            pytest.skip(f"torch {torch.__version__} has no fully_shard (FSDP2)")
    monkeypatch.setenv("PEJIT_CACHE_DIR", str(tmp_path / "cache"))  # shared by both ranks
    init_file = tempfile.mktemp(dir=tmp_path)
    torch.multiprocessing.spawn(worker, args=(mode, init_file, str(tmp_path)), nprocs=WORLD,
                                join=True)
    # One process, the concatenated batch: DDP averages the ranks' gradients
    # of their mean losses, which is the gradient of the whole batch's mean.
    net = model()
    x, target = data()
    single = []
    train(net, x, target, lambda: single.append([p.detach().clone() for p in net.parameters()]))
    worst = 0.0
    for rank in range(WORLD):
        history = torch.load(tmp_path / f"rank{rank}.pt")
        assert len(history) == STEPS
        for step, (got, want) in enumerate(zip(history, single)):
            for n, (a, b) in enumerate(zip(got, want)):
                error = ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()
                assert error < 1e-5, f"rank {rank}, step {step}, parameter {n}: {error}"
                worst = max(worst, error)
    print(f"worst relative parameter difference over {STEPS} steps: {worst:.2e}")
    # The learned encodings moved.
    names = [name for name, _ in net.named_parameters()]
    assert abs(single[-1][names.index("0.scale")].item() - 0.9) > 1e-6, "the scale did not move"
    assert not torch.equal(single[-1][names.index("0.table")], model()[0].table.detach())
