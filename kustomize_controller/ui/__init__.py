"""``kustomize-controller ui``: a live web UI for Kustomizations, run on the user's machine with their kubeconfig.

A top-floor room beside ``cli``, ``diff_command`` and ``approve_command``: it reads through the planner
``diff`` uses (``reconcile/preview.py``), the gate's window evaluation (``reconcile/gate/windows.py``) and
the controller's informers (``runtime/informer.py``); nothing below imports it (import-linter layers).

Modules, one concept each:

- ``model``: what a page shows, computed from plain objects (pure): a Kustomization's state, the fleet's
  rows and counts, the dependency graph, the inventory tree, the sync windows, a side-by-side diff.
- ``live``: one informer per resource type (Kustomizations, their events, the sources, the fleet windows'
  ConfigMap) shared by every open page, and the hub that batches what changed every 250 ms for the pages.
- ``reads``: what a page asks for on demand, as the user, with timeouts: the inventory's health (kstatus),
  an object's live YAML with Secret values masked.
- ``plan``: the pending plan as ``diff`` computes it.
- ``actions``: reconcile now, suspend, resume, approve — each one write, as the user.
- ``security``: the session, CSRF token, same-origin and Host checks, the headers every answer carries.
- ``server``: the aiohttp application (routes, templates, Server-Sent Events) and its lifecycle.
- ``command``: the ``ui`` command's flags and its main.

Templates (Jinja2, autoescaping) are in ``templates/``; the plain JavaScript and CSS in ``static/``, with the
graph library vendored in ``static/vendor/`` (its README gives versions and licences). Security model and
deployment: ``docs/ui.md``.
"""
