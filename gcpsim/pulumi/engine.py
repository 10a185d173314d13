"""The deployment engine: each registration the program makes becomes a step (create, same,
update, replace, import), applied through the resource's provider as it arrives, as Pulumi's
step generator and executor do (pkg/resource/deploy/step_generator.go, step.go):

  - inputs are first given their ignored values back (ignoreChanges), checked by the provider
    (auto-names), then analyzed by the policy packs; a mandatory violation makes the resource
    invalid and fails the update before it is touched;
  - a resource with an `import` id that the state does not hold yet is read from the cloud
    (it must exist) and must match what the program declares, ignoreChanges aside: any
    difference fails the step ("inputs to import do not match the existing resource"), as
    Pulumi's import option does (https://www.pulumi.com/docs/iac/adopting-pulumi/import/);
  - a replacement deletes first where the provider says so (delete-before-replace), else
    creates the new resource and deletes the old one at the end of the update;
  - what the program no longer declares is deleted at the end in reverse dependency order
    (deletes.py), except resources marked retainOnDelete, which only leave the state.
A failed step stops the update: steps in flight finish, nothing new starts, and the state keeps
everything done so far (so `destroy` can remove it).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from gcpsim.pulumi import deletes
from gcpsim.pulumi.display import Display
from gcpsim.pulumi.goal import Goal
from gcpsim.pulumi.plugins import (
    DEFAULTS_KEY, Diff, Package, PackageFactory, ProviderError, inputs_of, unknown_type)
from gcpsim.pulumi.properties import (
    apply_ignore_changes, path_matches, plain, secret_keys, with_asset_hashes, wrap_secrets)
from gcpsim.pulumi.snapshot import Journal, now_iso
from gcpsim.pulumi.providers import ProviderRegistry, is_provider_type

STACK_TYPE = "pulumi:pulumi:Stack"


class StepFailed(Exception):
    """A step failed: the program's registration fails and the update ends."""


def new_state(goal: Goal, id_: str, outputs: dict[str, Any], inputs: dict[str, Any] | None = None,
              created: str | None = None) -> dict[str, Any]:
    """A resource as the checkpoint records it (apitype.ResourceV3's fields)."""
    state = {"urn": goal.urn, "custom": goal.custom, "id": id_, "type": goal.type,
             "inputs": goal.inputs if inputs is None else inputs, "outputs": outputs,
             "parent": goal.parent, "dependencies": list(goal.dependencies),
             "propertyDependencies": dict(goal.property_dependencies),
             "created": created or now_iso(), "modified": now_iso()}
    for key, value in (("provider", goal.provider), ("protect", goal.protect),
                       ("retainOnDelete", goal.retain_on_delete), ("importID", goal.import_id),
                       ("additionalSecretOutputs", goal.additional_secret_outputs)):
        if value:
            state[key] = value
    return state


class Deployment:
    """One `up`: the registrations of one program run against the stack's previous state."""

    def __init__(self, *, project: str, stack: str, olds: list[dict[str, Any]],
                 factories: dict[str, PackageFactory], config: dict[str, Any], display: Display,
                 analyze: Callable[..., list[str]] | None = None,
                 save: Callable[[list[dict[str, Any]]], None] | None = None,
                 journal: Journal | None = None) -> None:
        self.project, self.stack = project, stack
        self.olds = {s["urn"]: s for s in olds}
        self.news: dict[str, dict[str, Any]] = {}
        self.pending_deletes: list[dict[str, Any]] = [s for s in olds if s.get("delete")]
        self.providers = ProviderRegistry(project, stack, factories, config, self.olds)
        self.display = display
        self.analyze = analyze
        self._save = save
        self.journal = journal or Journal()
        self.lock = threading.RLock()
        self.failed = False

    # -- the monitor's entry points ---------------------------------------------------------

    def register(self, goal: Goal) -> dict[str, Any]:
        if self.failed:
            raise StepFailed("the update failed; no further steps run")
        try:
            if goal.type == STACK_TYPE or not goal.custom:
                state = self._component(goal)
            elif is_provider_type(goal.type):
                state = self.providers.register(goal, self.olds.get(goal.urn), new_state)
            else:
                state = self._custom(goal)
        except StepFailed:
            self.failed = True
            raise
        old = self.olds.get(goal.urn)
        # an unchanged resource is in the saved state already: no need to write it again now
        self._record(state, persist=old is None or any(state[k] != old.get(k) for k in ("id", "inputs", "outputs")))
        return state

    def register_outputs(self, urn: str, outputs: dict[str, Any]) -> None:
        with self.lock:
            if urn not in self.news or self.news[urn]["outputs"] == outputs:
                return
            self.news[urn]["outputs"] = outputs
        self.save()

    def stack_outputs(self) -> dict[str, Any]:
        stack = next((s for s in self.news.values() if s["type"] == STACK_TYPE), None)
        return stack["outputs"] if stack else {}

    def finish(self) -> bool:
        """After the program: delete what it no longer declares, run the stack policies."""
        if not self.failed:
            gone = [s for urn, s in self.olds.items() if urn not in self.news and not s.get("delete")]
            ok = deletes.delete_all(gone + self.pending_deletes, self.providers, self.display,
                                    on_deleted=self._forget, journal=self.journal)
            self.failed = not ok
        if not self.failed and self.analyze is not None:
            self.failed = bool(self.analyze(list(self.news.values())))
        self.save()
        return not self.failed

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            states = list(self.news.values())
            states += [s for urn, s in self.olds.items() if urn not in self.news and not s.get("delete")]
            states += self.pending_deletes
            return states  # registration order: what a resource needs was registered before it

    def save(self) -> None:
        """The state as it is now; written under the lock, so no step changes it meanwhile."""
        if self._save is not None:
            with self.lock:
                self._save(self.snapshot())

    # -- steps ------------------------------------------------------------------------------

    def _component(self, goal: Goal) -> dict[str, Any]:
        old = self.olds.get(goal.urn)
        self.display.step("same" if old else "create", goal.type, goal.name, done=True)
        return new_state(goal, "", old["outputs"] if old else {}, created=old.get("created") if old else None)

    def _custom(self, goal: Goal) -> dict[str, Any]:
        package, provider_ref = self.providers.package_for(goal, new_state, self._record)
        goal.provider = provider_ref
        try:
            rtype = package.resource(goal.type)
        except ProviderError as exc:
            self._fail("create", goal, str(exc))
        old = self.olds.get(goal.urn)
        if old is not None and old.get("delete"):
            old = None
        program = with_asset_hashes(goal.inputs)
        goal.declared = apply_ignore_changes(program, old["inputs"] if old else None, goal.ignore_changes)
        news = rtype.check(goal.name, goal.declared, old["inputs"] if old else None)
        goal.inputs = news
        self._policy(goal, news)
        importing = bool(goal.import_id) and (old is None or (old.get("importID") or old["id"]) != goal.import_id)
        if importing:
            old = self._import(goal, rtype)
            # ignoreChanges holds against what was imported: those values are the cloud's
            goal.declared = apply_ignore_changes(program, old["inputs"], goal.ignore_changes)
            news = goal.inputs = rtype.check(goal.name, goal.declared, old["inputs"])
        if old is None:
            return self._create(goal, rtype, "create")
        diff = rtype.diff(old["inputs"], old["outputs"], news)
        if importing and diff.changed:
            self._fail("import", goal, "inputs to import do not match the existing resource; the following "
                                       "properties differed: " + ", ".join(sorted(diff.changed)))
        diff.replaces += [p for p in diff.changed if p not in diff.replaces
                          and any(path_matches(pat, p) for pat in goal.replace_on_changes)]
        if diff.needs_replace:
            return self._replace(goal, rtype, old, diff)
        # an unchanged resource whose create failed gets an empty update, "to attempt to continue
        # awaiting initialization" (pulumi/pulumi pkg/resource/deploy/step_generator.go, old.InitErrors)
        if diff.changed or old.get("initErrors"):
            return self._update(goal, rtype, old, diff)
        self.display.step("same", goal.type, goal.name, done=True)
        return new_state(goal, old["id"], old["outputs"], created=old.get("created"))

    def _policy(self, goal: Goal, news: dict[str, Any]) -> None:
        if self.analyze is None:
            return
        provider = self.news.get(goal.provider.rsplit("::", 1)[0])
        if self.analyze(goal, news, provider):
            self._fail("create", goal, f"resource {goal.urn} is invalid")

    def _import(self, goal: Goal, rtype: Any) -> dict[str, Any]:
        self.display.step("import", goal.type, goal.name)
        state = self._call("import", goal, lambda: rtype.read(goal.import_id, {}, {}))
        if state is None:
            self._fail("import", goal, f"resource '{goal.import_id}' does not exist")
        inputs = {k: v for k, v in state.items() if k in goal.inputs}
        imported = new_state(goal, str(state.get("id") or goal.import_id), state, inputs=inputs)
        self.display.step("import", goal.type, goal.name, done=True)
        return imported

    def _create(self, goal: Goal, rtype: Any, op: str) -> dict[str, Any]:
        self.display.step(op, goal.type, goal.name)
        try:
            with self.journal.operation("creating", new_state(goal, "", {})):
                # the engine passes the custom timeouts on with the Create call
                rtype.create_timeout, rtype.update_timeout = goal.create_timeout, goal.update_timeout
                id_, outputs = rtype.create(inputs_of(goal.inputs))
        except Exception as exc:  # noqa: BLE001 - any provider failure fails this step only
            # a resource that exists although its create failed stays in the state, with the error
            if isinstance(exc, ProviderError) and exc.partial is not None:
                partial = new_state(goal, exc.partial[0], self._secrets(goal, exc.partial[1]))
                partial["initErrors"] = [str(exc)]
                self._record(partial)
            self._fail(op, goal, f"creating {goal.urn}: {exc}")
        self.display.step(op, goal.type, goal.name, done=True)
        return new_state(goal, id_, self._secrets(goal, outputs))

    def _update(self, goal: Goal, rtype: Any, old: dict[str, Any], diff: Diff) -> dict[str, Any]:
        self.display.step("update", goal.type, goal.name,
                          detail="diff: ~" + ",~".join(diff.changed) if diff.changed else "")
        rtype.create_timeout, rtype.update_timeout = goal.create_timeout, goal.update_timeout
        with self.journal.operation("updating", old):
            outputs = self._call("update", goal, lambda: rtype.update(
                old["id"], plain(old["outputs"]), inputs_of(goal.inputs), diff))
        self.display.step("update", goal.type, goal.name, done=True)
        return new_state(goal, old["id"], self._secrets(goal, outputs), created=old.get("created"))

    def _replace(self, goal: Goal, rtype: Any, old: dict[str, Any], diff: Diff) -> dict[str, Any]:
        if goal.import_id:
            self._fail("replace", goal, "previously-imported resources that still specify an ID may "
                       "not be replaced; please remove the `import` declaration from your program;\n"
                       + "\n".join(diff.replaces))
        dbr = goal.delete_before_replace if goal.delete_before_replace is not None else diff.delete_before_replace
        if goal.inputs.get(DEFAULTS_KEY):  # a replacement gets new auto-names (the engine checks again)
            goal.inputs = rtype.check(goal.name, goal.declared, None)
        self.display.step("replace", goal.type, goal.name, detail="diff: +-" + ",+-".join(diff.replaces))
        if dbr:
            if not deletes.delete_one(old, self.providers, self.display, "delete-replaced", self.journal):
                self._fail("replace", goal, f"deleting {old['urn']} for its replacement failed")
            self.olds.pop(goal.urn, None)
            state = self._create(goal, rtype, "create-replacement")
        else:
            state = self._create(goal, rtype, "create-replacement")
            with self.lock:
                self.pending_deletes.append({**old, "delete": True})
        self.display.step("replace", goal.type, goal.name, done=True)
        return state

    def _call(self, op: str, goal: Goal, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - any provider failure fails this step only
            self._fail(op, goal, f"{'updating' if op == 'update' else op + 'ing'} {goal.urn}: {exc}")

    def _fail(self, op: str, goal: Goal, message: str) -> Any:
        self.display.failed(op, goal.type, goal.name, message)
        raise StepFailed(message)

    def _secrets(self, goal: Goal, outputs: dict[str, Any]) -> dict[str, Any]:
        return wrap_secrets(outputs, secret_keys(goal.inputs) | set(goal.additional_secret_outputs))

    def _record(self, state: dict[str, Any], persist: bool = True) -> None:
        with self.lock:
            self.news[state["urn"]] = state
        if persist:
            self.save()

    def _forget(self, state: dict[str, Any]) -> None:
        with self.lock:
            if state.get("delete"):
                self.pending_deletes = [s for s in self.pending_deletes if s is not state]
            else:
                self.olds.pop(state["urn"], None)
        self.save()


def provider_id() -> str:
    return str(uuid.uuid4())


__all__ = ["Deployment", "Goal", "StepFailed", "unknown_type", "Package", "provider_id"]
