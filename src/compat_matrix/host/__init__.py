"""What runs on the host: matrix files, the plan, the cells' environments, the nox sessions, the report stage,
`init` and the CLI. It never imports torch or transformers; of the cell's code it reads only the probe registry,
through compat_matrix.probes."""
