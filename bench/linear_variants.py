"""Linear attention's cost by part (bench/RESULTS.md, session 19).

Times attn.linear_attention at one length and head dim in six forms, from
the full benchmarked kernel (elu_plus_one, causal, RoPE on the numerator)
down to the bare matmuls (identity, not causal): the differences between
rows are what the feature map, the RoPE and the causal chunk cost. One
kernel per form, timed interleaved (rounds of all forms), best of N.
FLOPs counted as 4 hq s d dv (the state update and the read per row); the
chunked causal form also does 2 hq s R (d + dv) more (R = 16 rows).

usage: python bench/linear_variants.py S D [ROUNDS]   (run under
flock /tmp/pejit-bench.lock, after build/bench/pejit-peak-fma)
"""
import pejit, numpy as np, time, sys
s=int(sys.argv[1]); d=int(sys.argv[2])
R="encodings([#pe.rope<layout = half, theta = 10000.0>])"
t=f"tensor<1x4x?x{d}xf32>"
vs=[("elu causal rope_num",f"feature_map(elu_plus_one) causal {R} rope_placement(rope_on_numerator)"),
    ("elu causal",f"feature_map(elu_plus_one) causal"),
    ("identity causal rope",f"feature_map(identity) causal {R} rope_placement(rope_before_feature_map)"),
    ("identity causal","feature_map(identity) causal"),
    ("elu noncausal","feature_map(elu_plus_one)"),
    ("identity noncausal","feature_map(identity)")]
ks=[]
q=np.random.randn(1,4,s,d).astype(np.float32)*0.3
kk=np.random.randn(1,4,s,d).astype(np.float32)*0.3
v=np.random.randn(1,4,s,d).astype(np.float32)
for name,attrs in vs:
    src=f"func.func @f(%q: {t}, %k: {t}, %v: {t}) -> {t} {{\n %o = attn.linear_attention %q, %k, %v {attrs} : {t}, {t}, {t} -> {t}\n return %o : {t}\n}}\n"
    k=pejit.compile(src); k.run(q,kk,v); ks.append(k)
best=[1e9]*len(vs)
for rnd in range(int(sys.argv[3]) if len(sys.argv)>3 else 5):
  for i,k in enumerate(ks):
    t0=time.perf_counter(); k.run(q,kk,v); best[i]=min(best[i],time.perf_counter()-t0)
for (name,_),b in zip(vs,best):
    fl=4*4*s*d*d; ms=b*1e3
    print(f"d={d} {name:24s} {ms:8.2f} ms {fl/ms/1e6:7.1f} GFLOP/s")
