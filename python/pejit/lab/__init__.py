"""The PE lab (docs/lab.md): small byte-level language models, one per
positional encoding, trained on the CPU through pejit's fused kernels and
evaluated past their training length. `python -m pejit.lab --quick`."""
