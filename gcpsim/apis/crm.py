"""Cloud Resource Manager v1 and v3: a project as the API shows it, and its IAM policy.

https://cloud.google.com/resource-manager/reference/rest/v1/projects
https://cloud.google.com/resource-manager/reference/rest/v3/projects
The Pulumi provider's `projects.Service` reads the project with v1 `projects.get` after every
enablement, and `projects.IAMMember` does a read-modify-write of the project's policy with v1
getIamPolicy/setIamPolicy: so both need `cloudresourcemanager.googleapis.com` on in the
project, which the server's admission checks (a fresh project has it off).

A simulated project has no parent folder or organization and no display name of its own (its
id is shown); it is ACTIVE while it exists in the world. Its policy starts without bindings:
the simulator does not model who created it.
"""

from __future__ import annotations

from typing import Any

from gcpsim import operations
from gcpsim.apis import iam_policy
from gcpsim.routes import Call, handles


def _project(call: Call, name: str) -> dict[str, Any]:
    project = call.world.project(name.removeprefix("projects/"))
    assert project is not None  # the server admitted the call: the project exists
    return project


def _created(project: dict[str, Any]) -> dict[str, str]:
    at = project.get("created_at")
    return {"createTime": operations.rfc3339(at)} if at else {}


@handles("cloudresourcemanager.projects.get")
def get(call: Call) -> Any:
    if "projectId" in call.params:  # v1
        project = _project(call, call.params["projectId"])
        return {"projectNumber": str(project["number"]), "projectId": project["id"],
                "lifecycleState": "ACTIVE", "name": project["id"], **_created(project)}
    project = _project(call, call.params["name"])  # v3
    return {"name": f"projects/{project['number']}", "projectId": project["id"], "state": "ACTIVE",
            "displayName": project["id"], **_created(project),
            "etag": iam_policy.etag_for(project["number"] % 2**48)}


def _policy_of(call: Call) -> tuple[str, str]:
    """v1 names the project by id (`resource`), v3 as `projects/<id|number>`."""
    project_id = _project(call, call.params["resource"])["id"]
    return project_id, f"projects/{project_id}"


iam_policy.policy_methods("cloudresourcemanager.projects.getIamPolicy", "cloudresourcemanager.projects.setIamPolicy",
                          _policy_of)
