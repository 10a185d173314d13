"""A spot stack's scheduled reaper (a Cloud Function run by Cloud Scheduler) in a simulated project
where builds take no time: the function must be built only once its build account holds the roles
the build needs, or its first build fails in Cloud Build's words."""

from __future__ import annotations

from pulumi import automation as auto

from infra.providers.gcp import realizer
from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

FUNCTION = "gcp:cloudfunctionsv2/function:Function"
GRANTS = ("gcp:projects/iAMMember:IAMMember", "gcp:storage/bucketIAMMember:BucketIAMMember")


def test_the_reaper_function_is_built_only_once_its_build_account_holds_its_roles(gcp: Project) -> None:
    spec = gcp.stack("gpu-l4-spot")
    realizer.up(spec, gcp.progress)
    deployment = auto.select_stack(stack_name=spec.name, work_dir=str(gcp.root)).export_stack().deployment
    assert deployment is not None
    resources = deployment["resources"]
    function = next(r for r in resources if r["type"] == FUNCTION)
    build_grants = {r["urn"] for r in resources if r["type"] in GRANTS and "-reaper-build-" in r["urn"]}
    assert len(build_grants) == 3 and build_grants <= set(function.get("dependencies", []))
    assert gcp.ok("GET", f"/v2/{function['id']}")["state"] == "ACTIVE"
