"""The standard library: prompts (designer, repair) and the reference material they are built from."""
