"""A tiny provider package (`fake`) and project for testing the simulator's pulumi engine and CLI
through the Automation API, apart from any Google API.

Its "cloud" is a JSON file named by the provider resource's `cloudFile` input; every call that
changes it is logged there, so a test sees exactly which mutations an update made. The one
resource type, fake:index:Thing, has an auto-named `name`, an in-place updatable `label` and
`labels`, and a `size` that forces replacement (as a Terraform ForceNew field would).

    project = FakeProject(tmp_path)            # Pulumi.yaml + program reading program.json
    project.declare(Thing("a", size=1), ...)   # what the program declares on the next run
    stack = project.stack("dev")               # an Automation API stack driving the stand-in
"""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcpsim.pulumi import write_launcher
from gcpsim.pulumi.cli import PACKAGES_ENV
from gcpsim.pulumi.plugins import BridgedResource, Diff, ProviderError

REPO = Path(__file__).resolve().parents[2]
THING = "fake:index:Thing"


class Cloud:
    lock = threading.RLock()  # steps run on several threads at once

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        with self.lock:
            if not self.path.exists():
                return {"things": {}, "calls": []}
            return json.loads(self.path.read_text())

    def save(self, doc: dict[str, Any]) -> None:
        with self.lock:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.path)

    def things(self) -> dict[str, Any]:
        return self.load()["things"]

    def calls(self) -> list[list[str]]:
        return self.load()["calls"]


class ThingType(BridgedResource):
    token = THING
    force_new = frozenset({"size"})
    maps = frozenset({"labels"})

    def __init__(self, cloud: Cloud) -> None:
        self.cloud = cloud

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if inputs.get("hangFor"):  # a slow create, to be interrupted
            with Cloud.lock:
                doc = self.cloud.load()
                doc["calls"].append(["started", inputs["name"]])
                self.cloud.save(doc)
            time.sleep(float(inputs["hangFor"]))
        with Cloud.lock:
            return self._create(inputs)

    def _create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        doc = self.cloud.load()
        if inputs.get("failWith"):
            raise ProviderError(inputs["failWith"])
        if inputs["name"] in doc["things"]:
            raise ProviderError(f"Error 409: thing {inputs['name']} already exists, alreadyExists")
        doc["things"][inputs["name"]] = inputs
        doc["calls"].append(["create", inputs["name"]])
        self.cloud.save(doc)
        return inputs["name"], {**inputs, "id": inputs["name"], "serial": len(doc["calls"])}

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.cloud.things().get(id_)
        return None if found is None else {**state, **found, "id": id_}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        with Cloud.lock:
            doc = self.cloud.load()
            doc["things"][id_] = {**doc["things"][id_], **news}
            doc["calls"].append(["update", id_, *diff.changed])
            self.cloud.save(doc)
        return {**state, **news}

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        if state.get("deleteFails"):
            raise ProviderError(f"Error 400: thing {id_} is in use, resourceInUse")
        with Cloud.lock:
            doc = self.cloud.load()
            doc["things"].pop(id_, None)
            doc["calls"].append(["delete", id_])
            self.cloud.save(doc)


class FakePackage:
    def __init__(self, config: dict[str, Any]) -> None:
        self.cloud = Cloud(Path(config["cloudFile"]))

    def resource(self, token: str) -> ThingType:
        if token != THING:
            raise ProviderError(f"unknown resource type {token!r}")
        return ThingType(self.cloud)


PACKAGES = {"fake": FakePackage}

PROGRAM = '''
import json
from pathlib import Path

import pulumi

spec = json.loads(Path("program.json").read_text())
provider = pulumi.ProviderResource("fake", "cloud", {"cloudFile": spec["cloud"]})
made = {}
for r in spec["resources"]:
    o = r.get("opts", {})
    opts = pulumi.ResourceOptions(
        provider=provider, retain_on_delete=o.get("retain"), protect=o.get("protect"),
        depends_on=[made[d] for d in o.get("depends_on", [])], import_=o.get("import"),
        ignore_changes=o.get("ignore_changes"), delete_before_replace=o.get("dbr"))
    props = {"name": None, "size": None, "label": None, "labels": None, "serial": None,
             **r["props"]}
    made[r["name"]] = pulumi.CustomResource("fake:index:Thing", r["name"], props, opts)
for key, value in spec.get("exports", {}).items():
    pulumi.export(key, pulumi.Output.secret(value) if key.startswith("secret") else value)
if spec.get("crash"):
    raise RuntimeError(spec["crash"])
'''

@dataclass
class Thing:
    name: str
    size: int = 1
    label: str | None = None
    opts: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> dict[str, Any]:
        props = {"size": self.size, **({"label": self.label} if self.label else {}), **self.extra}
        return {"name": self.name, "props": props, "opts": self.opts}


class FakeProject:
    def __init__(self, root: Path, server: Path | None = None) -> None:
        self.root = root / "project"
        self.root.mkdir(parents=True)
        self.backend = root / "backend"
        self.backend.mkdir()
        self.cloud = Cloud(root / "cloud.json")
        (self.root / "Pulumi.yaml").write_text("name: fakeproj\nruntime: python\n")
        (self.root / "__main__.py").write_text(textwrap.dedent(PROGRAM))
        self.bin = root / "cli"
        write_launcher(self.bin / "bin", server=server)  # the stand-in, serving this module's PACKAGES
        self.declare()

    def declare(self, *things: Thing, exports: dict[str, Any] | None = None, crash: str = "") -> None:
        (self.root / "program.json").write_text(json.dumps({
            "cloud": str(self.cloud.path), "resources": [t.spec() for t in things],
            "exports": exports or {}, "crash": crash}))

    def env(self) -> dict[str, str]:
        return {"PULUMI_BACKEND_URL": f"file://{self.backend}", "PULUMI_CONFIG_PASSPHRASE": "",
                "PULUMI_HOME": str(self.bin / "home"), "PATH": os.environ["PATH"],
                PACKAGES_ENV: f"{__name__}:PACKAGES"}

    def stack(self, name: str = "dev") -> Any:
        from pulumi import automation as auto

        command = auto.PulumiCommand(root=str(self.bin))
        return auto.create_or_select_stack(stack_name=name, work_dir=str(self.root), opts=auto.LocalWorkspaceOptions(
            env_vars=self.env(), pulumi_command=command))
