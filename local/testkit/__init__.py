"""What the tests and the bench both build on: requests, events, a moto world, rigs.

Why here: the bench may import ``functions``, ``infra`` and ``local`` but never
``tests``, while the tests may import everything; code both need therefore lives
under ``local/``. It depends only on ``functions`` and ``local`` (no CDK, no pytest),
and the local stack's processes never import it.

* :mod:`.builders`: signed RelayLink requests and the Lambda events (API Gateway,
  SQS, stream) that carry them; the Lambda context.
* :mod:`.clock`: the one fake clock.
* :mod:`.aws_calls`: counting a client's AWS calls.
* :mod:`.botocore_hooks`: canned answers and injected faults below botocore.
* :mod:`.moto_world`: the stack's resources in moto, and ways to look at them.
* :mod:`.receiver_rig` and :mod:`.worker_rig`: the real handlers wired to a world.
* :mod:`.offline_aws`: the environment that keeps a run away from real AWS.
* :mod:`.vectors`: the shared signed vectors, typed.
"""
