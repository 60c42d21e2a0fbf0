"""Demo tools, prompts and resources served by the example project."""
