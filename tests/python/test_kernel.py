"""pejit.compile, the stages' IR, and the disk cache from Python."""
import os
import re
import shutil

import pytest

import numpy as np

import pejit
import reference as ref
from conftest import poisoned


def test_compile_text_stages_and_run(rng):
    source = pejit.attention_source((1, 2, 16, 64), (1, 2, 16, 64), (1, 2, 16, 64),
                                    rope=True, causal=True)
    kernel = pejit.compile(source)
    assert kernel.target == "host"
    assert "pe.rope" in kernel.ir("source")
    # Fusion folds the rotation into the attention op's encodings.
    fused = kernel.ir("fused")
    assert re.search(r"= pe\.rope ", fused) is None and "encodings([#pe.rope<" in fused
    assert {"source", "fused", "tiled", "llvm-ir", "asm"} <= set(kernel.stages)
    roles = [a["role"] for a in kernel.arguments]
    assert roles[:3] == ["query", "key", "value"]
    q = rng.standard_normal((1, 2, 12, 64)).astype(np.float32)
    k = rng.standard_normal((1, 2, 20, 64)).astype(np.float32)
    v = rng.standard_normal((1, 2, 20, 64)).astype(np.float32)
    out = kernel.run(q, k, v, out=poisoned((1, 2, 12, 64), "float32"))
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    expected = ref.attention(ref.rope(q64, np.arange(8, 20), 64),
                             ref.rope(k64, np.arange(20), 64), v.astype(np.float64),
                             causal=True)
    assert ref.rel_error(out, expected) < 1e-4
    # Without out=, the kernel allocates [b, hq, sq, dv] from the call's lengths.
    allocated = kernel.run(q, k, v)
    assert allocated.shape == (1, 2, 12, 64) and allocated.dtype == np.float32
    assert ref.rel_error(allocated, expected) < 1e-4
    with pytest.raises(pejit.Error, match="no inputs"):
        kernel.run()


def test_compile_file(tmp_path):
    path = tmp_path / "attention.mlir"
    path.write_text(pejit.attention_source((1, 2, 16, 64), (1, 2, 16, 64), (1, 2, 16, 64)))
    kernel = pejit.compile(path)
    assert "attn.attention" in kernel.ir("source")


def test_disk_cache_from_python():
    pejit.compile(pejit.attention_source((1, 1, 8, 32), (1, 1, 8, 32), (1, 1, 8, 32)))
    stats = pejit.cache.stats()
    assert stats["entries"] >= 1 and stats["dir"]
    entries = pejit.cache.verify()
    assert entries and all(e["problem"] == "" for e in entries)


def test_second_process_loads_from_disk(tmp_path):
    import os
    import subprocess
    import sys
    source = pejit.attention_source((1, 2, 8, 32), (1, 2, 8, 32), (1, 2, 8, 32), rope=True)
    path = tmp_path / "a.mlir"
    path.write_text(source)
    script = ("import sys, pejit; k = pejit.compile(sys.argv[1]); "
              "print(k.from_disk, k.compile_ms > 0)")
    env = {**os.environ, "PEJIT_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", script, str(path)], env=env,
                           capture_output=True, text=True)
    second = subprocess.run([sys.executable, "-c", script, str(path)], env=env,
                            capture_output=True, text=True)
    assert first.stdout.split() == ["False", "True"], first.stderr
    assert second.stdout.split() == ["True", "True"], second.stderr


def test_tune_returns_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv("PEJIT_CACHE_DIR", str(tmp_path))
    source = pejit.attention_source((1, 1, 64, 32), (1, 1, 64, 32), (1, 1, 64, 32))
    static = source.replace("?", "64")
    rows = pejit.tune(static, repeats=1, progress=False)
    assert rows and all({"query_tile", "key_tile", "median_ms", "error", "best"} <= set(r)
                        for r in rows)
    assert sum(r["best"] for r in rows) == 1
    # A shape class (what pejit.attention compiles) is timed at given
    # lengths, (sq, skv) pairs; its best tiles are then the class's.
    rows = pejit.tune(source, repeats=1, progress=False, lengths=[(1, 64), (64, 64)])
    assert sum(r["best"] for r in rows) == 1
    with pytest.raises(pejit.Error, match=r"lengths: expected \(sq, skv\) pairs"):
        pejit.tune(source, lengths=[(0, 64)])
    with pytest.raises(pejit.Error, match="is not a call of the shape class"):
        pejit.tune(static, repeats=1, progress=False, lengths=[(1, 64)])


def test_nvidia_ptx_from_python():
    # PTX is generated here, with no GPU: the same IR, for sm_90.
    source = pejit.attention_source((1, 4, 64, 64), (1, 2, 64, 64), (1, 2, 64, 64), "bfloat16",
                                    rope={"rope_type": "llama3", "factor": 8.0,
                                          "original_max_position_embeddings": 8192,
                                          "rope_theta": 500000.0}, causal=True)
    kernel = pejit.compile(source, target="nvidia:sm_90")
    assert kernel.target == "nvidia:sm_90"
    assert ".target sm_90" in kernel.ptx and ".entry" in kernel.ptx
    assert "ptx" in kernel.stages and kernel.ir("ptx") == kernel.ptx
    if shutil.which("ptxas") or os.path.exists("/usr/local/cuda/bin/ptxas"):
        assert "0 bytes spill stores" in kernel.ptxas_log, kernel.ptxas_log
    with pytest.raises(pejit.Error, match="unknown target"):
        pejit.compile(source, target="tpu")


def test_cache_clear():
    # The tests' own disk cache (conftest.py), which the runtime writes.
    import os
    pejit.compile(pejit.attention_source((1, 1, 8, 32), (1, 1, 8, 32), (1, 1, 8, 48)))
    assert pejit.cache.stats()["dir"] == os.environ["PEJIT_CACHE_DIR"]
    assert len(pejit.cache.ls()) >= 1
    assert pejit.cache.clear() >= 1
    assert pejit.cache.stats()["entries"] == 0


def test_numpy_alone_without_torch():
    import subprocess
    import sys
    script = ("import sys; sys.modules['torch'] = None\n"
              "import numpy as np, pejit\n"
              "q = np.ones((1, 1, 3, 32), np.float32)\n"
              "print(pejit.attention(q, q, q, rope=True).shape)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and "(1, 1, 3, 32)" in done.stdout, done.stderr
