"""The model of every model step on Bedrock Runtime ``Converse`` (the ``Model`` port).

One request per call: the fenced system prompt and user message, ``inferenceConfig``
(``maxTokens``, ``temperature``), the delivery id as ``requestMetadata`` (it shows in
Bedrock's invocation logs), and ``toolConfig`` only when the prompt offers tools (the
agent's tool loop); the answer's ``toolUse`` blocks become its tool uses.

The client makes **one HTTP attempt per call** (``retries`` off: ``BEDROCK_CONFIG`` in
:mod:`functions.workflows.wiring`). A botocore retry after an answer that may follow a
model run would run the model again unseen, and its last answer would decide how the
token budget settles the call: a 500 then a throttle looked like a call that never
ran. So each answer maps to one outcome (:mod:`functions.workflows.adapters.bedrock_errors`),
and the workflow settles the budget by it (:mod:`functions.workflows.model_client`):

* an answer: the summary; the budget settles the tokens it reports;
* throttled (``ThrottlingException``, ``ModelNotReadyException``: 429), or never
  connected (connection refused, connect timeout): **not applied**,
  :class:`~functions.core.errors.NotApplied` ``model_throttled`` /
  ``model_unavailable``; settled at 0;
* a request that can never succeed (``ValidationException``: a bad model id, a prompt
  too long; ``AccessDeniedException``; ``ResourceNotFoundException``): **never**,
  :class:`~functions.core.errors.PermanentError` ``model_rejected``; settled at 0;
* any 5xx (``InternalServerException``, ``ServiceUnavailableException``),
  ``ModelTimeoutException`` (408), ``ModelErrorException`` (424), any other error
  code, a read timeout, the connection lost once the request was sent: **unknown**,
  :class:`~functions.core.errors.TransientError` ``model_unavailable``; the
  reservation stays at its estimate;
* an answer of no usable shape (the model ran): **unknown**, ``model_answer_invalid``,
  whether it is no JSON at all, JSON botocore cannot parse as Converse's answer, or
  parsed JSON missing what a reply needs: one code, retried as a known-transient error
  (within the retry horizon); the reservation stays at its estimate.

Unknown outcomes are retried by the worker's own back-off: the model step was never
recorded, so the next attempt reserves again and calls again; the first call stays
counted at its estimate, so the budget errs towards spending less.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from functions.core.errors import TransientError
from functions.core.model_step import ToolUse
from functions.workflows.adapters.bedrock_errors import bedrock_call
from functions.workflows.agent_prompt import AgentPrompt
from functions.workflows.model_client import ModelAnswer

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime.client import BedrockRuntimeClient

DELIVERY_ID_METADATA_KEY: Final = "delivery_id"


class BedrockConverse:
    """Calls ``Converse`` on one model with one ``bedrock-runtime`` client."""

    def __init__(self, *, client: BedrockRuntimeClient, model_id: str) -> None:
        self._client = client
        self._model_id = model_id
        # An SDK older than the request-metadata field (a Lambda runtime's bundled
        # boto3 can be) would refuse the whole request over it: send it only if known.
        shape = client.meta.service_model.operation_model("Converse").input_shape
        self._metadata_known = shape is not None and "requestMetadata" in shape.members

    def converse(
        self, prompt: AgentPrompt, *, max_tokens: int, temperature: float, delivery_id: str
    ) -> ModelAnswer:
        request: dict[str, Any] = {
            "modelId": self._model_id,
            "system": prompt.converse_system(),
            "messages": prompt.converse_messages(),
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": temperature},
        }
        if self._metadata_known:
            request["requestMetadata"] = {DELIVERY_ID_METADATA_KEY: delivery_id}
        if prompt.tool_config is not None:
            request["toolConfig"] = prompt.tool_config
        try:
            response = bedrock_call(lambda: self._client.converse(**request), subject="model")
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            # botocore's parser met JSON of another shape than Converse's: the model ran,
            # and the answer is as unusable as one that is no JSON at all (``_answer``).
            raise TransientError("model_answer_invalid") from exc
        return _answer(response)


def _answer(response: Mapping[str, Any]) -> ModelAnswer:
    """The text blocks joined, and the tools asked for; any other block is left out."""
    try:
        content = response["output"]["message"]["content"]
        text = "".join(block["text"] for block in content if "text" in block)
        uses = tuple(_tool_use(block["toolUse"]) for block in content if "toolUse" in block)
        usage = response["usage"]
        return ModelAnswer(
            text=text,
            stop_reason=str(response["stopReason"]),
            input_tokens=int(usage["inputTokens"]),
            output_tokens=int(usage["outputTokens"]),
            tool_uses=uses,
        )
    except (KeyError, TypeError, ValueError) as exc:
        # The model ran (and was paid for), but its answer has no usable shape.
        raise TransientError("model_answer_invalid") from exc


def _tool_use(block: Mapping[str, Any]) -> ToolUse:
    tool_input = block["input"]
    if not isinstance(tool_input, dict):
        raise TypeError("a tool's input is a JSON object")
    return ToolUse(id=str(block["toolUseId"]), name=str(block["name"]), input=tool_input)
