"""Each function's code, bundled by the synth itself from what is on disk.

``cdk synth`` and ``cdk deploy`` run the app, and the app bundles every asset through
CDK's local bundling (``BundlingOptions.local``): no Docker, and no separate build
step whose output could be stale. An asset is named by the digest of everything that
goes into it (:meth:`~infra.bundle.AssetRecipe.content_hash`), so CDK reuses an asset
already in ``cdk.out`` and bundles only what changed; the pip step is cached in
``build/deps/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra import refusals
from infra.bundle import AssetRecipe

# CDK requires an image even when local bundling always succeeds; it is never pulled.
_NO_DOCKER_IMAGE = "relaylink-receiver/local-bundling-only"


@jsii.implements(ILocalBundling)
class LocalBundling:
    """Writes one function's asset where CDK asks for it (CDK calls ``try_bundle``)."""

    def __init__(self, recipe: AssetRecipe) -> None:
        self._recipe = recipe

    def try_bundle(self, output_dir: str, *, image: DockerImage, **options: Any) -> bool:
        """Always bundles here: a failure raises (naming the cause), never falls back
        to Docker. (jsii passes the bundling options as keywords; none matter here.)"""
        print(f"cdk app: bundling {self._recipe.asset.name}", file=sys.stderr, flush=True)
        try:
            self._recipe.write(Path(output_dir))
        except refusals.REFUSALS as refusal:
            refusals.note(refusal)
            raise
        return True


def function_code(recipe: AssetRecipe) -> lambda_.Code:
    """The function's code asset, bundled at synth from ``recipe``.

    Raises:
        BundleError, WorkflowCodeError: the code cannot be shipped as configured
            (raised while the stack is built, before anything is bundled).
    """
    # Raised here, as the stack is built, not inside the bundling callback, whose
    # failure reaches the app inside a jsii error and traceback.
    recipe.check_installer()
    recipe.refuse_replaced_dependencies()
    return lambda_.Code.from_asset(
        # Only where CDK looks when bundling is skipped (a stack not being synthesized).
        str(recipe.source_root / "functions" / recipe.asset.name),
        asset_hash=recipe.content_hash(),
        asset_hash_type=AssetHashType.CUSTOM,
        bundling=BundlingOptions(
            image=DockerImage.from_registry(_NO_DOCKER_IMAGE), local=LocalBundling(recipe)
        ),
    )
