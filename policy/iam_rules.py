"""The constraint on what a stack's own machines may do through the APIs: a custom role that
lets its holder change VMs (setLabels, and the like) is granted on the project only under an
IAM condition that names the VMs it may change (resource.name), and holds no right to delete or
to reach into VMs (metadata carries SSH keys and startup scripts). The reaper's role, which must
find any expired VM of the project, deletes but changes nothing, so it is not this rule's."""

from __future__ import annotations

from typing import Iterator, Sequence

from policy.declared import Resource, as_list, mapping

T_CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
T_PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
CHANGES_VMS = ("compute.instances.setLabels",)
NEVER_WITH_IT = (".delete", "compute.instances.setMetadata", "compute.projects.setCommonInstanceMetadata",
                 "iam.serviceAccounts.actAs")


def _roles_changing_vms(resources: Sequence[Resource]) -> dict[str, Resource]:
    """Custom roles that change VMs, by the full name a grant uses (projects/P/roles/ID)."""
    return {f"projects/{r.props.get('project')}/roles/{r.props.get('roleId')}": r for r in resources
            if r.type == T_CUSTOM_ROLE and set(as_list(r.props.get("permissions"))) & set(CHANGES_VMS)}


def vm_changes_scoped(resources: Sequence[Resource]) -> Iterator[tuple[str, str]]:
    roles = _roles_changing_vms(resources)
    for name, role in roles.items():
        broad = [p for p in as_list(role.props.get("permissions")) if str(p).endswith(NEVER_WITH_IT)]
        if broad:
            yield role.name, (f"role {name} changes VMs and also holds {', '.join(map(str, broad))}: "
                              "a machine holding it could delete or log into the project's VMs")
    for grant in (r for r in resources if r.type == T_PROJECT_MEMBER and r.props.get("role") in roles):
        expression = str(mapping(grant.props.get("condition")).get("expression", ""))
        if "resource.name" not in expression:
            yield grant.name, (f"{grant.name!r} grants {grant.props.get('role')} on the whole project: add "
                               "a condition naming the VMs it may change (resource.name == "
                               "\"projects/P/zones/Z/instances/N\")")
