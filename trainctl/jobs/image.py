"""Container images from the user's code: a base built from Debian's packages, a layer with the
requirements, a layer with the code. buildah builds them with its layer cache, so a change to
one file of the code rebuilds and pushes only the code layer; images are named by content
(their image id) and nodes pull them by manifest digest.

The base is a Debian rootfs made once by debootstrap (scripts/base-rootfs.sh, run by
scripts/install.sh): nothing is pulled from a public registry. Its Python is the controller's
(Debian's 3.11), so the wheels in the controller's uv cache install into it offline.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict

from bootstrap.containers import cert_args
from bootstrap.plan import BootstrapSpec, filter_args, installs
from bootstrap.ssh import join
from bootstrap.uv_cache import controller_uv, fill_uv_cache, install_failure, installed_names
from infra.errors import ConfigError, ProvisionError
from infra.providers.inventory import Registry
from infra.providers.stack_home import cache_dir

# Where an image built by trainctl holds the program and its environment.
IMAGE_CODE = "/opt/trainctl/code"
IMAGE_VENV = "/opt/trainctl/venv"
IMAGE_REQUIREMENTS = "/opt/trainctl/requirements"
REQUIREMENTS_FILE = "requirements.txt"
BASE_TAR = "base/debian-bookworm-python3.tar"
LOCAL_PREFIX = "localhost/trainctl/"
BASE_NAME = f"{LOCAL_PREFIX}base"
# Inside the build only: the controller's uv, its cache and wheelhouse, mounted for one RUN.
BUILD_UV = "/trainctl-build/uv"
BUILD_CACHE = "/trainctl-build/uv-cache"
BUILD_WHEELS = "/trainctl-build/wheels"
IMAGE_PATH = f"{IMAGE_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImageError(ProvisionError):
    title = "image build failed"


class ImageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str  # the experiment's name: the image's repository name
    code: BootstrapSpec  # code folder, excludes, requirements: what bootstrap would sync


@dataclass(frozen=True)
class BuiltImage:
    name: str
    tag: str  # the image id's first 16 hex digits: named by content

    @property
    def local(self) -> str:
        return f"{LOCAL_PREFIX}{self.name}:{self.tag}"

    @classmethod
    def from_ref(cls, ref: str) -> BuiltImage:
        """An image `trainctl build` made earlier: localhost/trainctl/<name>:<tag>."""
        name, _, tag = ref.removeprefix(LOCAL_PREFIX).partition(":")
        if not ref.startswith(LOCAL_PREFIX) or not name or not tag:
            raise ConfigError(f"image {ref!r}: expected {LOCAL_PREFIX}<name>:<tag>, as `trainctl build` prints")
        if not _exists(ref):
            raise ConfigError(f"image {ref!r} is not in trainctl's image store; `trainctl build` makes it")
        return cls(name, tag)


def base_tar() -> Path:
    return cache_dir() / BASE_TAR


def containerfile(spec: ImageSpec, base: str) -> str:
    """Least-changing first: the base, then the environment, then the code."""
    lines = [f"FROM {base}",
             f"ENV VIRTUAL_ENV={IMAGE_VENV} PATH={IMAGE_PATH} PYTHONUNBUFFERED=1",
             f"RUN python3 -m venv --without-pip {IMAGE_VENV}"]
    if installs(spec.code):
        uv_env = (f"UV_CACHE_DIR={BUILD_CACHE} UV_LINK_MODE=copy UV_OFFLINE=1 UV_PYTHON_DOWNLOADS=never "
                  f"UV_COMPILE_BYTECODE=1 UV_FIND_LINKS={BUILD_WHEELS}")
        # with the local files it names (wheels staged from packageUris, `./libs/x`), read
        # from its folder as on the nodes: a change to one of them rebuilds this layer
        lines += [f"COPY requirements/ {IMAGE_REQUIREMENTS}/",
                  f"RUN cd {IMAGE_REQUIREMENTS} && {uv_env} {BUILD_UV} pip install -q --python {IMAGE_VENV}/bin/python "
                  f"{join([*(['-r', REQUIREMENTS_FILE] if spec.code.requirements else []), *spec.code.packages])}"]
    lines += [f"COPY code/ {IMAGE_CODE}/", f"WORKDIR {IMAGE_CODE}"]
    return "\n".join(lines) + "\n"


def _limits() -> list[str]:
    """Build containers get this process's own limits: podman's defaults for root exceed what a
    process without CAP_SYS_RESOURCE may set. runc was seen refusing an NPROC above pid_max
    (even one below the hard limit), so it is capped there."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1] % (1 << 62),
                int(Path("/proc/sys/kernel/pid_max").read_text()))
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def build_env() -> dict[str, str]:
    """The controller's image store, trainctl's own (a cache, like the uv cache)."""
    d = cache_dir() / "containers"
    d.mkdir(parents=True, exist_ok=True)
    storage = d / "storage.conf"
    if not storage.exists():
        storage.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{d / "storage"}"\n'
                           'runroot = "/run/trainctl-build"\n')
    return {**os.environ, "CONTAINERS_STORAGE_CONF": str(storage)}


def _buildah(args: list[str], log: Path, what: str) -> str:
    exe = shutil.which("buildah")
    if exe is None:
        raise ConfigError("buildah is not installed: run scripts/install.sh (Debian's buildah, "
                          "podman, runc and docker-registry)")
    with open(log, "a") as out:
        out.write(f"$ buildah {shlex.join(args)}\n")
        out.flush()
        done = subprocess.run([exe, *args], env=build_env(), stdout=subprocess.PIPE,
                              stderr=out, text=True)
        out.write(done.stdout)
    if done.returncode != 0:
        raise ImageError(f"{what}: buildah exited {done.returncode}; see {log}")
    return done.stdout


def _exists(ref: str) -> bool:
    exe = shutil.which("buildah") or "buildah"
    return subprocess.run([exe, "inspect", "--type", "image", ref], env=build_env(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def image_command(ref: str, where: str) -> tuple[list[str], list[str]]:
    """An image's ENTRYPOINT and CMD, from its configuration: an image in trainctl's store
    (buildah), or one in a registry (skopeo reads the configuration without pulling the layers)."""
    if ref.startswith(LOCAL_PREFIX):
        if not _exists(ref):
            raise ConfigError(f"{where}: image {ref!r} is not in trainctl's image store; `trainctl build` makes it")
        exe = shutil.which("buildah") or "buildah"
        argv = [exe, "inspect", "--type", "image", ref]
    else:
        skopeo = shutil.which("skopeo")
        if skopeo is None:
            raise ConfigError(f"{where}: no command, and reading {ref}'s ENTRYPOINT needs skopeo (scripts/install.sh "
                              "installs it): install it, or give command")
        argv = [skopeo, "inspect", "--config", f"docker://{ref}"]
    done = subprocess.run(argv, env=build_env(), capture_output=True, text=True)
    if done.returncode:
        raise ConfigError(f"{where}: no command, and {ref}'s ENTRYPOINT cannot be read: {done.stderr.strip()[-500:]}")
    found = json.loads(done.stdout)
    config = (found.get("OCIv1") or found).get("config") or {}  # buildah's inspection, skopeo's configuration
    return list(config.get("Entrypoint") or []), list(config.get("Cmd") or [])


def ensure_base(log: Path) -> str:
    """The base image, imported once from the debootstrapped rootfs; named by the tar's identity."""
    tar = base_tar()
    if not tar.is_file():
        raise ConfigError(f"no base image rootfs at {tar}: run scripts/install.sh (it builds it "
                          "with debootstrap from Debian's packages)")
    st = tar.stat()
    ref = f"{BASE_NAME}:{hashlib.sha256(f'{st.st_size}:{st.st_mtime_ns}'.encode()).hexdigest()[:16]}"
    if not _exists(ref):
        context = tar.parent
        (context / "Containerfile.base").write_text(f"FROM scratch\nADD {tar.name} /\nCMD [\"bash\"]\n")
        _buildah(["bud", "--quiet", "-f", str(context / "Containerfile.base"), "-t", ref, str(context)],
                 log, "importing the base rootfs")
    return ref


def prepare_context(spec: ImageSpec) -> Path:
    """The build context: the code as bootstrap would sync it (same filters), and the
    requirements. Kept between builds, so rsync sends only what changed."""
    context = cache_dir() / "containers" / "context" / spec.name
    (context / "code").mkdir(parents=True, exist_ok=True)
    src = str(spec.code.code_dir.resolve()) + "/"
    done = subprocess.run(["rsync", "-a", "--delete", "--delete-excluded", *filter_args(spec.code),
                           src, str(context / "code") + "/"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageError(f"copying {src} into the build context: {done.stderr.strip()}")
    req = context / "requirements"
    shutil.rmtree(req, ignore_errors=True)
    req.mkdir()  # the install's folder, where packages alone (no file) install from too
    if spec.code.requirements:
        source = spec.code.code_dir / spec.code.requirements
        shutil.copyfile(source, req / REQUIREMENTS_FILE)
        for local in local_requirements(source.read_text()):
            found = spec.code.code_dir / local
            if not found.exists():
                raise ConfigError(f"{source} names {local}, which is not in {spec.code.code_dir}")
            (req / local).parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if found.is_dir() else shutil.copy2)(found, req / local)
    return context


def local_requirements(text: str) -> list[str]:
    """The paths inside the code folder that a requirements file installs from (`./x.whl`,
    `./libs/pkg`, `-e ./pkg`), as uv reads them relative to the folder it runs in."""
    paths = []
    for line in text.splitlines():
        for word in line.split("#", 1)[0].split():
            if word.startswith("./") and ".." not in Path(word).parts:
                paths.append(str(Path(word)))
    return paths


def build(spec: ImageSpec, log: Path, progress: Callable[[str], None] = lambda _: None) -> BuiltImage:
    log.parent.mkdir(parents=True, exist_ok=True)
    base = ensure_base(log)
    context = prepare_context(spec)
    volumes: list[str] = []
    if installs(spec.code):
        from infra.providers.offline_uv import offline_uv_env

        # the requirements into the controller's uv cache (as bootstrap's prefetch does for
        # offline nodes), so the build installs them without a network
        uv_env = offline_uv_env(cache_dir())
        code, output = fill_uv_cache(uv_env, spec.code, log)
        if code != 0:
            raise ImageError(install_failure(installed_names(spec.code), output, log))
        uv = shutil.which(controller_uv())
        if uv is None:
            raise ConfigError("uv is not installed: run scripts/install.sh")
        volumes += ["--volume", f"{uv}:{BUILD_UV}:ro",
                    "--volume", f"{uv_env['UV_CACHE_DIR']}:{BUILD_CACHE}:rw"]
        wheels = uv_env.get("UV_FIND_LINKS")
        volumes += ["--volume", f"{wheels}:{BUILD_WHEELS}:ro"] if wheels else []
    (context / "Containerfile").write_text(containerfile(spec, base))
    progress(f"building image {spec.name} (base {base})")
    iidfile = context / "image-id"
    _buildah(["bud", "--layers", "--quiet", "--runtime", "runc", "--network", "none", *_limits(),
              *volumes, "--iidfile", str(iidfile), "-f", str(context / "Containerfile"),
              "-t", f"{LOCAL_PREFIX}{spec.name}:latest", str(context)], log, f"building {spec.name}")
    built = BuiltImage(spec.name, iidfile.read_text().strip().removeprefix("sha256:")[:16])
    _buildah(["tag", f"{LOCAL_PREFIX}{spec.name}:latest", built.local], log, "tagging")
    return built


def stand_in(name: str, code: BootstrapSpec, log: Path) -> str:
    """Where a stack's pods run stand-ins for images (a simulated cluster pulls none): the code and
    an environment of its requirements, made as bootstrap seeds offline nodes', handed over in
    place of a built image; its reference."""
    import fcntl

    from bootstrap.plan import seed_argv
    from infra.providers.offline_uv import offline_uv_env
    from infra.providers.simulated_project import stand_in_image

    env = None
    if installs(code):
        uv_env = offline_uv_env(cache_dir())
        env = seed_argv(uv_env, code, controller_uv())[2]
        env.parent.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{env}.lock", "a") as lock:  # two runs may want the same environment at once
            fcntl.flock(lock, fcntl.LOCK_EX)
            exit_code, output = fill_uv_cache(uv_env, code, log)
        if exit_code != 0:
            raise ImageError(install_failure(installed_names(code), output, log))
    return stand_in_image(name, code.code_dir, env, tuple(filter_args(code)))


def _login(registry: Registry, log: Path) -> None:
    """Artifact Registry takes an OAuth access token as the password of `oauth2accesstoken`:
    the controller's application-default credentials, passed on stdin (never in argv)."""
    import google.auth
    import google.auth.transport.requests

    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    credentials.refresh(google.auth.transport.requests.Request())
    exe = shutil.which("buildah") or "buildah"
    done = subprocess.run([exe, "login", "--username", "oauth2accesstoken", "--password-stdin", registry.host],
                          input=credentials.token, env=build_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageError(f"logging in to {registry.host}: {done.stderr.strip()}")


def push(built: BuiltImage, registry: Registry, log: Path,
         progress: Callable[[str], None] = lambda _: None) -> str:
    """Push to the stack's registry (layers it has are not sent); returns the reference by
    digest, which names the same image under any address of the registry."""
    digest_file = log.parent / f"{built.name}.digest"
    progress(f"pushing {registry.repository}/{built.name}:{built.tag}")
    if registry.metadata_token:
        _login(registry, log)
    with registry.push_target() as target:
        _buildah(["push", "--quiet", *cert_args(registry), "--digestfile", str(digest_file), built.local,
                  f"docker://{target}/{built.name}:{built.tag}"], log, f"pushing {built.name}")
    return f"{registry.repository}/{built.name}@{digest_file.read_text().strip()}"
