"""What runs in a cell's interpreter: the runner (this package's `__main__`), the subject's variants, the forked
children, watching which audited code ran, the probes, tiny builds and your own tests. Standard library plus what
the cell installs: torch and transformers are imported inside functions, never when a module loads."""
