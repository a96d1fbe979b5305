"""A team's agent tools: the template of docs/workflows.md, "Build your own agent here"."""
