"""The simulator's pulumi, driven by the Automation API exactly as trainctl's realizer drives the
real CLI, over a tiny provider (tests/fakes/sim_pulumi_fake.py) whose every mutation is logged: the
engine's steps (create, same, update, replace, delete), its options (retain_on_delete,
import, ignore_changes, depends_on, protect), refresh, policy packs, failures, and the stack
commands (outputs with secrecy, history, stack rm)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from pulumi import automation as auto

from tests.fakes.sim_pulumi_fake import REPO, FakeProject, Thing


@pytest.fixture
def project(tmp_path: Path, pulumi_server: Path) -> FakeProject:
    return FakeProject(tmp_path, pulumi_server)


def mutations(project: FakeProject) -> list[list[str]]:
    return [c for c in project.cloud.calls()]


def test_up_creates_what_the_program_declares_and_exports_outputs_with_their_secrecy(project):
    project.declare(Thing("a"), Thing("b", size=2), exports={"plain": "x", "secret_token": "s3"})
    result = project.stack().up()
    assert sorted(t["size"] for t in project.cloud.things().values()) == [1, 2]
    assert result.outputs["plain"].value == "x" and not result.outputs["plain"].secret
    assert result.outputs["secret_token"].value == "s3" and result.outputs["secret_token"].secret
    assert result.summary.result == "succeeded" and result.summary.resource_changes["create"] == 3


def test_a_second_up_of_the_same_program_changes_nothing(project):
    project.declare(Thing("a", label="x"), Thing("b", opts={"depends_on": ["a"]}))
    stack = project.stack()
    stack.up()
    before = mutations(project)
    result = stack.up()
    assert mutations(project) == before
    assert result.summary.resource_changes == {"same": 3}


def test_a_changed_updatable_property_is_updated_in_place(project):
    project.declare(Thing("a", label="x"))
    stack = project.stack()
    stack.up()
    (name,) = project.cloud.things()
    project.declare(Thing("a", label="y"))
    stack.up()
    assert mutations(project)[-1] == ["update", name, "label"]
    assert project.cloud.things()[name]["label"] == "y"


def test_a_changed_force_new_property_replaces_an_auto_named_resource_create_first(project):
    project.declare(Thing("a", size=1))
    stack = project.stack()
    stack.up()
    (old,) = project.cloud.things()
    project.declare(Thing("a", size=2))
    stack.up()
    (new,) = project.cloud.things()
    assert new != old  # a new auto-name
    assert [c[0] for c in mutations(project)[-2:]] == ["create", "delete"]


def test_a_named_resource_is_deleted_before_its_replacement_is_created(project):
    project.declare(Thing("a", extra={"name": "fixed"}))
    stack = project.stack()
    stack.up()
    project.declare(Thing("a", size=5, extra={"name": "fixed"}))
    stack.up()
    assert mutations(project)[-2:] == [["delete", "fixed"], ["create", "fixed"]]
    assert project.cloud.things()["fixed"]["size"] == 5


def test_what_the_program_no_longer_declares_is_deleted_dependents_first(project):
    project.declare(Thing("a", extra={"name": "a"}), Thing("b", extra={"name": "b"}, opts={"depends_on": ["a"]}))
    stack = project.stack()
    stack.up()
    project.declare()
    stack.up()
    assert mutations(project)[-2:] == [["delete", "b"], ["delete", "a"]]


def test_destroy_removes_everything_but_what_is_retained_and_a_later_up_adopts_it_by_import(project):
    kept = Thing("kept", extra={"name": "kept"}, opts={"retain": True})
    project.declare(kept, Thing("gone", extra={"name": "gone"}))
    stack = project.stack()
    stack.up()
    stack.destroy()
    assert list(project.cloud.things()) == ["kept"]
    assert stack.export_stack().deployment["resources"] == []
    project.declare(Thing("kept", extra={"name": "kept"}, opts={"retain": True}))
    with pytest.raises(auto.CommandError, match="already exists"):
        stack.up()  # created again: the name is taken by the kept one
    # an import must match what the program declares (Pulumi's import option is strict) ...
    project.declare(Thing("kept", label="adopted", extra={"name": "kept"}, opts={"retain": True, "import": "kept"}))
    with pytest.raises(auto.CommandError, match="inputs to import do not match the existing resource"):
        stack.up()
    # ... or ignore what differs while importing; the next up changes it in place
    project.declare(Thing("kept", label="adopted", extra={"name": "kept"},
                          opts={"retain": True, "import": "kept", "ignore_changes": ["label"]}))
    stack.up()
    project.declare(Thing("kept", label="adopted", extra={"name": "kept"}, opts={"retain": True}))
    stack.up()
    assert mutations(project)[-1] == ["update", "kept", "label"]
    before = mutations(project)
    stack.up()
    assert mutations(project) == before


def test_importing_a_resource_that_does_not_exist_fails(project):
    project.declare(Thing("x", extra={"name": "nope"}, opts={"import": "nope"}))
    with pytest.raises(auto.CommandError, match="resource 'nope' does not exist"):
        project.stack().up()


def test_ignore_changes_keeps_the_recorded_value(project):
    project.declare(Thing("a", label="first", opts={"ignore_changes": ["label"]}))
    stack = project.stack()
    stack.up()
    project.declare(Thing("a", label="second", opts={"ignore_changes": ["label"]}))
    before = mutations(project)
    stack.up()
    assert mutations(project) == before


def test_up_with_refresh_recreates_a_resource_deleted_outside_pulumi(project):
    project.declare(Thing("a", extra={"name": "a"}))
    stack = project.stack()
    stack.up()
    doc = project.cloud.load()
    doc["things"].clear()
    project.cloud.save(doc)
    stack.up()  # without refresh the state still holds it: nothing to do
    assert project.cloud.things() == {}
    stack.up(refresh=True)
    assert list(project.cloud.things()) == ["a"]


def test_a_provider_error_mid_update_keeps_what_was_created_and_destroy_removes_it(project):
    project.declare(Thing("a", extra={"name": "a"}),
                    Thing("b", extra={"name": "b", "failWith": "Error 403: quota exceeded, quotaExceeded"},
                          opts={"depends_on": ["a"]}))
    stack = project.stack()
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    assert "Error 403: quota exceeded, quotaExceeded" in str(failure.value)
    assert "unhandled exception" not in str(failure.value)  # the program only saw the step fail
    assert list(project.cloud.things()) == ["a"]
    assert stack.history()[0].result == "failed"
    stack.destroy()
    assert project.cloud.things() == {}


def test_a_failing_program_deletes_nothing(project):
    project.declare(Thing("a", extra={"name": "a"}))
    stack = project.stack()
    stack.up()
    project.declare(crash="bad input")
    with pytest.raises(auto.RuntimeError, match="bad input"):
        stack.up()
    assert list(project.cloud.things()) == ["a"]


def test_a_protected_resource_is_not_destroyed(project):
    project.declare(Thing("a", extra={"name": "a"}, opts={"protect": True}))
    stack = project.stack()
    stack.up()
    with pytest.raises(auto.CommandError, match="marked for protection"):
        stack.destroy()
    assert list(project.cloud.things()) == ["a"]


POLICY = '''
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy

def small(args, report_violation):
    if args.resource_type == "fake:index:Thing" and (args.props.get("size") or 0) > 10:
        report_violation("things hold at most 10")

PolicyPack("fake-rules", [ResourceValidationPolicy(
    name="thing-size", description="Things are small.", validate=small,
    enforcement_level=EnforcementLevel.MANDATORY)])
'''


def test_a_mandatory_policy_violation_fails_up_before_the_resource_is_created(project, tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    venv = os.path.relpath(REPO / ".venv", pack)
    (pack / "PulumiPolicy.yaml").write_text(f"runtime:\n  name: python\n  options:\n    virtualenv: {venv}\n")
    (pack / "__main__.py").write_text(textwrap.dedent(POLICY))
    project.declare(Thing("ok", extra={"name": "ok"}), Thing("big", size=11, extra={"name": "big"},
                                                             opts={"depends_on": ["ok"]}))
    with pytest.raises(auto.CommandError) as failure:
        project.stack().up(policy_packs=[str(pack)])
    assert "things hold at most 10" in str(failure.value) and "[mandatory]" in str(failure.value)
    assert list(project.cloud.things()) == ["ok"]


def test_stack_rm_deletes_the_stack_config_file_unless_asked_to_preserve_it(project):
    config = project.root / "Pulumi.dev.yaml"
    config.write_text("config:\n  fakeproj:x: 1\n")
    stack = project.stack()
    stack.workspace.remove_stack("dev", preserve_config=True)
    assert config.exists()
    stack = project.stack()
    stack.workspace.remove_stack("dev")
    assert not config.exists()
    with pytest.raises(auto.StackNotFoundError):
        auto.select_stack(stack_name="dev", work_dir=str(project.root),
                          opts=auto.LocalWorkspaceOptions(env_vars=project.env(),
                                                          pulumi_command=auto.PulumiCommand(root=str(project.bin))))


def test_a_stack_with_resources_is_not_removed_without_force(project):
    project.declare(Thing("a"))
    stack = project.stack()
    stack.up()
    with pytest.raises(auto.CommandError, match="still has resources"):
        stack.workspace.remove_stack("dev")


def test_a_cli_killed_during_a_create_leaves_a_pending_operation_the_next_update_reports(project):
    import signal
    import subprocess
    import time

    project.declare(Thing("slow", extra={"name": "slow", "hangFor": 60}))
    project.stack()  # creates the stack
    cli = subprocess.Popen([str(project.bin / "bin" / "pulumi"), "up", "--yes", "--skip-preview", "--stack", "dev"],
                           cwd=project.root, env={**os.environ, **project.env()},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while ["started", "slow"] not in project.cloud.calls() and time.monotonic() < deadline:
        time.sleep(0.05)
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    project.declare(Thing("slow", extra={"name": "slow"}))
    result = project.stack().up()
    assert "1 pending operations from previous deployment" in result.stdout
    assert "fake:index:Thing::slow, interrupted while creating" in result.stdout
    assert list(project.cloud.things()) == ["slow"]
