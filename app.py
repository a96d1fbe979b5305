"""CDK entry point: build the app and the stack, synthesize. Nothing else."""

from infra.application import build_app

app, _stack = build_app()
app.synth()
