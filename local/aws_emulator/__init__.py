"""AWS on loopback for the local stack: moto's server, one port, every service.

Three things are added in front of moto, all local-only:

* **One request at a time.** moto's backends are not thread-safe; DynamoDB is
  linearizable per item. A lock around each request gives the emulator that
  property, so two racing ``TransactWriteItems`` cannot both pass their conditions.
* **SQS long polling that does not hold that lock.** A ``ReceiveMessage`` with
  ``WaitTimeSeconds`` is asked of moto as a short poll, again after every request
  that can make a message visible (a send, a visibility change) and every
  :data:`LONG_POLL_RECHECK_SECONDS` (delays and visibility timeouts end by
  themselves), until a message comes, the wait ends or the caller hangs up. moto's
  own long poll would sleep inside the lock and stop every other request.
* **Fault injection.** At a settable rate, a DynamoDB request is answered with
  ``ThrottlingException`` (400) or ``InternalServerError`` (500) *before* moto sees
  it, so the caller learns of a failure that wrote nothing, as DynamoDB promises.
  ``lose_next`` does the other thing DynamoDB may do: moto applies the request and
  its caller hears ``InternalServerError`` (an answer lost after the write).
* **A transaction path that does not copy tables.** moto backs every
  ``TransactWriteItems`` up with a deep copy of each table it touches (stream
  records included), so each transaction costs time in proportion to the table.
  Transactions of ``Put``/``Delete``/``ConditionCheck`` only (the receiver's) are
  checked first and applied after, under the lock, which is atomic without a copy.
  ``docs/local.md`` has the measured effect.
* **Queries that do not sort the table.** moto sorts every item of a table before
  each ``Query`` (and then sorts the matches again); a ``Query`` here reads only the
  partition it names, or, on a global index, the items filed under the index
  partition it names (kept up to date by every write), unsorted, and moto sorts the
  matches as before. Same answers, same pages.
* **DynamoDB item answers written straight to JSON.** moto's response serializer
  walks every attribute of every item against the API's shapes; an answer to an item
  operation that is already plain JSON data (strings, numbers, lists, maps; no binary
  attribute) is written with the serializer's own framing, without the walk. Same
  bytes on the wire.
* **Stream records written straight to JSON.** The same for ``GetRecords``: each
  record's images went through that walk (about 1 ms a record); its one timestamp is
  written as the serializer writes it, in epoch seconds.
* **SQS without recounting the queue.** moto computes every attribute of a queue,
  its three approximate message counts included (each a pass over every message),
  whenever it reads one attribute: on every send, and for every message it receives.
  Here the counts are computed only for a ``GetQueueAttributes`` that asks for them.
* **Update and condition expressions checked once.** For every ``UpdateItem`` moto
  deep-copies the expression's parse tree and walks it with ten processors, three of
  which read only the expression, its names and the table's keys; and it parses each
  condition expression from its text on every request (twice for a conditional
  write). Here the copy is unpickled, those three checks run once per expression
  that passes them, the walk tests node types once per class, and a condition's
  syntax tree is kept per expression and names and given each request's values.
  Same answers, the same errors (a test replays valid and invalid requests both ways).
* **One size check per item built.** moto checks an item's size as each attribute
  goes in, measuring all the others every time; here once, when it is built (the
  last check is the largest; a refused item is built by moto again, so it fails as
  it would have).
* **Connections kept open.** werkzeug closes the connection after every answer, so
  each AWS call cost a new connection, a thread here and a socket in its caller;
  here a request's body is read whole before moto sees it, and the connection stays
  open for the caller's next request (see :func:`_keep_alive_handler`).
* **Per-request work done once.** For every request moto lists its own package
  directory on disk, lists its response class's methods, and parses an update
  expression twice; the emulator remembers each answer (they never change while it
  runs).

* **Only the stack's own callers.** Given an access key id (as the local stack's
  emulator always is: :class:`AwsEmulatorProcess` generates one per run and hands it to
  the child in its environment, never on its command line), the emulator answers 403
  to every request, its controls included, that is not SigV4-signed with that key id
  (``Credential=`` in the ``Authorization`` header or a presigned URL's query). Another
  user of the machine who finds the loopback port cannot read the stack's secrets.
  The key id is checked, not the signature: it is a random secret of its own, as
  unguessable as a token, and it never leaves loopback.

The emulator runs in its own process (``python -m local.aws_emulator``, started by
:class:`AwsEmulatorProcess`): moto serves one request at a time with the Python
interpreter lock to itself, and its callers (the stack's supervisor, a benchmark's
load) keep theirs. Faults are set, and the requests served per operation read, over
HTTP on :data:`CONTROL_PATH`, a path no AWS API uses, with the CPU time spent
answering them, per operation.

Its modules: :mod:`~local.aws_emulator.gate` (the request gate and the emulator itself),
:mod:`~local.aws_emulator.faults`, :mod:`~local.aws_emulator.moto_patches` and
:mod:`~local.aws_emulator.process` (the child process and its controls).
"""

from __future__ import annotations

from local.aws_emulator.faults import FaultInjector
from local.aws_emulator.gate import CONTROL_PATH, AwsEmulator, EmulatorCredentials
from local.aws_emulator.process import AwsEmulatorProcess, EmulatorControls, process_cpu_seconds

__all__ = [
    "CONTROL_PATH",
    "AwsEmulator",
    "AwsEmulatorProcess",
    "EmulatorControls",
    "EmulatorCredentials",
    "FaultInjector",
    "process_cpu_seconds",
]
