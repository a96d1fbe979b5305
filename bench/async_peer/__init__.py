"""The asynchronous peer (not shipped): verify, send to SQS, and a Powertools idempotent
worker, as a competent engineer would build it without our inbox, ledger or reconciler."""
