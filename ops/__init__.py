"""Operate a receiver stack, deployed (``--stack``) or local (``--local``), and the CLI."""
